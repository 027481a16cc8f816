#include "backends/llamacpp/thread_governor.h"

#include <time.h>

#include <algorithm>
#include <utility>

namespace harrier {

ThreadGovernor::ThreadGovernor(int most, TimePoint now)
    : most_(std::max(most, 1)), threads_(most_), calm_since_(now), last_step_(now) {}

int ThreadGovernor::StepThreads(TimePoint now) {
  if (now - last_step_ > kLongestTryAfter) {
    threads_ = most_;
    trying_ = false;
    try_after_ = kFirstTryAfter;
    window_wall_ = window_off_ = Duration(0);
    calm_since_ = now;
  }
  return threads_;
}

void ThreadGovernor::Record(Duration wall, Duration cpu, TimePoint now) {
  last_step_ = now;
  window_wall_ += wall;
  // A CPU clock that runs ahead of the wall clock's reading (they are read one after the
  // other) is no time off-core.
  window_off_ += std::max(wall - cpu, Duration(0));
  if (window_wall_ < kWindow) return;
  const bool contended = static_cast<double>(window_off_.count()) >
                         kContendedShare * static_cast<double>(window_wall_.count());
  window_wall_ = window_off_ = Duration(0);
  Judge(contended, now);
}

void ThreadGovernor::Judge(bool contended, TimePoint now) {
  const bool was_trying = std::exchange(trying_, false);
  if (contended) {
    calm_since_ = now;
    if (threads_ == 1) return;
    ++decreases_;
    if (was_trying) {
      // Back to the count that held, not half of the tried one: halving 3 lands on 1 with 2
      // cores free, and the climb back reset the wait, so the failed count was tried every
      // few seconds for good (probe 37).
      --threads_;
      try_after_ = std::min(try_after_ * 2, kLongestTryAfter);
      return;
    }
    threads_ = std::max(1, threads_ / 2);
    return;
  }
  if (was_trying) try_after_ = kFirstTryAfter;
  if (threads_ < most_ && now - calm_since_ >= try_after_) {
    ++threads_;
    trying_ = true;
    calm_since_ = now;
  }
}

ThreadGovernor::Duration ThreadGovernor::ThreadCpuTime() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

}  // namespace harrier
