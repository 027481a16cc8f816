#include "scheduler/response_sequencer.h"

namespace harrier {

void ResponseSequencer::Deliver(uint64_t order, std::function<void()> deliver) {
  std::unique_lock lock(mu_);
  waiting_.emplace(order, std::move(deliver));
  // One thread delivers at a time, so that order holds even though callbacks run unlocked.
  if (delivering_) return;
  delivering_ = true;
  while (!waiting_.empty() && waiting_.begin()->first == next_) {
    std::function<void()> fn = std::move(waiting_.begin()->second);
    waiting_.erase(waiting_.begin());
    ++next_;
    lock.unlock();
    fn();
    lock.lock();
  }
  delivering_ = false;
}

}  // namespace harrier
