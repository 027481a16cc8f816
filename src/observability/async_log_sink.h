// AsyncLogSink: the server log's spdlog sink (stderr), which never makes a logging thread wait.
//
// A line is formatted on the thread that logs it and appended to a bounded buffer; a
// LogWriterThread writes it out at once, and the logging thread waits for that, at most
// kLineWait: while stderr takes lines, a line is written before the call returns, as with a
// synchronous sink (what a thread logs precedes what it does next). spdlog's own stderr sink
// wrote from the logging thread, so a pipe whose reader stopped reading (a stuck log shipper)
// held every thread that logged - a model loading, an I/O thread warning about descriptors, the
// stop's "received SIGTERM" line - for as long as the reader stalled, and the stop never ended.
// Now, once a line has waited kLineWait, the writer counts as stalled: no thread waits until it
// has caught up, lines wait in the buffer, and when it is full they are dropped and counted
// (dropped_lines(), the metric harrier_log_dropped_lines_total). Server log lines are few (none
// per request), so the writer is woken for each one.
//
// Why not spdlog's async logger: its overrun policy drops the oldest lines rather than the
// newest, it counts nothing, and its thread pool is joined without a bound at exit.
//
// Thread safety: spdlog's (base_sink's mutex) for logging; Stop() and dropped_lines() from any
// thread.
#pragma once

#include <spdlog/details/log_msg.h>
#include <spdlog/sinks/base_sink.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "observability/log_writer_thread.h"

namespace harrier {

class TextExposition;

class AsyncLogSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  struct Options {
    int fd = STDERR_FILENO;  // not owned
    // Bytes of lines waiting for the writer; a line that does not fit is dropped.
    size_t buffer_bytes = 1u << 20;
    // The level's letters in color (spdlog's colors), for a terminal.
    bool color = false;
  };

  explicit AsyncLogSink(const Options& options);
  ~AsyncLogSink() override;  // Stop(kStopGrace) when not stopped

  // Writes out the lines buffered, for at most `grace` (then they are abandoned: a pipe whose
  // reader stopped reading), and ends the writer. Lines logged after it are dropped and
  // counted. Returns false when lines were abandoned. Once; later calls return at once.
  bool Stop(std::chrono::milliseconds grace);

  // Lines dropped because the buffer was full, the descriptor refused them (a closed pipe) or
  // they were abandoned at the stop, or logged after it.
  uint64_t dropped_lines() const;
  // dropped_lines() as the counter harrier_log_dropped_lines_total.
  void AppendMetrics(TextExposition* out) const;

  static constexpr std::chrono::milliseconds kStopGrace{2000};
  static constexpr std::chrono::milliseconds kFlushWait{1000};
  // The longest a logging thread waits for its line to be written (then the writer counts as
  // stalled, and nobody waits until it has caught up).
  static constexpr std::chrono::milliseconds kLineWait{50};

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;  // under base_sink's mutex
  // Waits (under base_sink's mutex) until the lines logged before it are written, for at most
  // kFlushWait: before a process ends without its destructors (std::_Exit), a line just logged
  // would otherwise never leave the buffer. Nothing calls it per line (no flush_on).
  void flush_() override;

 private:
  void WriterLoop();

  // Constant after construction.
  const int fd_;
  const bool regular_file_;
  const size_t buffer_bytes_;
  const bool color_;

  spdlog::memory_buf_t formatted_;  // guarded by base_sink's mutex: the line being appended

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable written_cv_;  // a batch was written (or given up on)
  // Guarded by mu_.
  std::string pending_;
  bool stopping_ = false;
  bool writer_done_ = false;
  bool stalled_ = false;  // a line was not written within kLineWait, and the writer is behind
  uint64_t dropped_lines_ = 0;
  uint64_t batches_taken_ = 0;  // swapped out of pending_ by the writer
  uint64_t batches_done_ = 0;   // of those, written (or given up on)

  std::string writing_;     // writer thread only
  std::mutex stop_mu_;      // one Stop() at a time
  LogWriterThread writer_;  // last: started in the constructor's body
};

}  // namespace harrier
