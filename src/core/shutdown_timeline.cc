#include "core/shutdown_timeline.h"

#include <algorithm>

namespace harrier {

ShutdownTimeline::ShutdownTimeline(Clock::duration delay)
    : delay_(std::max(delay, Clock::duration::zero())) {}

ShutdownTimeline::Action ShutdownTimeline::OnSignal(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  switch (phase_) {
    case Phase::kServing:
      draining_.store(true, std::memory_order_release);
      if (delay_ == Clock::duration::zero()) {
        phase_ = Phase::kStopping;
        return Action::kStop;
      }
      phase_ = Phase::kDraining;
      delay_end_ = now + delay_;
      return Action::kDrain;
    case Phase::kDraining:  // the rest of the delay is skipped
      phase_ = Phase::kStopping;
      return Action::kStop;
    case Phase::kStopping: return Action::kExitNow;
  }
  return Action::kNone;
}

ShutdownTimeline::Action ShutdownTimeline::OnTime(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (phase_ != Phase::kDraining || now < delay_end_) return Action::kNone;
  phase_ = Phase::kStopping;
  return Action::kStop;
}

Clock::duration ShutdownTimeline::DelayLeft(Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (phase_ != Phase::kDraining) return Clock::duration::zero();
  return std::max(delay_end_ - now, Clock::duration::zero());
}

ShutdownTimeline::Phase ShutdownTimeline::phase() const {
  std::lock_guard<std::mutex> lock(mu_);
  return phase_;
}

}  // namespace harrier
