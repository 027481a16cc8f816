#include "core/file_read.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace harrier {
namespace {

TEST(FileReadTest, ReadsARegularFileWithinItsBound) {
  const std::string path = ::testing::TempDir() + "/file_read_test_" + std::to_string(getpid());
  std::ofstream(path) << "0123456789";
  auto read = ReadRegularFile(path, 10);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, "0123456789");
  auto over = ReadRegularFile(path, 9);
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find("is over 9 bytes"), std::string::npos);
  std::filesystem::remove(path);
  EXPECT_EQ(ReadRegularFile(path, 10).status().code(), StatusCode::kNotFound);
}

// What an operator or a repository author may name instead of a file: each is refused at once,
// naming what it is, never read (an endless device filled memory; a FIFO blocked for good).
TEST(FileReadTest, WhatIsNotARegularFileIsRefusedUnread) {
  auto device = ReadRegularFile("/dev/zero", 1 << 20);
  EXPECT_EQ(device.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(device.status().message().find("it is a device"), std::string::npos);
  auto dir = ReadRegularFile(::testing::TempDir(), 1 << 20);
  EXPECT_NE(dir.status().message().find("it is a directory"), std::string::npos);
  const std::string fifo = ::testing::TempDir() + "/file_read_fifo_" + std::to_string(getpid());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto piped = ReadRegularFile(fifo, 1 << 20);
  EXPECT_NE(piped.status().message().find("it is a FIFO"), std::string::npos);
  std::filesystem::remove(fifo);
}

}  // namespace
}  // namespace harrier
