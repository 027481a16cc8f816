// OverloadLimiter: overload protection for one model version — an adaptive limit on the
// requests it holds at once (queued + running), steered by the queue delay they see.
//
// Why a concurrency limit: it makes a rejection one atomic increment at arrival (no queue to
// scan, nothing to drop later), and it bounds the queue, so admitted requests wait at most about
// `limit / throughput`. Why steer it by queue delay: that is the latency the server adds; the
// model's own service time is the floor no scheduler can beat.
//
// The control loop (CoDel's "minimum over an interval" signal, a Gradient-style decrease):
//   - Every completed request reports its queue delay and its service time (OnComplete).
//   - Every `interval` (at least 4 median service times), the window closes, with
//       N = instances × requests_per_run (what one round of runs takes; also the minimum limit),
//       S = median service time of the last 64 completions,
//       T = target queue delay: configured, or max(min_target, S × (1/instances + 1/2)) +
//           batching delay — the time to drain one waiting run plus half a run per instance,
//       q = the smallest queue delay in the window (a standing queue, not a burst),
//       D = ⌊N × (1 + T/S)⌋, the queue the instances drain within T:
//     q > T:  overloaded. limit = max(N, min(limit − 1, ⌊peak × (S+T)/(S+q)⌋)), where peak is
//             the most requests held at once in the window (Little's law scaled to the
//             target) — unless more than `limit` are still held from before the last cut.
//     limit reached in the window, the previous window not overloaded, and
//             limit < D and q < T/2, or limit ≥ D and q < T/64 in this and the previous
//             window (instances found idle): probe up, limit += max(1, limit/4).
//     otherwise: hold.
//   - Before any completion the limit is max(2N, initial_limit); the first window closes at the
//     first completion and sets the limit to D.
//
// tests/scheduler/overload_simulation_test.cc drives it with a simulated model at 4× its
// capacity: admitted p99 stays within ~3 service times while the model stays busy.
//
// Time comes from the caller (`now`). Statistics are approximate under concurrency (a
// completion racing the window close may count in either window); the loop tolerates it.
//
// Thread safety: every method may be called from any thread. TryAcquire/Release cost one or two
// atomic read-modify-writes; OnComplete a few relaxed atomics, plus, once per window, a
// try-locked update by whichever thread closes it.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "harrier/clock.h"

namespace harrier {

class OverloadLimiter {
 public:
  struct Options {
    // Off: TryAcquire always succeeds and OnComplete does nothing.
    bool enabled = true;
    // The queue delay to hold admitted requests to; 0: derived from the measured service time
    // as max(min_target_queue_delay, median service × (1/instances + 1/2)) + batching_delay.
    std::chrono::nanoseconds target_queue_delay{0};
    // Floor of the derived target: below ~1 ms, queue delay is mostly thread wake-up noise.
    std::chrono::nanoseconds min_target_queue_delay = std::chrono::milliseconds(1);
    // Delay the scheduler adds on purpose to form batches (max_queue_delay_microseconds);
    // added to the derived target so that batching is not mistaken for overload.
    std::chrono::nanoseconds batching_delay{0};
    // How often the limit is adjusted (CoDel's interval); stretched to 4 median service times
    // for slow models so that a window sees several completions.
    std::chrono::nanoseconds interval = std::chrono::milliseconds(100);
    // Instances of the model, and requests one run can take (max_batch_size with dynamic
    // batching, else 1): the limit never falls below their product.
    int instance_count = 1;
    int requests_per_run = 1;
    // The limit before the first completion has measured anything: max(2 × the minimum, this).
    // Generous enough that a burst of concurrent clients at a fresh model is not refused
    // before its service time is known; small enough to bound that burst's queue.
    int initial_limit = 16;
    // The limit never rises above this.
    int max_limit = 4096;
  };

  struct Snapshot {
    bool enabled = false;
    int limit = 0;
    int in_flight = 0;
    bool overloaded = false;             // the last window's q was over its target
    std::chrono::nanoseconds target{0};  // the target in force
    std::chrono::nanoseconds median_service{0};
    std::chrono::nanoseconds queue_delay{0};  // the last window's q
    uint64_t rejected = 0;
    uint64_t adjustments = 0;  // windows closed
  };

  OverloadLimiter(const Options& options, Clock::time_point now);
  OverloadLimiter(const OverloadLimiter&) = delete;
  OverloadLimiter& operator=(const OverloadLimiter&) = delete;

  // Takes a slot for one request; false (and nothing taken) when the limit is reached.
  // `exempt`: count the request but never refuse it (requests more urgent than the model's
  // default priority, which the scheduler puts ahead of the queue anyway).
  bool TryAcquire(bool exempt = false);
  // Gives back a slot taken by TryAcquire. Call once per successful TryAcquire.
  void Release();
  // Feedback for a request that held a slot: `queue_ns` from admission until its run started
  // (or until it was removed unrun), `service_ns` its (batch's) run time, 0 when it never ran.
  // May close the window and adjust the limit.
  void OnComplete(Clock::time_point now, uint64_t queue_ns, uint64_t service_ns);

  Snapshot snapshot() const;
  const Options& options() const { return options_; }

  // The derived target for a median service time (pure; for tests and docs).
  static std::chrono::nanoseconds DerivedTarget(const Options& options,
                                                std::chrono::nanoseconds median_service);

  // "model 'm' is overloaded: queue delay 12 ms over its 3.0 ms target (concurrency limit 8)"
  // or "model 'm' is at its concurrency limit of 8 (queue delay target 3.0 ms)".
  std::string RejectionMessage(std::string_view model) const;

 private:
  static constexpr size_t kServiceSamples = 64;

  void CloseWindow(int64_t now_ns);
  uint64_t MedianServiceNs() const;

  // Constant after construction.
  const Options options_;
  const int min_limit_;
  const int max_limit_;

  // Written on every admission and release. Cache-line aligned, here and below, so that
  // arrivals and completions on different cores do not invalidate each other's lines.
  alignas(64) std::atomic<int> in_flight_{0};
  std::atomic<int> limit_;
  std::atomic<uint64_t> rejected_{0};

  // The current window; reset by CloseWindow. Written on every completion.
  alignas(64) std::atomic<int64_t> window_start_ns_;
  std::atomic<int64_t> window_length_ns_;
  std::atomic<uint64_t> window_count_{0};
  std::atomic<uint64_t> window_min_queue_ns_{UINT64_MAX};
  std::atomic<int> window_peak_{0};
  std::atomic<bool> window_saturated_{false};

  // The last service times, a ring written with relaxed stores.
  alignas(64) std::array<std::atomic<uint64_t>, kServiceSamples> service_ns_{};
  std::atomic<uint64_t> service_count_{0};

  // Published by CloseWindow, read for messages and snapshots.
  alignas(64) std::atomic<int64_t> target_ns_;
  std::atomic<int64_t> median_service_ns_{0};
  std::atomic<int64_t> last_queue_delay_ns_{0};
  std::atomic<bool> overloaded_{false};
  std::atomic<uint64_t> adjustments_{0};

  std::mutex close_mu_;  // held (try_lock) by the one thread closing a window
};

}  // namespace harrier
