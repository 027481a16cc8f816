#include "repository/repository_scan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace harrier {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

class RepositoryScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("harrier_scan_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void Touch(const fs::path& relative) {
    fs::create_directories((root_ / relative).parent_path());
    std::ofstream(root_ / relative) << "x";
  }
  void Mkdir(const fs::path& relative) { fs::create_directories(root_ / relative); }

  fs::path root_;
};

// A name that is not UTF-8 cannot be written in JSON or a metric's label: one such directory
// made the whole index and every scrape unreadable (probe 29). It is skipped.
TEST_F(RepositoryScanTest, ADirectoryWhoseNameIsNotUtf8IsSkipped) {
  Touch("bad\xffname/1/model.onnx");
  Touch("line\nbreak/1/model.onnx");  // a control character split the log's lines (probe 32)
  Touch("caf\xc3\xa9/1/model.onnx");  // UTF-8: kept
  StatusOr<std::vector<ModelDirectory>> models = ScanRepository(root_.string());
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  ASSERT_EQ(models->size(), 1u);
  EXPECT_EQ((*models)[0].name, "caf\xc3\xa9");
}

// A config.pbtxt that is there but cannot be read as a file fails its model, saying why: the
// model loaded with a completed config instead, without a word (probe 29).
TEST_F(RepositoryScanTest, AConfigThatIsNotAFileFailsItsModel) {
  Touch("fine/1/model.onnx");
  Touch("fine/config.pbtxt");
  Mkdir("dir/config.pbtxt");
  Touch("dangling/1/model.onnx");
  fs::create_symlink("nowhere", root_ / "dangling/config.pbtxt");
  Mkdir("loop/1");
  fs::create_symlink("config.pbtxt", root_ / "loop/config.pbtxt");
  Mkdir("fifo/1");
  ASSERT_EQ(::mkfifo((root_ / "fifo/config.pbtxt").c_str(), 0600), 0);
  StatusOr<std::vector<ModelDirectory>> models = ScanRepository(root_.string());
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  ASSERT_EQ(models->size(), 5u);
  std::map<std::string, std::string> errors;
  for (const ModelDirectory& m : *models) errors[m.name] = std::string(m.error.message());
  EXPECT_EQ(errors["fine"], "");
  EXPECT_NE(errors["dir"].find("is a directory"), std::string::npos) << errors["dir"];
  EXPECT_NE(errors["dangling"].find("link to nothing"), std::string::npos) << errors["dangling"];
  EXPECT_NE(errors["loop"].find("config.pbtxt"), std::string::npos) << errors["loop"];
  EXPECT_NE(errors["fifo"].find("not a regular file"), std::string::npos) << errors["fifo"];
}

TEST_F(RepositoryScanTest, FindsModelsVersionsAndConfigs) {
  Touch("resnet/config.pbtxt");
  Touch("resnet/1/model.onnx");
  Touch("resnet/3/model.onnx");
  Mkdir("resnet/10");
  Mkdir("resnet/0");       // Triton ignores version 0 ...
  Mkdir("resnet/007");     // ... and leading zeros ...
  Mkdir("resnet/latest");  // ... and non-numeric names
  Touch("resnet/2");       // a file, not a version directory
  Mkdir("bert");           // no config, no versions: still a model
  Mkdir(".git/objects");   // hidden: not a model
  Touch("README.md");      // a file at the root: not a model
  Touch("alpha/1/model.onnx");

  StatusOr<std::vector<ModelDirectory>> models = ScanRepository(root_.string());
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  ASSERT_EQ(models->size(), 3u);
  EXPECT_EQ((*models)[0].name, "alpha");
  EXPECT_EQ((*models)[1].name, "bert");
  EXPECT_EQ((*models)[2].name, "resnet");

  const ModelDirectory& resnet = (*models)[2];
  EXPECT_EQ(resnet.path, (root_ / "resnet").string());
  EXPECT_EQ(resnet.config_path, (root_ / "resnet" / "config.pbtxt").string());
  EXPECT_THAT(resnet.versions, ElementsAre(1, 3, 10));
  EXPECT_TRUE(resnet.error.ok());

  const ModelDirectory& bert = (*models)[1];
  EXPECT_EQ(bert.config_path, "");
  EXPECT_TRUE(bert.versions.empty());
  EXPECT_THAT((*models)[0].versions, ElementsAre(1));
}

TEST_F(RepositoryScanTest, EmptyRepositoryHasNoModels) {
  StatusOr<std::vector<ModelDirectory>> models = ScanRepository(root_.string());
  ASSERT_TRUE(models.ok());
  EXPECT_TRUE(models->empty());
}

TEST_F(RepositoryScanTest, FollowsSymlinkedModelDirectories) {
  Touch("elsewhere/1/model.onnx");
  fs::create_directory_symlink(root_ / "elsewhere", root_ / "linked");
  StatusOr<std::vector<ModelDirectory>> models = ScanRepository(root_.string());
  ASSERT_TRUE(models.ok());
  ASSERT_EQ(models->size(), 2u);
  EXPECT_EQ((*models)[1].name, "linked");
  EXPECT_THAT((*models)[1].versions, ElementsAre(1));
}

TEST_F(RepositoryScanTest, SymlinkLoopIsAModelThatCannotBeRead) {
  Touch("good/1/model.onnx");
  fs::create_directory_symlink(root_ / "loop", root_ / "loop");  // points at itself
  fs::create_directory_symlink(root_ / "ping", root_ / "pong");  // two links, each at the other
  fs::create_directory_symlink(root_ / "pong", root_ / "ping");
  fs::create_directory_symlink(root_ / "nowhere", root_ / "dangling");  // still skipped
  StatusOr<std::vector<ModelDirectory>> models = ScanRepository(root_.string());
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  ASSERT_EQ(models->size(), 4u);
  EXPECT_EQ((*models)[0].name, "good");
  EXPECT_TRUE((*models)[0].error.ok());
  for (int i : {1, 2, 3}) {
    const ModelDirectory& m = (*models)[i];
    SCOPED_TRACE(m.name);
    EXPECT_EQ(m.path, (root_ / m.name).string());
    EXPECT_FALSE(m.error.ok());
    EXPECT_THAT(m.error.message(), HasSubstr("symbolic link"));
    EXPECT_THAT(m.error.message(), HasSubstr(m.path));
    EXPECT_TRUE(m.versions.empty());
  }
  EXPECT_EQ((*models)[1].name, "loop");
  EXPECT_EQ((*models)[2].name, "ping");
  EXPECT_EQ((*models)[3].name, "pong");
}

TEST_F(RepositoryScanTest, MissingRootIsNotFound) {
  StatusOr<std::vector<ModelDirectory>> models = ScanRepository((root_ / "nope").string());
  ASSERT_FALSE(models.ok());
  EXPECT_EQ(models.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(models.status().message(), HasSubstr("nope"));
}

TEST_F(RepositoryScanTest, RootThatIsAFileIsInvalidArgument) {
  Touch("file");
  StatusOr<std::vector<ModelDirectory>> models = ScanRepository((root_ / "file").string());
  ASSERT_FALSE(models.ok());
  EXPECT_EQ(models.status().code(), StatusCode::kInvalidArgument);
}

// An in-memory file system whose directories can be made to fail listing.
class FakeFileSystem final : public FileSystem {
 public:
  std::map<std::string, std::vector<DirectoryEntry>> dirs;
  std::map<std::string, Status> list_errors;

  StatusOr<FileType> GetFileType(const std::string& path) const override {
    return dirs.count(path) ? FileType::kDirectory : FileType::kNotFound;
  }
  StatusOr<std::vector<DirectoryEntry>> ListDirectory(const std::string& path) const override {
    if (auto it = list_errors.find(path); it != list_errors.end()) return it->second;
    auto it = dirs.find(path);
    if (it == dirs.end()) return NotFound("no such directory '" + path + "'");
    return it->second;
  }
  StatusOr<std::string> ReadFile(const std::string& path) const override {
    return NotFound("no such file '" + path + "'");
  }
};

TEST(RepositoryScanFaultTest, UnreadableModelDirectoryIsRecordedAndOthersStillScan) {
  FakeFileSystem fs;
  fs.dirs["/repo"] = {{"good", FileType::kDirectory, Status::Ok()},
                      {"locked", FileType::kDirectory, Status::Ok()}};
  fs.dirs["/repo/good"] = {{"1", FileType::kDirectory, Status::Ok()},
                           {"config.pbtxt", FileType::kRegular, Status::Ok()}};
  fs.list_errors["/repo/locked"] = Internal("cannot list '/repo/locked': Permission denied");

  StatusOr<std::vector<ModelDirectory>> models = ScanRepository("/repo", fs);
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  ASSERT_EQ(models->size(), 2u);
  EXPECT_TRUE((*models)[0].error.ok());
  EXPECT_THAT((*models)[0].versions, ElementsAre(1));
  EXPECT_EQ((*models)[0].config_path, "/repo/good/config.pbtxt");
  EXPECT_EQ((*models)[1].name, "locked");
  EXPECT_EQ((*models)[1].error.code(), StatusCode::kInternal);
  EXPECT_THAT((*models)[1].error.message(), HasSubstr("Permission denied"));
  EXPECT_TRUE((*models)[1].versions.empty());
}

TEST(RepositoryScanFaultTest, UnreadableRootFailsTheScan) {
  FakeFileSystem fs;
  fs.list_errors["/repo"] = Internal("cannot list '/repo': Permission denied");
  StatusOr<std::vector<ModelDirectory>> models = ScanRepository("/repo", fs);
  ASSERT_FALSE(models.ok());
  EXPECT_EQ(models.status().code(), StatusCode::kInternal);
  EXPECT_THAT(models.status().message(), HasSubstr("model repository"));
}

TEST(ParseVersionDirectoryNameTest, Table) {
  const struct {
    const char* name;
    int64_t version;
  } cases[] = {
      {"1", 1},
      {"42", 42},
      {"9223372036854775807", 9223372036854775807LL},
      {"9223372036854775808", -1},  // beyond int64
      {"0", -1},
      {"01", -1},
      {"", -1},
      {"-1", -1},
      {"+1", -1},
      {"1a", -1},
      {"v1", -1},
      {" 1", -1},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ParseVersionDirectoryName(c.name), c.version) << "name: '" << c.name << "'";
  }
}

}  // namespace
}  // namespace harrier
