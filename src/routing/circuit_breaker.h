// CircuitBreaker: stops sending requests to a version that keeps failing, then tries it again.
//
//   kClosed    requests pass. Record() counts them in a window of window_seconds (time slots,
//              time_slots.h); when the failures in the window reach failure_threshold, or
//              are at least failure_rate of at least min_requests requests, it opens.
//   kOpen      Allow() refuses everything for open_seconds, then the breaker is half-open.
//   kHalfOpen  Allow() lets half_open_probes requests through and refuses the rest. The first
//              probe result recorded decides: a success closes the breaker (with an empty
//              window), a failure opens it again for another open_seconds. When every probe
//              was let through and none has reported for open_seconds (a lost or cancelled
//              request), a new set of probes is allowed, so a lost result cannot wedge it.
// A failure is whatever the caller counts as one (engine errors and timeouts; not a client's
// bad request). Results recorded while open are ignored; results of requests let through
// before the breaker opened, arriving while it is half-open, count as probe results (either
// way they are news of the version's health).
//
// Time comes from the caller (`now`), as for TokenBucket, so tests drive it with a fake clock.
// Thread safety: every method from any thread; one mutex guards the state.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "harrier/clock.h"
#include "routing/time_slots.h"
#include "routing/traffic_policy.h"

namespace harrier {

class CircuitBreaker {
 public:
  enum class State { kClosed, kOpen, kHalfOpen };

  // REQUIRES: `config` from a parsed TrafficPolicy.
  explicit CircuitBreaker(const BreakerConfig& config);

  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;

  // May a request go to this version now? While half-open, a true takes one of the probes:
  // call it only for a request that will then be sent (and its result recorded).
  bool Allow(Clock::time_point now);

  // A finished request's result.
  void Record(Clock::time_point now, bool failure);

  // Back to closed with an empty window, whatever the state: the version's instance was
  // replaced (a reload), so what the breaker knew was about an instance that no longer serves.
  // times_opened() is kept.
  void Reset();

  // The state at `now` (an open breaker whose open_seconds have passed reads as kHalfOpen).
  State state(Clock::time_point now) const;

  // How long until Allow(now + retry_after) could be true: zero when closed or when a probe is
  // free; otherwise the rest of the open period, or of the wait for the probes' results.
  Clock::duration RetryAfter(Clock::time_point now) const;

  // Times the breaker has opened (re-openings from half-open included); for statistics.
  int64_t times_opened() const;

  const BreakerConfig& config() const { return config_; }

 private:
  struct Slot {
    int64_t id = INT64_MIN;
    int64_t requests = 0;
    int64_t failures = 0;
  };

  void Open(Clock::time_point now);             // REQUIRES: mu_ held
  void ClearWindow();                           // REQUIRES: mu_ held
  void RefreshState(Clock::time_point now);     // REQUIRES: mu_ held; open -> half-open
  bool ShouldTrip(int64_t current_slot) const;  // REQUIRES: mu_ held

  // Constant after construction.
  const BreakerConfig config_;
  const TimeSlots slots_;
  const Clock::duration open_for_;

  mutable std::mutex mu_;
  // Guarded by mu_:
  State state_ = State::kClosed;
  Clock::time_point opened_at_;      // kOpen: when it opened
  int64_t probes_issued_ = 0;        // kHalfOpen: probes let through, awaiting a result
  Clock::time_point last_probe_at_;  // kHalfOpen: when the last probe was let through
  int64_t times_opened_ = 0;
  std::vector<Slot> ring_;  // kClosed: the window
};

// "closed", "open", "half-open".
const char* BreakerStateName(CircuitBreaker::State state);

}  // namespace harrier
