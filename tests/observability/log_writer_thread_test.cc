#include "observability/log_writer_thread.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "util/test_pipe.h"

namespace harrier {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

using ::harrier::testing::TestPipe;

std::string Lines(int n, size_t width) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    std::string line = std::to_string(i);
    line.resize(width - 1, '.');
    text += line + "\n";
  }
  return text;
}

TEST(LogWriterThreadTest, AReaderGetsEveryLineWhole) {
  TestPipe pipe;
  const std::string text = Lines(100, 100);
  std::string got;
  std::thread reader([&] {
    char buf[4096];
    while (got.size() < text.size()) {
      const ssize_t n = ::read(pipe.read_fd(), buf, sizeof(buf));
      if (n <= 0) break;
      got.append(buf, n);
    }
  });
  size_t written = 0;
  LogWriterThread writer;
  writer.Start([&] { written = writer.Write(pipe.write_fd(), text, /*regular_file=*/false); });
  EXPECT_TRUE(writer.Join(milliseconds(10000)));
  reader.join();
  EXPECT_EQ(written, text.size());
  EXPECT_EQ(got, text);
}

// A pipe whose reader stopped reading (a stuck log shipper on stderr): the write blocks, and
// Join gives up on it after its grace period instead of waiting for the reader.
TEST(LogWriterThreadTest, AJoinAbandonsAWriteThatBlocksAfterItsGrace) {
  TestPipe pipe;
  const std::string text = Lines(2000, 100);  // 200 KB: more than a pipe holds (64 KiB)
  std::atomic<size_t> written{0};
  std::atomic<bool> stop{false};
  LogWriterThread writer;
  writer.Start([&] {
    while (!stop) written += writer.Write(pipe.write_fd(), text, /*regular_file=*/false);
  });
  std::this_thread::sleep_for(milliseconds(100));  // the pipe fills; the write blocks
  stop = true;
  const auto start = steady_clock::now();
  EXPECT_FALSE(writer.Join(milliseconds(200)));
  const auto took = steady_clock::now() - start;
  EXPECT_GE(took, milliseconds(200));
  EXPECT_LT(took, milliseconds(5000));
  EXPECT_TRUE(writer.abandoned());
  // What was written is whole lines (each write at most PIPE_BUF, ending at a line's end).
  const std::string in_pipe = pipe.Unread();
  EXPECT_EQ(in_pipe.size(), written.load());
  ASSERT_FALSE(in_pipe.empty());
  EXPECT_EQ(in_pipe.back(), '\n');
  EXPECT_EQ(in_pipe, text.substr(0, in_pipe.size()));
  // Later writes give up at once.
  EXPECT_EQ(writer.Write(pipe.write_fd(), "x\n", false), 0u);
}

TEST(LogWriterThreadTest, AJoinWithinItsGraceAbandonsNothing) {
  TestPipe pipe;
  LogWriterThread writer;
  writer.Start([&] { writer.Write(pipe.write_fd(), "one line\n", false); });
  EXPECT_TRUE(writer.Join(milliseconds(10000)));
  EXPECT_FALSE(writer.abandoned());
  EXPECT_TRUE(writer.Join(milliseconds(0)));  // again: the same answer
  EXPECT_EQ(pipe.Unread(), "one line\n");
}

}  // namespace
}  // namespace harrier
