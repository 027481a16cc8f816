#include "observability/async_log_sink.h"

#include <gtest/gtest.h>
#include <spdlog/logger.h>

#include <chrono>
#include <memory>
#include <string>

#include "util/test_pipe.h"

namespace harrier {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

using ::harrier::testing::TestPipe;

// A sink writing to `pipe` and a logger writing "%v" (or `pattern`) through it.
struct Logged {
  explicit Logged(const TestPipe& pipe, AsyncLogSink::Options options = {},
                  const char* pattern = "%v")
      : sink(MakeSink(pipe, options)), logger("test", sink) {
    logger.set_pattern(pattern);
  }
  static std::shared_ptr<AsyncLogSink> MakeSink(const TestPipe& pipe,
                                                AsyncLogSink::Options options) {
    options.fd = pipe.write_fd();
    return std::make_shared<AsyncLogSink>(options);
  }
  std::shared_ptr<AsyncLogSink> sink;
  spdlog::logger logger;
};

TEST(AsyncLogSinkTest, LinesAreWrittenInOrderAsFormatted) {
  TestPipe pipe;
  Logged log(pipe, {}, "%L %v");
  log.logger.info("first {}", 1);
  log.logger.warn("second");
  log.logger.error("third");
  EXPECT_TRUE(log.sink->Stop(milliseconds(10000)));
  pipe.CloseWrite();
  EXPECT_EQ(pipe.ReadToEnd(), "I first 1\nW second\nE third\n");
  EXPECT_EQ(log.sink->dropped_lines(), 0u);
}

// While stderr takes lines, each is written before the logging call returns, as with a
// synchronous sink: a test (or a person) that reads the log after the server answered finds
// the line the server logged before answering (integration_triton_qa_http once did not).
TEST(AsyncLogSinkTest, ALineIsWrittenBeforeTheCallReturns) {
  TestPipe pipe;
  Logged log(pipe);
  for (int i = 0; i < 20; ++i) {
    log.logger.info("line {}", i);
    EXPECT_EQ(pipe.Unread(), "line " + std::to_string(i) + "\n");
  }
}

// Before std::_Exit (a third signal), a flush is what gets the last line out: the process ends
// without the sink's destructor.
TEST(AsyncLogSinkTest, AFlushReturnsOnceTheLinesLoggedBeforeItAreWritten) {
  TestPipe pipe;
  Logged log(pipe);
  std::string expected;
  for (int i = 0; i < 100; ++i) {
    log.logger.info("line {}", i);
    expected += "line " + std::to_string(i) + "\n";
  }
  log.logger.flush();
  EXPECT_EQ(pipe.Unread(), expected);
}

TEST(AsyncLogSinkTest, ColorWrapsTheLevelOnly) {
  TestPipe pipe;
  AsyncLogSink::Options options;
  options.color = true;
  Logged log(pipe, options, "[%^%L%$] %v");
  log.logger.warn("careful");
  log.sink->Stop(milliseconds(10000));
  pipe.CloseWrite();
  EXPECT_EQ(pipe.ReadToEnd(), "[\033[33m\033[1mW\033[m] careful\n");
}

// stderr is a pipe whose reader has stopped reading (a stuck log shipper). Logging never waits
// for it: the lines that do not fit are dropped and counted. The stop ends within its grace.
TEST(AsyncLogSinkTest, AStalledReaderNeverHoldsTheLoggingThreadAndTheStopEnds) {
  TestPipe pipe;
  AsyncLogSink::Options options;
  options.buffer_bytes = 64u << 10;
  Logged log(pipe, options);
  const std::string line(200, 'x');
  const auto start = steady_clock::now();
  for (int i = 0; i < 5000; ++i) log.logger.info(line);  // 1 MB: the pipe and buffer hold ~130 KB
  EXPECT_LT(steady_clock::now() - start, milliseconds(5000));
  EXPECT_GT(log.sink->dropped_lines(), 0u);
  const auto stop = steady_clock::now();
  EXPECT_FALSE(log.sink->Stop(milliseconds(100)));  // what is buffered is abandoned
  EXPECT_LT(steady_clock::now() - stop, milliseconds(5000));
  // Each line was written, dropped at once, or abandoned at the stop: none is unaccounted.
  const std::string in_pipe = pipe.Unread();
  EXPECT_EQ(in_pipe.size() % (line.size() + 1), 0u);
  EXPECT_EQ(in_pipe.size() / (line.size() + 1) + log.sink->dropped_lines(), 5000u);
  log.logger.info("after the stop");  // dropped and counted, never written
  EXPECT_EQ(in_pipe.size() / (line.size() + 1) + log.sink->dropped_lines(), 5001u);
}

}  // namespace
}  // namespace harrier
