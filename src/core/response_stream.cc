#include "harrier/response_stream.h"

#include <algorithm>

namespace harrier {

void ResponseStream::Write(std::string bytes, std::function<void(bool written)> on_written) {
  std::function<void()> wake;
  {
    std::lock_guard lock(mu_);
    if (!abandoned_ && !finished_) {
      pending_ += bytes.size();
      queued_.push_back(Part{std::move(bytes), std::move(on_written)});
      if (waiting_) {
        waiting_ = false;
        wake = wake_;
      }
      on_written = nullptr;
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

ResponseStream::Taken ResponseStream::Take() {
  std::lock_guard lock(mu_);
  Taken taken;
  if (abandoned_) return taken;
  taken.parts.swap(queued_);
  if (finished_ && !finish_taken_) {
    finish_taken_ = true;
    taken.finished = true;
    taken.trailers = std::move(trailers_);
  }
  waiting_ = taken.parts.empty() && !finished_;
  return taken;
}

void ResponseStream::Attach(std::function<void()> wake) {
  std::lock_guard lock(mu_);
  wake_ = std::move(wake);
}

void ResponseStream::Complete(Part& part, bool written) {
  Complete(part.bytes.size(), part.on_written, written);
}

void ResponseStream::Complete(std::size_t size, std::function<void(bool written)>& on_written,
                              bool written) {
  {
    std::lock_guard lock(mu_);
    pending_ -= std::min(pending_, size);
  }
  if (on_written) {
    auto fn = std::move(on_written);
    on_written = nullptr;
    fn(written);
  }
}

void ResponseStream::Abandon() {
  std::vector<Part> dropped;
  std::function<void()> wake;
  {
    std::lock_guard lock(mu_);
    if (abandoned_) return;
    abandoned_ = true;
    dropped.swap(queued_);
    pending_ = 0;
    waiting_ = false;
    wake.swap(wake_);  // released outside the lock: it may hold the last reference to anything
  }
  for (auto& part : dropped)
    if (part.on_written) part.on_written(false);
}

}  // namespace harrier
