// AsyncAccessLog: the AccessLog (include/harrier/access_log.h) behind `--access-log on`.
//
// Each record is timestamped on the calling thread and its fields copied, packed, into a
// bounded in-memory buffer under a mutex held only for the copy: the caller is often a model's
// worker thread, whose time is the model's throughput. One writer thread swaps the buffer out
// every `flush_interval` (or at once when it is half full), formats the records into lines (a
// JSON object with --log-format json, key=value fields with text) and writes them with a few
// large write(2)s. When the buffer is full the line is dropped and counted (dropped_lines()): a
// slow disk or a full pipe never blocks a request.
//
// Why not spdlog's async logger: it wakes its writer thread with a condition variable for every
// line, a futex call and a context switch per request, and makes one write(2) per line on
// stderr; measured on the tiny model, that cost 14-39% of throughput (docs/benchmarks.md,
// "Access log (issue 5)").
//
// Thread safety: Write() from any thread. Destruction writes out what is buffered, waiting for
// the descriptor at most Options::stop_grace.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "harrier/access_log.h"
#include "harrier/status.h"
#include "observability/log_writer_thread.h"

namespace harrier {

class TextExposition;

enum class LogFormat { kText, kJson };

// The record's fields as `"request_id":"..","protocol":..,...` (no braces): a JSON line is
// `{"time":..,"level":"info","log":"access",<these>}`. Durations in microseconds; the model
// fields only when the record has a model.
void AppendAccessRecordJson(const AccessRecord& record, std::string* out);
// The same fields as `request_id=.. protocol=.. ...`; strings that contain a space, quote or
// backslash are written as JSON strings, so a line splits unambiguously.
void AppendAccessRecordText(const AccessRecord& record, std::string* out);
// `text` as a log line may hold it: the characters no log line holds raw (C0 and C1 controls,
// DEL, U+2028, U+2029) escaped as the access log escapes them (\n, \r, \t, \uXXXX), backslashes
// doubled, invalid UTF-8 bytes as '?'. The server log's text messages (probes 71 and 72).
void AppendLogText(std::string* out, std::string_view text);

class AsyncAccessLog : public AccessLog {
 public:
  struct Options {
    LogFormat format = LogFormat::kText;
    // "" = stderr; otherwise a file, appended to (created when missing; its directory must
    // exist).
    std::string file;
    // Bytes of packed records held for the writer; a record that does not fit is dropped.
    // 4 MiB is about 10,000 inference records, over 0.1 s at 90k requests/s.
    size_t buffer_bytes = 4u << 20;
    // Longest a line waits before it is written.
    std::chrono::milliseconds flush_interval{10};
    // At destruction, the longest the writer may take to write out what is buffered before
    // it is abandoned (LogWriterThread::Join).
    std::chrono::milliseconds stop_grace{2000};
  };

  // kInvalidArgument when the file cannot be opened.
  static StatusOr<std::unique_ptr<AsyncAccessLog>> Create(const Options& options);
  ~AsyncAccessLog() override;

  void Write(const AccessRecord& record) override;
  // Lines dropped because the buffer was full, or because writing them failed (a full disk,
  // a closed pipe; the first failure of a run of them is logged).
  uint64_t dropped_lines() const;
  // dropped_lines() as the counter harrier_access_log_dropped_lines_total.
  void AppendMetrics(TextExposition* out) const;

 private:
  AsyncAccessLog(const Options& options, int fd, bool owns_fd, bool regular_file);
  void WriterLoop();
  // A file renamed or removed since it was opened (logrotate's rename-and-create, a deleted
  // file still holding its space): opened again at its path. At most once a second; writer
  // thread only.
  void ReopenWhenMoved();
  void FormatPacked();  // writing_ (packed records) -> text_ (lines); writer thread only
  void WriteOut();      // formats and writes writing_, then clears both; writer thread only

  // Constant after construction.
  const LogFormat format_;
  const std::string path_;  // "" for stderr
  const bool owns_fd_;
  const bool regular_file_;
  const size_t buffer_bytes_;
  const std::chrono::milliseconds flush_interval_;
  const std::chrono::milliseconds stop_grace_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  // Guarded by mu_.
  std::string pending_;
  bool kicked_ = false;
  bool stopping_ = false;
  uint64_t dropped_lines_ = 0;

  // Writer thread only (and the destructor, after it).
  int fd_;
  std::chrono::steady_clock::time_point last_reopen_check_{};
  bool write_failing_ = false;  // the last write failed: the failure is logged once per run
  bool reopen_failing_ = false;  // the moved file's path could not be opened: logged once
  bool line_cut_ = false;        // the last write ended inside a line
  std::string writing_;
  std::string text_;
  LogWriterThread writer_;  // last: started in the constructor's body
};

}  // namespace harrier
