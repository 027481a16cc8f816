// AdaptiveDelay: the adaptive batching policy (parameter harrier.batching.target_p99_us). It
// decides how long a partial batch may wait for more requests from two estimates:
//   - the service time per batch size: an EWMA of each size's run time (a size never seen is
//     extrapolated linearly from the nearest smaller size seen, or taken from the nearest larger);
//   - the arrival rate: an EWMA of the gap between arrivals.
// Light load never waits: when requests arrive no faster than the instance serves the batch at
// hand (gap >= service(b)), running now keeps up and waiting would only add latency. (A closed
// loop of one client is always here: its next request cannot come before this one's answer.)
// Under heavier load a batch of b items whose oldest request was enqueued at t0 must start by
//   start_by = t0 + target - service(b + 1)
// to take one more request and still finish within the target. It waits until the next
// expected arrival (last arrival + gap) if that comes before start_by; once that moment passes
// without an arrival, or when the batch is full, it runs. Every arrival re-decides (heavy load
// fills batches).
//
// Not thread-safe: the ModelScheduler calls it under its mutex. Time is passed in (no clock).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "harrier/clock.h"

namespace harrier {

class AdaptiveDelay {
 public:
  // `target`: the latency target (queue wait + run). `max_batch_size` >= 1.
  AdaptiveDelay(Clock::duration target, int64_t max_batch_size);

  void RecordArrival(Clock::time_point now);
  void RecordExecution(int64_t batch_size, Clock::duration run_time);

  // The latest time a batch of `batch_items` (oldest enqueued at `oldest`) should wait until;
  // a value <= now means "run now". The caller re-decides on every arrival.
  Clock::time_point WaitUntil(Clock::time_point now, Clock::time_point oldest,
                              int64_t batch_items) const;

  // Estimated run time of a batch of `batch_size` items; zero when nothing was measured yet.
  Clock::duration ServiceTime(int64_t batch_size) const;
  // Expected time until the next arrival; nullopt before two arrivals were seen.
  std::optional<Clock::duration> ExpectedGap(Clock::time_point now) const;

  // Weight of a new sample in the averages.
  static constexpr double kAlpha = 0.2;

 private:
  const Clock::duration target_;
  const int64_t max_batch_size_;
  std::vector<double> service_ns_;  // by batch size; < 0 = not measured
  double gap_ns_ = -1;              // EWMA of inter-arrival gaps; < 0 = unknown
  std::optional<Clock::time_point> last_arrival_;
};

}  // namespace harrier
