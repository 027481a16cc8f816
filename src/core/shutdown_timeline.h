// ShutdownTimeline: the order of a graceful stop made for load balancers, as a state machine
// over the process's shutdown signals (SIGTERM, SIGINT) and the clock. It decides; the
// composition root (cli/main.cc) waits for signals and does what it answers.
//
//   serving  --signal-------------------->  draining: readiness off (draining() true), every
//                                          request still served, for `delay`
//   draining --delay over, or a signal---->  stopping: listeners close, requests in flight
//                                          finish (--exit-timeout-secs), exit 0
//   stopping --signal-------------------->  exit now (status 1)
//
// A second signal during the delay skips the rest of it (an operator who sends it wants the
// stop now, but not to drop what is in flight); only a signal once stopping exits at once.
// With a delay of 0 the first signal goes straight to stopping, readiness off as well.
//
// Time comes from the caller (`now`), so the table test drives it without sleeping.
//
// Thread safety: every method may be called from any thread; draining() is one atomic load,
// for the health handlers on the I/O threads.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>

#include "harrier/clock.h"
#include "harrier/server_readiness.h"

namespace harrier {

class ShutdownTimeline final : public ServerReadiness {
 public:
  enum class Phase { kServing, kDraining, kStopping };
  // What the caller should do now.
  enum class Action {
    kNone,     // keep waiting
    kDrain,    // readiness has turned off; keep serving until the delay is over
    kStop,     // close the listeners and finish what is in flight
    kExitNow,  // a signal while stopping: exit at once
  };

  // `delay`: --shutdown-delay-secs; negative counts as 0.
  explicit ShutdownTimeline(Clock::duration delay);

  // A shutdown signal arrived at `now`.
  Action OnSignal(Clock::time_point now);
  // The clock reads `now`: kStop once the delay has passed while draining, else kNone.
  Action OnTime(Clock::time_point now);
  // How long from `now` until OnTime() answers kStop: the rest of the delay while draining,
  // zero otherwise.
  Clock::duration DelayLeft(Clock::time_point now) const;

  Phase phase() const;
  Clock::duration delay() const { return delay_; }
  bool draining() const override { return draining_.load(std::memory_order_acquire); }

 private:
  const Clock::duration delay_;  // constant after construction

  std::atomic<bool> draining_{false};
  mutable std::mutex mu_;
  Phase phase_ = Phase::kServing;  // guarded by mu_
  Clock::time_point delay_end_{};  // guarded by mu_; set when draining begins
};

}  // namespace harrier
