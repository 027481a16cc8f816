#include "repository/model_fingerprint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "repository/model_config_parser.h"
#include "repository/repository_scan.h"

namespace harrier {
namespace {

namespace fs = std::filesystem;

class ModelFingerprintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("harrier_fingerprint_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    Write("m/config.pbtxt", "max_batch_size: 0\n");
    Write("m/1/model.onnx", "one");
    Write("m/2/model.onnx", "two");
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const std::string& relative, const std::string& content) {
    fs::create_directories((root_ / relative).parent_path());
    std::ofstream(root_ / relative, std::ios::trunc) << content;
  }
  uint64_t Of(int64_t version) {
    auto dirs = ScanRepository(root_.string());
    EXPECT_TRUE(dirs.ok());
    if (!dirs.ok() || dirs->empty()) return 0;
    auto fp = ModelFingerprint(LocalFileSystem(), dirs->front(), version);
    EXPECT_TRUE(fp.ok()) << fp.status().ToString();
    return fp.ok() ? *fp : 0;
  }

  fs::path root_;
};

TEST_F(ModelFingerprintTest, SameFilesSameFingerprint) {
  EXPECT_EQ(Of(1), Of(1));
  EXPECT_NE(Of(1), Of(2));
}

TEST_F(ModelFingerprintTest, AConfigEditChangesEveryVersion) {
  const uint64_t one = Of(1), two = Of(2);
  Write("m/config.pbtxt", "max_batch_size: 8\n");
  EXPECT_NE(Of(1), one);
  EXPECT_NE(Of(2), two);
}

// A config too large to load is fingerprinted by its size and time, unread: a change to it is
// still seen.
TEST_F(ModelFingerprintTest, AnOversizedConfigIsFingerprintedUnread) {
  Write("m/config.pbtxt", std::string(kMaxModelConfigBytes + 1, ' '));
  const uint64_t big = Of(1);
  EXPECT_NE(big, 0u);
  Write("m/config.pbtxt", std::string(kMaxModelConfigBytes + 2, ' '));
  EXPECT_NE(Of(1), big);
}

TEST_F(ModelFingerprintTest, AFileChangeChangesOnlyItsVersion) {
  const uint64_t one = Of(1), two = Of(2);
  Write("m/2/model.onnx", "two, retrained");  // another size
  EXPECT_EQ(Of(1), one);
  EXPECT_NE(Of(2), two);
  const uint64_t retrained = Of(2);
  Write("m/2/extra/weights.bin", "w");  // a file added in a subdirectory
  EXPECT_NE(Of(2), retrained);
}

TEST_F(ModelFingerprintTest, ANewerFileOfTheSameSizeChangesIt) {
  const uint64_t one = Of(1);
  const fs::path model = root_ / "m/1/model.onnx";
  fs::last_write_time(model, fs::last_write_time(model) + std::chrono::seconds(5));
  EXPECT_NE(Of(1), one);
}

// A chmod or chown changes no size or time, and is what repairs a load that failed with
// "Permission denied": a poll must see it (probe 68: readiness stayed 503 until a touch).
TEST_F(ModelFingerprintTest, APermissionOrOwnerChangeChangesIt) {
  const uint64_t before = Of(1);
  const fs::path model = root_ / "m/1/model.onnx";
  fs::permissions(model, fs::perms::owner_read | fs::perms::owner_write);
  const uint64_t private_file = Of(1);
  EXPECT_NE(private_file, before);
  fs::permissions(model, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                             fs::perms::others_read);
  EXPECT_NE(Of(1), private_file);
  Write("m/1/sub/weights.bin", "w");
  const uint64_t with_sub = Of(1);
  fs::permissions(root_ / "m/1/sub", fs::perms::owner_all);
  EXPECT_NE(Of(1), with_sub);
  ASSERT_EQ(::chown(model.c_str(), ::getuid(), ::getgid()), 0);  // unchanged owner: the same
  const uint64_t same = Of(1);
  EXPECT_EQ(Of(1), same);
  EXPECT_EQ(Of(2), Of(2));
}

// A version whose files cannot be walked has a fingerprint of its error: stable while the
// error is (a poll does not retry it, and log it, every time), never 0 ("none").
TEST_F(ModelFingerprintTest, AnUnreadableVersionsFingerprintFollowsItsError) {
  const Status denied = Internal("cannot list 'm/1': Permission denied");
  EXPECT_EQ(UnreadableFingerprint(denied), UnreadableFingerprint(denied));
  EXPECT_NE(UnreadableFingerprint(denied), 0u);
  EXPECT_NE(UnreadableFingerprint(denied),
            UnreadableFingerprint(Internal("cannot list 'm/1': Too many open files")));
  EXPECT_NE(UnreadableFingerprint(denied), Of(1));
}

// Links to "." fan out: four of them made 4^16 listings within the depth bound, and the load
// (and the stop) never ended (probe 29). The walk is bounded in entries too.
TEST_F(ModelFingerprintTest, LinksThatFanOutEndTheWalkWithAnError) {
  for (const char* link : {"l0", "l1", "l2", "l3"})
    fs::create_directory_symlink(".", root_ / "m/1" / link);
  auto dirs = ScanRepository(root_.string());
  ASSERT_TRUE(dirs.ok());
  const auto start = std::chrono::steady_clock::now();
  auto fp = ModelFingerprint(LocalFileSystem(), dirs->front(), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  ASSERT_FALSE(fp.ok());
  EXPECT_NE(fp.status().message().find("more than 100000 entries"), std::string::npos)
      << fp.status().ToString();
  EXPECT_TRUE(ModelFingerprint(LocalFileSystem(), dirs->front(), 2).ok());
}

TEST_F(ModelFingerprintTest, AMissingVersionDirectoryIsAnError) {
  auto dirs = ScanRepository(root_.string());
  ASSERT_TRUE(dirs.ok());
  EXPECT_FALSE(ModelFingerprint(LocalFileSystem(), dirs->front(), 7).ok());
}

}  // namespace
}  // namespace harrier
