// OverloadLimiter: overload protection for one model version — admission on the queue delay a
// newcomer would see, predicted from the work ahead of it, with CoDel's "standing queue" signal
// deciding how much queue to allow.
//
// Why a prediction at arrival: a refusal is then a few atomic loads (no queue to scan, nothing
// to drop later), and each admitted request is one whose wait is known to be short, so the
// admitted latency stays close to the model's own service time — the floor no scheduler beats.
// A concurrency limit bounds the queue too, but to keep every instance busy it must allow a
// whole run waiting behind the running one, which doubles the admitted latency.
//
// The prediction (Admit):
//   - The scheduler reports each run: RunStarted (its instance and size) and RunFinished. An
//     instance running a batch of b items is expected to finish at its start + S(b), S(b) the
//     measured service time of a batch of b (one moving average per batch size).
//   - Ahead of the newcomer: q = held − running requests (admitted, not started). With an idle
//     instance that can take them all (q < idle × B, B = requests per run), the wait is 0.
//     Otherwise the newcomer joins the partly filled batch behind j = ⌊q' / B⌋ full ones (q'
//     the requests idle instances do not take; those count as busy for S(B)), which starts
//     when an instance is free for the (j + 1)-th time: with f₀ ≤ f₁ ≤ … the times until each
//     instance is free, wait = f[j mod instances] + ⌊j / instances⌋ × S(B).
//   - Admitted when wait ≤ the bound in force (below); the held count never passes max_limit,
//     and before anything is measured it is max(2 × instances × B, initial_limit).
//
// The bound (every window of `interval`, stretched to 4 × S(1)):
//   T = target queue delay: configured, or max(min_target, S(1) / 2) + batching delay — half
//       a batch-1 run: the newcomer waits at most for the second half of the run in front of it.
//   Normal: bound = 8 × T. Bursts of a lightly loaded model are queued, not refused.
//   Shedding: bound = T. Entered when a window shows a standing queue — its smallest queue
//       delay over T while the instances were busy ≥ 90% of it; left when they were busy < 80%
//       of two windows in a row (the excess is gone, or the strict bound starves them: then
//       the queue comes back and a later window sheds again). With batching, batches fill
//       with whatever arrives within T of an instance being free.
//
// Urgent requests (TryAcquire(..., exempt)) are counted and never refused.
//
// tests/scheduler/overload_simulation_test.cc drives it with a simulated model (with and
// without batching) at 1×, 4×, 8× and 16× its capacity on a fake clock.
//
// Time comes from the caller (`now`). Statistics are approximate under concurrency (a
// completion racing the window close may count in either window); the loop tolerates it.
//
// Thread safety: every method may be called from any thread. TryAcquire costs one atomic
// read-modify-write plus a few loads (one per instance); OnComplete a few relaxed atomics, plus,
// once per window, a try-locked update by whichever thread closes it.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "harrier/clock.h"

namespace harrier {

class OverloadLimiter {
 public:
  struct Options {
    // Off: TryAcquire always succeeds and the other calls do nothing.
    bool enabled = true;
    // The queue delay to hold admitted requests to while the model is overloaded; 0: derived
    // from the measured batch-1 service time as max(min_target_queue_delay, S(1) / 2) +
    // batching_delay.
    std::chrono::nanoseconds target_queue_delay{0};
    // Floor of the derived target: below ~1 ms, queue delay is mostly thread wake-up noise.
    std::chrono::nanoseconds min_target_queue_delay = std::chrono::milliseconds(1);
    // Delay the scheduler adds on purpose to form batches (max_queue_delay_microseconds);
    // added to the derived target so that batching is not mistaken for overload.
    std::chrono::nanoseconds batching_delay{0};
    // How often the mode (normal / shedding) is decided (CoDel's interval); stretched to 4
    // batch-1 service times for slow models so that a window sees several completions.
    std::chrono::nanoseconds interval = std::chrono::milliseconds(100);
    // Instances of the model, and requests one run can take (max_batch_size with dynamic
    // batching, else 1).
    int instance_count = 1;
    int requests_per_run = 1;
    // The most requests held at once before any service time is measured: max(2 × instances ×
    // requests_per_run, this). Generous enough that a burst of concurrent clients at a fresh
    // model is not refused; small enough to bound that burst's queue.
    int initial_limit = 16;
    // The most requests held at once, ever.
    int max_limit = 4096;
  };

  // One model execution, as RunStarted and RunFinished see it.
  struct Run {
    size_t instance = 0;  // the instance's index (0 .. instance_count − 1)
    int requests = 1;     // requests in the run
    int64_t items = 1;    // their batch items (the batch size the model sees)
  };

  // Why a request was refused, for its message.
  struct Refusal {
    bool at_limit = false;  // the held count, not the predicted delay
    std::chrono::nanoseconds predicted_wait{0};
    int limit = 0;  // with at_limit: the limit that refused it
    std::chrono::nanoseconds target{0};  // the queue delay target then
    bool shedding = false;               // the strict bound was in force then
  };

  struct Snapshot {
    bool enabled = false;
    int limit = 0;  // the most requests held at once now (initial_limit or max_limit)
    int in_flight = 0;
    bool overloaded = false;                     // shedding: the bound in force is the target
    std::chrono::nanoseconds target{0};          // the target in force
    std::chrono::nanoseconds median_service{0};  // S(1), the batch-1 service time estimate
    std::chrono::nanoseconds queue_delay{0};     // the last window's smallest queue delay
    std::chrono::nanoseconds predicted_wait{0};  // of the last refused request
    double utilization = 0;                      // the last window's busy share of the instances
    uint64_t rejected = 0;
    uint64_t adjustments = 0;  // windows closed
  };

  OverloadLimiter(const Options& options, Clock::time_point now);
  OverloadLimiter(const OverloadLimiter&) = delete;
  OverloadLimiter& operator=(const OverloadLimiter&) = delete;

  // Takes a slot for one request arriving at `now`; false (and nothing taken) when its
  // predicted queue delay is over the bound in force or the held count is at its limit.
  // `exempt`: count the request but never refuse it (requests more urgent than the model's
  // default priority, which the scheduler puts ahead of the queue anyway).
  // `*why` (if not null) says why on false.
  bool TryAcquire(Clock::time_point now, bool exempt = false, Refusal* why = nullptr);
  // Would TryAcquire(now) admit a request now? Takes nothing and counts nothing.
  bool WouldAdmit(Clock::time_point now, Refusal* why = nullptr) const;
  // The queue delay a request arriving at `now` is predicted to wait (the prediction above,
  // whether or not it would be admitted): 0 with an idle instance for it, before anything is
  // measured, when off, and at max_limit. Takes nothing. The autoscaling gauge
  // harrier_predicted_queue_wait_seconds (docs/metrics.md).
  std::chrono::nanoseconds PredictedWait(Clock::time_point now) const;
  // Gives back a slot taken by TryAcquire. Call once per successful TryAcquire.
  void Release();

  // The scheduler's report of one execution: started on `run.instance` at `now`; finished,
  // after `service` of running (gather + model run) and `busy` in all (with the answers).
  // Call RunFinished once per RunStarted, with the same Run.
  void RunStarted(const Run& run, Clock::time_point now);
  void RunFinished(const Run& run, std::chrono::nanoseconds service, std::chrono::nanoseconds busy);

  // Feedback for a request that held a slot: `queue_ns` from admission until its run started
  // (or until it was removed unrun); `service_ns` is 0 when it never ran (its run's time comes
  // from RunFinished). May close the window and decide the mode.
  void OnComplete(Clock::time_point now, uint64_t queue_ns, uint64_t service_ns);

  Snapshot snapshot() const;
  const Options& options() const { return options_; }

  // The derived target for a batch-1 service time (pure; for tests and docs).
  static std::chrono::nanoseconds DerivedTarget(const Options& options,
                                                std::chrono::nanoseconds batch1_service);

  // "model 'm' is overloaded: predicted queue delay 12 ms over its 3.0 ms target" or
  // "model 'm' is at its concurrency limit of 16 (queue delay target 3.0 ms)".
  std::string RejectionMessage(std::string_view model, const Refusal& why) const;

 private:
  // Service time averages are kept per batch size up to this; larger batches scale from it.
  static constexpr int64_t kTrackedSizes = 64;
  // Instances whose runs the prediction looks at one by one.
  static constexpr int kMaxExactInstances = 64;

  enum class Verdict { kAdmit, kOverTarget, kAtLimit };
  // `ahead`: requests held, not counting the newcomer.
  Verdict Decide(int ahead, int64_t now_ns, int64_t* predicted_ns) const;
  Refusal RefusalOf(Verdict v, int ahead, int64_t predicted) const;
  int64_t TargetNs(int64_t batch1_service_ns) const;  // the target in force for this S(1)
  int64_t ExpectedServiceNs(int64_t items) const;  // 0 when nothing is measured
  void CloseWindow(int64_t now_ns);

  // Constant after construction.
  const Options options_;
  const int instances_;
  const int per_run_;
  const int initial_limit_;
  const int max_limit_;

  // Written on every admission and release. Cache-line aligned, here and below, so that
  // arrivals and completions on different cores do not invalidate each other's lines.
  alignas(64) std::atomic<int> in_flight_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<int64_t> last_refused_wait_ns_{0};

  // Written at each run's start and end. run_end_ns_[i]: when instance i's run is expected to
  // finish; 0 while it is idle.
  alignas(64) std::atomic<int> running_requests_{0};
  const std::unique_ptr<std::atomic<int64_t>[]> run_end_ns_;
  const std::unique_ptr<std::atomic<int64_t>[]> run_start_ns_;
  // Service time moving averages by batch size (index items − 1); 0 until measured.
  std::array<std::atomic<int64_t>, kTrackedSizes> service_ns_{};

  // The current window; reset by CloseWindow.
  alignas(64) std::atomic<int64_t> window_start_ns_;
  std::atomic<int64_t> window_length_ns_;
  std::atomic<uint64_t> window_count_{0};
  std::atomic<uint64_t> window_min_queue_ns_{UINT64_MAX};
  std::atomic<int64_t> window_busy_ns_{0};

  // Published by CloseWindow, read on every admission.
  alignas(64) std::atomic<int64_t> target_ns_;
  std::atomic<bool> shedding_{false};
  std::atomic<int64_t> last_queue_delay_ns_{0};
  std::atomic<int64_t> utilization_permille_{0};
  std::atomic<uint64_t> adjustments_{0};

  std::mutex close_mu_;  // held (try_lock) by the one thread closing a window
};

}  // namespace harrier
