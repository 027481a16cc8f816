#include "harrier/response_stream.h"

#include <algorithm>

namespace harrier {

void ResponseStream::Write(std::string bytes, std::function<void(bool written)> on_written) {
  std::function<void()> wake;
  {
    std::lock_guard lock(mu_);
    if (!abandoned_ && !finished_) {
      pending_ += bytes.size();
      queued_ += bytes;
      if (on_written) queued_reports_.push_back(std::move(on_written));
      on_written = nullptr;
      if (waiting_ && (!queued_.empty() || !queued_reports_.empty())) {
        waiting_ = false;
        wake = wake_;
      }
    }
  }
  if (on_written) on_written(false);  // dropped
  if (wake) wake();
}

void ResponseStream::Finish(std::vector<std::pair<std::string, std::string>> trailers) {
  std::function<void()> wake;
  {
    std::lock_guard lock(mu_);
    if (abandoned_ || finished_) return;
    finished_ = true;
    trailers_ = std::move(trailers);
    if (waiting_) {
      waiting_ = false;
      wake = wake_;
    }
  }
  if (wake) wake();
}

bool ResponseStream::abandoned() const {
  std::lock_guard lock(mu_);
  return abandoned_;
}

std::size_t ResponseStream::pending_bytes() const {
  std::lock_guard lock(mu_);
  return pending_;
}

void ResponseStream::Take(Taken* taken) {
  taken->bytes.clear();
  taken->on_written.clear();
  taken->finished = false;
  taken->trailers.clear();
  std::lock_guard lock(mu_);
  if (abandoned_) return;
  taken->bytes.swap(queued_);
  taken->on_written.swap(queued_reports_);
  if (finished_ && !finish_taken_) {
    finish_taken_ = true;
    taken->finished = true;
    taken->trailers = std::move(trailers_);
  }
  waiting_ = taken->bytes.empty() && taken->on_written.empty() && !finished_;
}

void ResponseStream::Attach(std::function<void()> wake) {
  std::lock_guard lock(mu_);
  wake_ = std::move(wake);
}

void ResponseStream::Complete(Taken& taken, bool written) {
  Complete(taken.bytes.size(), taken.on_written, written);
  taken.bytes.clear();
}

void ResponseStream::Complete(std::size_t size,
                              std::vector<std::function<void(bool written)>>& on_written,
                              bool written) {
  {
    std::lock_guard lock(mu_);
    pending_ -= std::min(pending_, size);
  }
  auto reports = std::move(on_written);
  on_written.clear();
  for (auto& fn : reports) fn(written);
}

void ResponseStream::Abandon() {
  std::vector<std::function<void(bool)>> dropped;
  std::function<void()> wake;
  {
    std::lock_guard lock(mu_);
    if (abandoned_) return;
    abandoned_ = true;
    dropped.swap(queued_reports_);
    queued_.clear();
    queued_.shrink_to_fit();
    pending_ = 0;
    waiting_ = false;
    wake.swap(wake_);  // released outside the lock: it may hold the last reference to anything
  }
  for (auto& fn : dropped) fn(false);
}

}  // namespace harrier
