#include "repository/model_fingerprint.h"

#include <gtest/gtest.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

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

// A chmod, chown or ACL change changes no size or modification time, and is what repairs a
// load that failed with "Permission denied": a poll must see it (probe 68: readiness stayed 503
// until a touch). The status change time says it.
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
  // A chmod or chown to what it was, a hard link, a read: no change (a needless reload).
  const uint64_t now = Of(1);
  ASSERT_EQ(::chown(model.c_str(), ::getuid(), ::getgid()), 0);
  fs::permissions(model, fs::status(model).permissions());
  fs::create_hard_link(model, root_ / "hard_link");
  EXPECT_EQ(Of(1), now);
  // An ACL that lets another user read it (what `setfacl -m u:65534:r` writes; the mode bits
  // stay as they are).
  struct Entry {
    uint16_t tag, perm;
    uint32_t id;
  };
  const uint32_t header = 2;
  const Entry entries[] = {{0x01, 6, 0xFFFFFFFF},
                           {0x02, 4, 65534},
                           {0x04, 4, 0xFFFFFFFF},
                           {0x10, 4, 0xFFFFFFFF},
                           {0x20, 4, 0xFFFFFFFF}};
  std::string acl(reinterpret_cast<const char*>(&header), sizeof(header));
  acl.append(reinterpret_cast<const char*>(entries), sizeof(entries));
  if (::setxattr(model.c_str(), "system.posix_acl_access", acl.data(), acl.size(), 0) == 0) {
    EXPECT_NE(Of(1), now);
  } else {
    GTEST_LOG_(INFO) << "no POSIX ACLs on this file system; the ACL case is not checked";
  }
}

// A label file (label_filename, in the model's directory) is read at load: a fixed one is a
// change, for every version (probe 71).
TEST_F(ModelFingerprintTest, ALabelFileTheConfigNamesCounts) {
  Write("m/config.pbtxt",
        "max_batch_size: 0 output [{ name: \"y\" label_filename: \"labels.txt\" }]");
  const uint64_t without = Of(1);
  Write("m/labels.txt", "cat\n");
  const uint64_t with = Of(1);
  EXPECT_NE(with, without);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  fs::permissions(root_ / "m/labels.txt", fs::perms::owner_read);
  EXPECT_NE(Of(1), with);
  Write("m/other.txt", "not named");
  const uint64_t now = Of(1);
  EXPECT_EQ(Of(1), now);
  // A name that leaves the model's directory is one the load never reads (it fails): what it
  // names is not watched (probe 72: a log file outside made every poll retry).
  Write("m/config.pbtxt",
        "max_batch_size: 0 output [{ name: \"y\" label_filename: \"../outside.log\" }]");
  Write("outside.log", "one line\n");
  const uint64_t outside = Of(1);
  Write("outside.log", "one line\nand another, longer\n");
  EXPECT_EQ(Of(1), outside);
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
// (and the stop) never ended (probe 29). The walk is bounded in entries too, and a version's
// own files count first: a change to its model file is seen whatever its sub-directories hold
// (probe 71: the budget ran out before model.onnx, and a new one went unseen).
TEST_F(ModelFingerprintTest, LinksThatFanOutAreWalkedAsFarAsTheBudgetAndFilesStillCount) {
  for (const char* link : {"l0", "l1", "l2", "l3"})
    fs::create_directory_symlink(".", root_ / "m/1" / link);
  const auto start = std::chrono::steady_clock::now();
  const uint64_t before = Of(1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(Of(1), before);
  Write("m/1/model.onnx", "one, replaced");
  EXPECT_NE(Of(1), before);
}

// A sub-directory that cannot be listed is one entry, its error: the rest of the version is
// walked (probe 71: an unreadable sub-directory made the whole version's fingerprint its error,
// and a replaced model.onnx was never loaded).
TEST_F(ModelFingerprintTest, AnUnlistableSubDirectoryHidesNoOtherChange) {
  fs::create_directory_symlink(root_ / "m/1/sub", root_ / "m/1/sub");  // a loop: ELOOP
  const uint64_t before = Of(1);
  EXPECT_EQ(Of(1), before);
  Write("m/1/model.onnx", "one, replaced");
  EXPECT_NE(Of(1), before);
}

TEST_F(ModelFingerprintTest, AMissingVersionDirectoryIsAnError) {
  auto dirs = ScanRepository(root_.string());
  ASSERT_TRUE(dirs.ok());
  EXPECT_FALSE(ModelFingerprint(LocalFileSystem(), dirs->front(), 7).ok());
}

}  // namespace
}  // namespace harrier
