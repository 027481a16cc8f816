#include "repository/override_directory.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace harrier {
namespace {

namespace fs = std::filesystem;

class OverrideDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    parent_ = fs::temp_directory_path() /
              ("harrier-override-test-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(parent_);
    fs::create_directories(parent_);
  }
  void TearDown() override { fs::remove_all(parent_); }

  static std::string Read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  size_t EntriesInParent() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(parent_), {}));
  }

  fs::path parent_;
};

TEST(ValidateFileOverridesTest, AcceptsVersionedRelativePaths) {
  auto versions = ValidateFileOverrides(
      {{"2/model.onnx", "x"}, {"1/model.onnx", "y"}, {"1/sub/weights.bin", "z"}}, true);
  ASSERT_TRUE(versions.ok()) << versions.status().ToString();
  EXPECT_EQ(*versions, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(ValidateFileOverrides({}, false).ok());  // no files: nothing to check
  // A file at the model's top level (the labels a config's label_filename names) beside them.
  versions = ValidateFileOverrides({{"1/model.onnx", "x"}, {"labels.txt", "cat\ndog\n"}}, true);
  ASSERT_TRUE(versions.ok()) << versions.status().ToString();
  EXPECT_EQ(*versions, (std::vector<int64_t>{1}));
}

TEST(ValidateFileOverridesTest, RefusesEachBrokenRuleNamingIt) {
  struct Case {
    std::vector<ModelFileOverride> files;
    bool has_config;
    std::string words;
  };
  const std::vector<Case> cases = {
      {{{"1/model.onnx", ""}}, false, "parameters.config must be given"},
      {{{"/etc/passwd", ""}}, true, "absolute paths"},
      {{{"1/../../x", ""}}, true, "'..'"},
      {{{"../1/model.onnx", ""}}, true, "'..'"},
      {{{"1/./model.onnx", ""}}, true, "'.'"},
      {{{"1//model.onnx", ""}}, true, "empty path segments"},
      {{{"1/model.onnx/", ""}}, true, "empty path segments"},
      {{{"", ""}}, true, "the path is empty"},
      {{{"model.onnx", ""}}, true, "name no version"},
      {{{"labels.txt", ""}, {"notes.txt", ""}}, true, "name no version"},
      {{{"1/model.onnx", ""}, {"config.pbtxt", ""}}, true, "parameters.config"},
      {{{"1", ""}}, true, "expected <version>/<file>"},
      {{{"0/model.onnx", ""}}, true, "version number"},
      {{{"01/model.onnx", ""}}, true, "version number"},
      {{{"-1/model.onnx", ""}}, true, "version number"},
      {{{"v1/model.onnx", ""}}, true, "version number"},
      {{{std::string("1/a\0b", 5), ""}}, true, "NUL"},
      {{{"1/" + std::string(1100, 'a'), ""}}, true, "longer than 1024"},
      // simple_grpc_model_control.py's case: Triton's words, "Invalid file path".
      {{{std::string(256, 'A'), ""}}, true, "Invalid file path: file override 'file:AAA"},
      {{{"1/" + std::string(256, 'a'), ""}}, true, "longer than 255 bytes (NAME_MAX)"},
      {{{"1/model.onnx", ""}, {"1/model.onnx", ""}}, true, "given twice"},
      {{{"1/a", ""}, {"1/a/b", ""}}, true, "also the directory of another"},
  };
  for (const Case& c : cases) {
    auto checked = ValidateFileOverrides(c.files, c.has_config);
    ASSERT_FALSE(checked.ok()) << c.words;
    EXPECT_EQ(checked.status().code(), StatusCode::kInvalidArgument) << c.words;
    EXPECT_NE(checked.status().message().find(c.words), std::string::npos)
        << c.words << ": " << checked.status().ToString();
  }
}

TEST(ValidateFileOverridesTest, CapsTheNumberOfFiles) {
  std::vector<ModelFileOverride> files;
  for (size_t i = 1; i <= kMaxFileOverrides; ++i) files.push_back({std::to_string(i) + "/m", ""});
  EXPECT_TRUE(ValidateFileOverrides(files, true).ok());
  files.push_back({"999/m", ""});
  auto checked = ValidateFileOverrides(files, true);
  EXPECT_EQ(checked.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(checked.status().message().find("at most 64"), std::string::npos);
}

TEST_F(OverrideDirectoryTest, WritesPrivateFilesAndRemovesThemWhenDestroyed) {
  const std::string bytes("\x00\x01onnx\xff", 7);
  auto made = OverrideDirectory::Create(
      parent_.string(),
      {{"1/model.onnx", bytes}, {"3/sub/extra.bin", "e"}, {"labels.txt", "cat\n"}});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const fs::path dir = (*made)->path();
  EXPECT_EQ(dir.parent_path(), parent_);
  // Named for this process, so that a later start can tell it from a live server's.
  EXPECT_EQ(
      dir.filename().string().rfind("harrier-override-" + std::to_string(::getpid()) + "-", 0), 0u)
      << dir;
  EXPECT_EQ((*made)->versions(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(Read(dir / "1/model.onnx"), bytes);
  EXPECT_EQ(Read(dir / "3/sub/extra.bin"), "e");
  EXPECT_EQ(Read(dir / "labels.txt"), "cat\n");
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((dir / "1/model.onnx").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir / "3/sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  made->reset();
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_EQ(EntriesInParent(), 0u);
}

TEST_F(OverrideDirectoryTest, ARefusedPathWritesNothing) {
  auto made =
      OverrideDirectory::Create(parent_.string(), {{"1/model.onnx", "ok"}, {"1/../../x", "no"}});
  EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EntriesInParent(), 0u);
}

TEST_F(OverrideDirectoryTest, AParentThatCannotBeWrittenIsAnInternalError) {
  auto made = OverrideDirectory::Create((parent_ / "missing").string(), {{"1/m", ""}});
  EXPECT_EQ(made.status().code(), StatusCode::kInternal);
  // The server's own paths are for its log, not for the client (probe 68).
  EXPECT_EQ(made.status().message().find(parent_.string()), std::string::npos)
      << made.status().message();
  EXPECT_NE(made.status().message().find("the server's log says where"), std::string::npos);
}

TEST_F(OverrideDirectoryTest, AStartRemovesOnlyDirectoriesThatDeadServersLeft) {
  auto dir = [&](const std::string& name) {
    fs::create_directories(parent_ / name / "1");
    std::ofstream(parent_ / name / "1" / "model.onnx") << "m";
    return parent_ / name;
  };
  const fs::path dead = dir("harrier-override-111-abcdef");
  const fs::path alive = dir("harrier-override-222-abcdef");
  const fs::path own = dir("harrier-override-" + std::to_string(::getpid()) + "-abcdef");
  const fs::path short_suffix = dir("harrier-override-111-abcde");  // not mkdtemp's six
  const fs::path not_ours = dir("harrier-override-test-111-abcdef");
  const fs::path elsewhere = dir("elsewhere");
  fs::create_directory_symlink(elsewhere, parent_ / "harrier-override-333-abcdef");
  std::ofstream(parent_ / "harrier-override-444-abcdef") << "a file";

  const int removed =
      RemoveAbandonedOverrideDirectories(parent_.string(), [](pid_t pid) { return pid == 222; });
  EXPECT_EQ(removed, 2);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(own));  // a server at start has made none: an earlier one with its id
  EXPECT_TRUE(fs::exists(alive / "1" / "model.onnx"));
  EXPECT_TRUE(fs::exists(short_suffix));
  EXPECT_TRUE(fs::exists(not_ours));
  EXPECT_TRUE(fs::is_symlink(parent_ / "harrier-override-333-abcdef"));  // never followed
  EXPECT_TRUE(fs::exists(elsewhere / "1" / "model.onnx"));
  EXPECT_TRUE(fs::is_regular_file(parent_ / "harrier-override-444-abcdef"));
}

TEST_F(OverrideDirectoryTest, TheDefaultLivenessCheckKeepsARunningProcesssDirectory) {
  // The parent of this process is alive; an id above the kernel's limit never is.
  const fs::path parents =
      parent_ / ("harrier-override-" + std::to_string(::getppid()) + "-abcdef");
  const fs::path nobodys = parent_ / "harrier-override-99999999-abcdef";
  fs::create_directories(parents);
  fs::create_directories(nobodys);
  EXPECT_EQ(RemoveAbandonedOverrideDirectories(parent_.string()), 1);
  EXPECT_TRUE(fs::exists(parents));
  EXPECT_FALSE(fs::exists(nobodys));
  EXPECT_EQ(RemoveAbandonedOverrideDirectories((parent_ / "missing").string()), 0);
}

TEST_F(OverrideDirectoryTest, DefaultsToTmpdir) {
  const char* saved = std::getenv("TMPDIR");
  const std::string restore = saved ? saved : "";
  ::setenv("TMPDIR", parent_.c_str(), 1);
  auto made = OverrideDirectory::Create("", {{"1/m", "x"}});
  if (saved) {
    ::setenv("TMPDIR", restore.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(fs::path((*made)->path()).parent_path(), parent_);
}

}  // namespace
}  // namespace harrier
