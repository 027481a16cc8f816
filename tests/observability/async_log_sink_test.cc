#include "observability/async_log_sink.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

namespace harrier {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

struct Pipe {
  int read = -1, write = -1;
  Pipe() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    read = fds[0];
    write = fds[1];
  }
  ~Pipe() {
    ::close(read);
    ::close(write);
  }
};

std::string ReadAll(int fd) {  // to end of file
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) out.append(buf, n);
  return out;
}

TEST(AsyncLogSinkTest, LinesAreWrittenInOrderAsFormatted) {
  Pipe pipe;
  AsyncLogSink::Options options;
  options.fd = pipe.write;
  auto sink = std::make_shared<AsyncLogSink>(options);
  spdlog::logger logger("test", sink);
  logger.set_pattern("%L %v");
  logger.info("first {}", 1);
  logger.warn("second");
  logger.error("third");
  EXPECT_TRUE(sink->Stop(milliseconds(10000)));
  ::close(pipe.write);
  pipe.write = -1;
  EXPECT_EQ(ReadAll(pipe.read), "I first 1\nW second\nE third\n");
  EXPECT_EQ(sink->dropped_lines(), 0u);
}

// Before std::_Exit (a third signal), a flush is what gets the last line out: the process ends
// without the sink's destructor.
TEST(AsyncLogSinkTest, AFlushReturnsOnceTheLinesLoggedBeforeItAreWritten) {
  Pipe pipe;
  AsyncLogSink::Options options;
  options.fd = pipe.write;
  auto sink = std::make_shared<AsyncLogSink>(options);
  spdlog::logger logger("test", sink);
  logger.set_pattern("%v");
  std::string expected;
  for (int i = 0; i < 100; ++i) {
    logger.info("line {}", i);
    expected += "line " + std::to_string(i) + "\n";
  }
  logger.flush();
  const int flags = ::fcntl(pipe.read, F_GETFL);
  ::fcntl(pipe.read, F_SETFL, flags | O_NONBLOCK);
  std::string in_pipe;
  char buf[65536];
  for (ssize_t n; (n = ::read(pipe.read, buf, sizeof(buf))) > 0;) in_pipe.append(buf, n);
  EXPECT_EQ(in_pipe, expected);
}

TEST(AsyncLogSinkTest, ColorWrapsTheLevelOnly) {
  Pipe pipe;
  AsyncLogSink::Options options;
  options.fd = pipe.write;
  options.color = true;
  auto sink = std::make_shared<AsyncLogSink>(options);
  spdlog::logger logger("test", sink);
  logger.set_pattern("[%^%L%$] %v");
  logger.warn("careful");
  sink->Stop(milliseconds(10000));
  ::close(pipe.write);
  pipe.write = -1;
  EXPECT_EQ(ReadAll(pipe.read), "[\033[33m\033[1mW\033[m] careful\n");
}

// stderr is a pipe whose reader has stopped reading (a stuck log shipper). Logging never waits
// for it: the lines that do not fit are dropped and counted. The stop ends within its grace.
TEST(AsyncLogSinkTest, AStalledReaderNeverHoldsTheLoggingThreadAndTheStopEnds) {
  Pipe pipe;
  AsyncLogSink::Options options;
  options.fd = pipe.write;
  options.buffer_bytes = 64u << 10;
  auto sink = std::make_shared<AsyncLogSink>(options);
  spdlog::logger logger("test", sink);
  logger.set_pattern("%v");
  const std::string line(200, 'x');
  const auto start = steady_clock::now();
  for (int i = 0; i < 5000; ++i) logger.info(line);  // 1 MB: the pipe and buffer hold ~130 KB
  EXPECT_LT(steady_clock::now() - start, milliseconds(5000));
  EXPECT_GT(sink->dropped_lines(), 0u);
  const auto stop = steady_clock::now();
  EXPECT_FALSE(sink->Stop(milliseconds(100)));  // what is buffered is abandoned
  EXPECT_LT(steady_clock::now() - stop, milliseconds(5000));
  // Each line was written, dropped at once, or abandoned at the stop: none is unaccounted.
  const int flags = ::fcntl(pipe.read, F_GETFL);
  ::fcntl(pipe.read, F_SETFL, flags | O_NONBLOCK);
  std::string in_pipe;
  char buf[65536];
  for (ssize_t n; (n = ::read(pipe.read, buf, sizeof(buf))) > 0;) in_pipe.append(buf, n);
  EXPECT_EQ(in_pipe.size() % (line.size() + 1), 0u);
  EXPECT_EQ(in_pipe.size() / (line.size() + 1) + sink->dropped_lines(), 5000u);
  logger.info("after the stop");  // dropped and counted, never written
  EXPECT_EQ(in_pipe.size() / (line.size() + 1) + sink->dropped_lines(), 5001u);
}

}  // namespace
}  // namespace harrier
