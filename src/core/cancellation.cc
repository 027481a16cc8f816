#include "harrier/cancellation.h"

namespace harrier {

void CancellationToken::Cancel() {
  std::unique_lock lock(mu_);
  if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
  while (!callbacks_.empty()) {
    auto [id, fn] = std::move(callbacks_.back());
    callbacks_.pop_back();
    running_id_ = id;
    lock.unlock();
    fn();
    lock.lock();
    running_id_ = 0;
    done_cv_.notify_all();
  }
}

uint64_t CancellationToken::OnCancel(std::function<void()> fn) {
  std::unique_lock lock(mu_);
  const uint64_t id = next_id_++;
  if (cancelled_.load(std::memory_order_acquire)) {
    lock.unlock();
    fn();
    return id;
  }
  callbacks_.push_back({id, std::move(fn)});
  return id;
}

void CancellationToken::Unregister(uint64_t id) {
  std::unique_lock lock(mu_);
  for (size_t i = 0; i < callbacks_.size(); ++i) {
    if (callbacks_[i].first == id) {
      callbacks_.erase_at(i);
      break;  // ids are unique
    }
  }
  if (running_id_ != id) return;
  // Counted only while the wait has released mu_, so that a reader (who takes mu_) sees a
  // non-zero count only when an Unregister() is really blocked.
  ++waiting_unregisters_;
  done_cv_.wait(lock, [&] { return running_id_ != id; });
  --waiting_unregisters_;
}

int CancellationToken::waiting_unregisters() const {
  std::lock_guard lock(mu_);
  return waiting_unregisters_;
}

}  // namespace harrier
