#include "repository/file_system.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace harrier {
namespace {

namespace fs = std::filesystem;

TEST(LocalFileSystemTest, ReadsAFileWhole) {
  const fs::path path = fs::temp_directory_path() / ("fs_test_" + std::to_string(getpid()));
  std::ofstream(path) << "line 1\nline 2\n";
  auto text = LocalFileSystem().ReadFile(path.string());
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "line 1\nline 2\n");
  fs::remove(path);
}

// A config or labels file linked to a kernel file: a read error ended the process with an
// uncaught exception (an ifstream's), and an endless file had no bound (probe 29).
TEST(LocalFileSystemTest, AKernelFileThatFailsOrNeverEndsIsAnErrorNotACrash) {
  auto pagemap = LocalFileSystem().ReadFile("/proc/self/pagemap");
  ASSERT_FALSE(pagemap.ok());
  EXPECT_EQ(pagemap.status().code(), StatusCode::kInvalidArgument);
  auto endless = LocalFileSystem().ReadFile("/dev/zero");  // a device: not a regular file
  ASSERT_FALSE(endless.ok());
}

// A FIFO, which a link may make look like a config: refused, never waited on.
TEST(LocalFileSystemTest, AFifoIsRefusedWithoutBlocking) {
  const fs::path path = fs::temp_directory_path() / ("fs_fifo_" + std::to_string(getpid()));
  fs::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto text = LocalFileSystem().ReadFile(path.string());
  EXPECT_FALSE(text.ok());
  fs::remove(path);
}

}  // namespace
}  // namespace harrier
