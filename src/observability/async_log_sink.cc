#include "observability/async_log_sink.h"

#include <sys/stat.h>

#include <algorithm>
#include <string_view>

#include "observability/text_exposition.h"

namespace harrier {
namespace {

// spdlog's ansicolor_sink colors, by level (trace .. critical).
std::string_view LevelColor(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace: return "\033[37m";
    case spdlog::level::debug: return "\033[36m";
    case spdlog::level::info: return "\033[32m";
    case spdlog::level::warn: return "\033[33m\033[1m";
    case spdlog::level::err: return "\033[31m\033[1m";
    case spdlog::level::critical: return "\033[1m\033[41m";
    default: return "";
  }
}

bool IsRegularFile(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

AsyncLogSink::AsyncLogSink(const Options& options)
    : fd_(options.fd),
      regular_file_(IsRegularFile(options.fd)),
      buffer_bytes_(options.buffer_bytes),
      color_(options.color) {
  writer_.Start([this] { WriterLoop(); });
}

AsyncLogSink::~AsyncLogSink() {
  Stop(kStopGrace);
}

void AsyncLogSink::sink_it_(const spdlog::details::log_msg& msg) {
  formatted_.clear();
  formatter_->format(msg, formatted_);
  const std::string_view line(formatted_.data(), formatted_.size());
  std::string_view color;
  if (color_ && msg.color_range_end > msg.color_range_start) color = LevelColor(msg.level);
  constexpr std::string_view kReset = "\033[m";
  const size_t size = line.size() + (color.empty() ? 0 : color.size() + kReset.size());
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_ || pending_.size() + size > buffer_bytes_) {
    ++dropped_lines_;
    return;
  }
  if (color.empty()) {
    pending_.append(line);
  } else {
    pending_.append(line.substr(0, msg.color_range_start));
    pending_.append(color);
    pending_.append(
        line.substr(msg.color_range_start, msg.color_range_end - msg.color_range_start));
    pending_.append(kReset);
    pending_.append(line.substr(msg.color_range_end));
  }
  wake_.notify_one();
  if (stalled_) return;  // the writer is behind: nobody waits for it until it catches up
  // The line is written before the call returns, as with a synchronous sink, while the
  // descriptor takes it: what a thread logs precedes what it does next (an answer after its
  // log line, which clients and tests read in that order). Bounded: past kLineWait the writer
  // counts as stalled and no logging thread waits again until it has caught up.
  const uint64_t target = batches_taken_ + 1;  // pending_, which now holds the line
  if (!written_cv_.wait_for(lock, kLineWait,
                            [&] { return batches_done_ >= target || writer_done_; })) {
    stalled_ = true;
  }
}

void AsyncLogSink::WriterLoop() {
  for (;;) {
    bool stop = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      pending_.swap(writing_);
      ++batches_taken_;
      stop = stopping_;
    }
    const size_t written = writer_.Write(fd_, writing_, regular_file_);
    const auto lost = static_cast<uint64_t>(
        std::count(writing_.begin() + static_cast<std::ptrdiff_t>(written), writing_.end(), '\n'));
    writing_.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      dropped_lines_ += lost;
      ++batches_done_;
      writer_done_ = stop;
      if (pending_.empty()) stalled_ = false;  // caught up
    }
    written_cv_.notify_all();
    if (stop) return;
  }
}

void AsyncLogSink::flush_() {
  std::unique_lock<std::mutex> lock(mu_);
  // The lines logged so far are in pending_ (the next batch) or in the batch being written.
  const uint64_t target = batches_taken_ + (pending_.empty() ? 0 : 1);
  written_cv_.wait_for(lock, kFlushWait, [&] { return batches_done_ >= target || writer_done_; });
}

bool AsyncLogSink::Stop(std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  return writer_.Join(grace);
}

uint64_t AsyncLogSink::dropped_lines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_lines_;
}

void AsyncLogSink::AppendMetrics(TextExposition* out) const {
  constexpr std::string_view kDropped = "harrier_log_dropped_lines_total";
  out->Declare(kDropped, TextExposition::Type::kCounter,
               "Server log lines dropped because stderr took no more (its reader fell behind or "
               "it was closed)");
  out->Add(kDropped, {}, dropped_lines());
}

}  // namespace harrier
