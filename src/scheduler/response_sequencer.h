// ResponseSequencer: delivers answers in arrival order (dynamic_batching.preserve_ordering).
// Each queued request gets the next order number; its answer is delivered only after every
// earlier one, whichever worker (or cancelling thread) produced it first.
//
// Thread safety: Deliver() from any thread. Deliveries run on the thread that completes the
// gap, outside the lock, one at a time and in order.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace harrier {

class ResponseSequencer {
 public:
  // Order numbers start at 1 and must each be delivered exactly once.
  void Deliver(uint64_t order, std::function<void()> deliver);

 private:
  std::mutex mu_;
  uint64_t next_ = 1;                                  // guarded by mu_
  std::map<uint64_t, std::function<void()>> waiting_;  // guarded by mu_
  bool delivering_ = false;  // a thread is running deliveries; guarded by mu_
};

}  // namespace harrier
