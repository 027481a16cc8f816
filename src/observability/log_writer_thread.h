// LogWriterThread: the writer thread of an asynchronous log (the server log's AsyncLogSink, the
// access log's AsyncAccessLog), how it writes, and how it is stopped within a bound.
//
// A log is written to a descriptor whose reader can stop reading: stderr is often a pipe to a
// log shipper, and a stuck shipper fills it. The threads that log never wait for it (each log
// buffers, bounded, and drops what does not fit), but the writer's write(2) blocks, and a stop
// that waited for it hung for as long as the reader stalled. Join() gives the writer a grace
// period to write out what it holds, then abandons its writes: a write(2) blocked on the
// descriptor is interrupted with a signal (SIGUSR2, whose handler does nothing and is installed
// without SA_RESTART, so the call returns EINTR), again every 10 ms until the loop returns.
// A SIGUSR2 from outside the process is ignored (it ended the process before). The thread
// inherits its creator's signal mask: a server that takes SIGTERM with sigwait() blocks it
// before starting one.
//
// Thread safety: Write() and abandoned() on the writer thread; Join() on one other thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>

namespace harrier {

class LogWriterThread {
 public:
  LogWriterThread() = default;
  ~LogWriterThread();  // Join(0) when started and not joined yet

  // Runs `loop` on a new thread; once. The loop writes with Write() and returns when its log
  // asks it to (a flag of the log's own, set before Join()).
  void Start(std::function<void()> loop);

  LogWriterThread(const LogWriterThread&) = delete;
  LogWriterThread& operator=(const LogWriterThread&) = delete;

  // Writes `text`, whole lines, to `fd`: a regular file in one write(2); anything else (a pipe,
  // a terminal: stderr, which both logs may share) in writes of at most PIPE_BUF that end at a
  // line's end, each atomic, so that neither log's lines are ever split by the other's.
  // Returns the bytes written: text.size(), or fewer when the descriptor refused (a closed
  // pipe, a full disk; errno says why) or the writes were abandoned (errno ETIMEDOUT).
  // Writer thread only.
  size_t Write(int fd, std::string_view text, bool regular_file);

  // Whether Join() has given up on the writes (each later Write() returns 0 at once).
  bool abandoned() const { return abandon_.load(std::memory_order_relaxed); }

  // Waits for the loop to return, which its log has asked it to do: for up to `grace` as it
  // is, then with its writes abandoned. Returns false when they were abandoned. Later calls
  // return the same at once.
  bool Join(std::chrono::milliseconds grace);

 private:
  std::atomic<bool> abandon_{false};
  std::mutex mu_;
  std::condition_variable finished_cv_;
  bool finished_ = false;  // guarded by mu_: the loop has returned
  std::thread thread_;
};

}  // namespace harrier
