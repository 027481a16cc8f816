#include "scheduler/overload_limiter.h"

#include <algorithm>
#include <cstdio>

namespace harrier {
namespace {

using std::chrono::nanoseconds;

int64_t ToNs(Clock::time_point t) {
  return std::chrono::duration_cast<nanoseconds>(t.time_since_epoch()).count();
}

// "850 us", "12 ms", "1.5 s": what a person reads in an error message.
std::string HumanDuration(int64_t ns) {
  char buf[32];
  if (ns < 1'000'000) {
    std::snprintf(buf, sizeof(buf), "%lld us", static_cast<long long>((ns + 500) / 1000));
  } else if (ns < 10'000'000'000LL) {
    const double ms = static_cast<double>(ns) / 1e6;
    std::snprintf(buf, sizeof(buf), ms < 10 ? "%.1f ms" : "%.0f ms", ms);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(ns) / 1e9);
  }
  return buf;
}

// Normal mode queues up to this many targets' worth; shedding mode one.
constexpr int64_t kNormalBoundTargets = 8;
// Shedding starts when the instances were busy at least this share of a window with a standing
// queue, and stops when they were busy less than the second.
constexpr int64_t kShedEnterPermille = 900;
constexpr int64_t kShedLeavePermille = 800;

}  // namespace

nanoseconds OverloadLimiter::DerivedTarget(const Options& options, nanoseconds batch1_service) {
  if (options.target_queue_delay.count() > 0) return options.target_queue_delay;
  // Half a batch-1 run: a newcomer is admitted only behind the second half of the run in
  // front of it, so its latency stays within ~1.5 service times while the instance never waits
  // for a request (one is always admitted before the run ends, unless none arrives).
  return std::max(options.min_target_queue_delay, batch1_service / 2) + options.batching_delay;
}

OverloadLimiter::OverloadLimiter(const Options& options, Clock::time_point now)
    : options_(options),
      instances_(std::max(1, options.instance_count)),
      per_run_(std::max(1, options.requests_per_run)),
      initial_limit_(std::min(std::max(instances_, options.max_limit),
                              std::max(2 * instances_ * per_run_, options.initial_limit))),
      max_limit_(std::max(instances_, options.max_limit)),
      run_end_ns_(new std::atomic<int64_t>[instances_]),
      run_start_ns_(new std::atomic<int64_t>[instances_]),
      window_start_ns_(ToNs(now)),
      window_length_ns_(options.interval.count()),
      target_ns_(DerivedTarget(options, nanoseconds(0)).count()) {
  for (int i = 0; i < instances_; ++i) {
    run_end_ns_[i].store(0, std::memory_order_relaxed);
    run_start_ns_[i].store(0, std::memory_order_relaxed);
  }
}

int64_t OverloadLimiter::ExpectedServiceNs(int64_t items) const {
  items = std::max<int64_t>(1, items);
  const int64_t tracked = std::min(items, kTrackedSizes);
  if (const int64_t s = service_ns_[tracked - 1].load(std::memory_order_relaxed); s > 0)
    return tracked == items ? s : s * items / tracked;
  // Not measured at this size: scale the nearest measured one linearly (an overestimate from
  // below — batching is sublinear — and an underestimate from above: both err towards the
  // measured size).
  for (int64_t d = 1; d < kTrackedSizes; ++d) {
    if (tracked - d >= 1) {
      if (const int64_t s = service_ns_[tracked - d - 1].load(std::memory_order_relaxed); s > 0)
        return s * items / (tracked - d);
    }
    if (tracked + d <= kTrackedSizes) {
      if (const int64_t s = service_ns_[tracked + d - 1].load(std::memory_order_relaxed); s > 0)
        return s * items / (tracked + d);
    }
  }
  return 0;
}

OverloadLimiter::Verdict OverloadLimiter::Decide(int ahead, int64_t now_ns,
                                                 int64_t* predicted_ns) const {
  *predicted_ns = 0;
  if (ahead + 1 > max_limit_) return Verdict::kAtLimit;
  const int64_t s1 = ExpectedServiceNs(1);
  // Nothing measured yet: a burst at a fresh model is held by the initial limit alone.
  if (s1 == 0) return ahead + 1 > initial_limit_ ? Verdict::kAtLimit : Verdict::kAdmit;

  // Time until each instance is free. Instances past kMaxExactInstances are not looked at
  // one by one: the average below stands for them.
  std::array<int64_t, kMaxExactInstances> free_in;
  const int looked_at = std::min(instances_, kMaxExactInstances);
  int busy = 0;
  for (int i = 0; i < looked_at; ++i) {
    const int64_t end = run_end_ns_[i].load(std::memory_order_relaxed);
    free_in[i] = end == 0 ? -1 : std::max<int64_t>(0, end - now_ns);
    busy += end != 0;
  }
  const int queued = std::max(0, ahead - running_requests_.load(std::memory_order_relaxed));
  const int idle_take = (looked_at - busy) * per_run_;
  if (queued < idle_take) return Verdict::kAdmit;  // an idle instance takes it at once
  // The idle instances are about to start runs of the queue's head (between one run and the
  // next, or before a worker wakes): count them as busy for a whole run.
  const int64_t full_run = ExpectedServiceNs(per_run_);
  int64_t total = 0;
  for (int i = 0; i < looked_at; ++i) {
    if (free_in[i] < 0) free_in[i] = full_run;
    free_in[i] = std::min(free_in[i], full_run);
    total += free_in[i];
  }
  // The newcomer joins the partly filled batch after `runs_ahead` full ones: its run starts at
  // the (runs_ahead + 1)-th time an instance is free. Every instance is free within one full
  // run and then every full run, so that is the (runs_ahead mod instances)-th of the times
  // above, plus a full run per round of the instances before it.
  const int64_t runs_ahead = (queued - idle_take) / per_run_;
  int64_t wait;
  if (looked_at == instances_) {
    const int64_t nth = runs_ahead % instances_;
    std::nth_element(free_in.begin(), free_in.begin() + nth, free_in.begin() + looked_at);
    wait = free_in[nth] + runs_ahead / instances_ * full_run;
  } else {  // too many instances to look at one by one: their average
    wait = (total + std::max<int64_t>(0, runs_ahead - looked_at + 1) * full_run) / looked_at;
  }
  *predicted_ns = wait;

  const int64_t target = TargetNs(s1);
  const int64_t bound =
      shedding_.load(std::memory_order_relaxed) ? target : kNormalBoundTargets * target;
  return wait > bound ? Verdict::kOverTarget : Verdict::kAdmit;
}

bool OverloadLimiter::TryAcquire(Clock::time_point now, bool exempt, Refusal* why) {
  if (!options_.enabled) return true;
  const int ahead = in_flight_.fetch_add(1, std::memory_order_relaxed);
  if (exempt) return true;
  int64_t predicted = 0;
  const Verdict v = Decide(ahead, ToNs(now), &predicted);
  if (v == Verdict::kAdmit) return true;
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  rejected_.fetch_add(1, std::memory_order_relaxed);
  last_refused_wait_ns_.store(predicted, std::memory_order_relaxed);
  if (why != nullptr) *why = RefusalOf(v, ahead, predicted);
  return false;
}

OverloadLimiter::Refusal OverloadLimiter::RefusalOf(Verdict v, int ahead, int64_t predicted) const {
  Refusal why{v == Verdict::kAtLimit, nanoseconds(predicted)};
  // What refused it, not what is in force when the message is written: the first run's
  // measurement lifts the initial limit and moves the target meanwhile (a refusal at 16 said
  // "4096").
  if (why.at_limit) why.limit = ahead + 1 > max_limit_ ? max_limit_ : initial_limit_;
  why.target = nanoseconds(TargetNs(ExpectedServiceNs(1)));
  why.shedding = shedding_.load(std::memory_order_relaxed);
  return why;
}

int64_t OverloadLimiter::TargetNs(int64_t batch1_service_ns) const {
  return options_.target_queue_delay.count() > 0
             ? options_.target_queue_delay.count()
             : DerivedTarget(options_, nanoseconds(batch1_service_ns)).count();
}

bool OverloadLimiter::WouldAdmit(Clock::time_point now, Refusal* why) const {
  if (!options_.enabled) return true;
  int64_t predicted = 0;
  const int ahead = in_flight_.load(std::memory_order_relaxed);
  const Verdict v = Decide(ahead, ToNs(now), &predicted);
  if (v == Verdict::kAdmit) return true;
  if (why != nullptr) *why = RefusalOf(v, ahead, predicted);
  return false;
}

std::chrono::nanoseconds OverloadLimiter::PredictedWait(Clock::time_point now) const {
  if (!options_.enabled) return nanoseconds(0);
  int64_t predicted = 0;
  Decide(in_flight_.load(std::memory_order_relaxed), ToNs(now), &predicted);
  return nanoseconds(predicted);
}

void OverloadLimiter::Release() {
  if (options_.enabled) in_flight_.fetch_sub(1, std::memory_order_relaxed);
}

void OverloadLimiter::RunStarted(const Run& run, Clock::time_point now) {
  if (!options_.enabled || run.instance >= static_cast<size_t>(instances_)) return;
  const int64_t now_ns = ToNs(now);
  running_requests_.fetch_add(run.requests, std::memory_order_relaxed);
  run_start_ns_[run.instance].store(now_ns, std::memory_order_relaxed);
  // A run of an unmeasured size is expected to take no time: the next admission sees the
  // instance as about to be free, as it did before the run.
  run_end_ns_[run.instance].store(std::max<int64_t>(1, now_ns + ExpectedServiceNs(run.items)),
                                  std::memory_order_relaxed);
}

void OverloadLimiter::RunFinished(const Run& run, nanoseconds service, nanoseconds busy) {
  if (!options_.enabled || run.instance >= static_cast<size_t>(instances_)) return;
  run_end_ns_[run.instance].store(0, std::memory_order_relaxed);
  running_requests_.fetch_sub(run.requests, std::memory_order_relaxed);
  // Only the part of the run inside this window: CloseWindow counted the rest.
  const int64_t start = run_start_ns_[run.instance].load(std::memory_order_relaxed);
  const int64_t window_start = window_start_ns_.load(std::memory_order_relaxed);
  window_busy_ns_.fetch_add(
      std::max<int64_t>(0, start + busy.count() - std::max(start, window_start)),
      std::memory_order_relaxed);
  if (service.count() <= 0) return;
  // A moving average per batch size (weight 1/8), with outliers (a descheduled worker) cut at
  // 4 × the average so that one of them does not double it. Racing updates lose one sample.
  const int64_t items = std::clamp<int64_t>(run.items, 1, kTrackedSizes);
  std::atomic<int64_t>& avg = service_ns_[items - 1];
  const int64_t old = avg.load(std::memory_order_relaxed);
  const int64_t sample = old == 0 ? service.count() : std::min(service.count(), 4 * old);
  avg.store(old == 0 ? sample : old + (sample - old) / 8, std::memory_order_relaxed);
}

void OverloadLimiter::OnComplete(Clock::time_point now, uint64_t queue_ns, uint64_t service_ns) {
  (void)service_ns;
  if (!options_.enabled) return;
  window_count_.fetch_add(1, std::memory_order_relaxed);
  uint64_t min_q = window_min_queue_ns_.load(std::memory_order_relaxed);
  while (queue_ns < min_q &&
         !window_min_queue_ns_.compare_exchange_weak(min_q, queue_ns, std::memory_order_relaxed)) {
  }
  const int64_t now_ns = ToNs(now);
  if (now_ns - window_start_ns_.load(std::memory_order_relaxed) <
      window_length_ns_.load(std::memory_order_relaxed))
    return;
  std::unique_lock lock(close_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is closing this window
  if (now_ns - window_start_ns_.load(std::memory_order_relaxed) <
      window_length_ns_.load(std::memory_order_relaxed))
    return;  // it just did
  CloseWindow(now_ns);
}

void OverloadLimiter::CloseWindow(int64_t now_ns) {
  const uint64_t count = window_count_.exchange(0, std::memory_order_relaxed);
  const uint64_t min_q = window_min_queue_ns_.exchange(UINT64_MAX, std::memory_order_relaxed);
  const int64_t window_start = window_start_ns_.load(std::memory_order_relaxed);
  int64_t busy = window_busy_ns_.exchange(0, std::memory_order_relaxed);
  // Runs in progress count up to now here, and from now in the next window (RunFinished).
  for (int i = 0; i < instances_; ++i) {
    if (run_end_ns_[i].load(std::memory_order_relaxed) == 0) continue;
    busy += std::max<int64_t>(
        0, now_ns - std::max(run_start_ns_[i].load(std::memory_order_relaxed), window_start));
  }
  const int64_t elapsed = now_ns - window_start;
  window_start_ns_.store(now_ns, std::memory_order_relaxed);
  adjustments_.fetch_add(1, std::memory_order_relaxed);

  const int64_t s1 = ExpectedServiceNs(1);
  const int64_t target = DerivedTarget(options_, nanoseconds(s1)).count();
  target_ns_.store(target, std::memory_order_relaxed);
  window_length_ns_.store(std::max<int64_t>(options_.interval.count(), 4 * s1),
                          std::memory_order_relaxed);
  const int64_t utilization =
      elapsed > 0 ? std::min<int64_t>(1000, busy * 1000 / (elapsed * instances_)) : 0;
  const int64_t previous = utilization_permille_.exchange(utilization, std::memory_order_relaxed);
  if (count == 0) return;
  last_queue_delay_ns_.store(static_cast<int64_t>(min_q), std::memory_order_relaxed);

  // CoDel's signal: even the luckiest request of the window waited past the target, and the
  // instances had no idle time to speak of — a standing queue, not a burst.
  const bool standing_queue =
      static_cast<int64_t>(min_q) > target && utilization >= kShedEnterPermille;
  if (shedding_.load(std::memory_order_relaxed)) {
    // Two windows in a row: one with a few unlucky idle gaps must not reopen the queue.
    if (utilization < kShedLeavePermille && previous < kShedLeavePermille)
      shedding_.store(false, std::memory_order_relaxed);
  } else if (standing_queue) {
    shedding_.store(true, std::memory_order_relaxed);
  }
}

OverloadLimiter::Snapshot OverloadLimiter::snapshot() const {
  Snapshot s;
  s.enabled = options_.enabled;
  s.limit = ExpectedServiceNs(1) == 0 ? initial_limit_ : max_limit_;
  s.in_flight = in_flight_.load(std::memory_order_relaxed);
  s.overloaded = shedding_.load(std::memory_order_relaxed);
  s.target = nanoseconds(TargetNs(ExpectedServiceNs(1)));
  s.median_service = nanoseconds(ExpectedServiceNs(1));
  s.queue_delay = nanoseconds(last_queue_delay_ns_.load(std::memory_order_relaxed));
  s.predicted_wait = nanoseconds(last_refused_wait_ns_.load(std::memory_order_relaxed));
  s.utilization =
      static_cast<double>(utilization_permille_.load(std::memory_order_relaxed)) / 1000.0;
  s.rejected = rejected_.load(std::memory_order_relaxed);
  s.adjustments = adjustments_.load(std::memory_order_relaxed);
  return s;
}

std::string OverloadLimiter::RejectionMessage(std::string_view model, const Refusal& why) const {
  std::string m = "model '" + std::string(model) + "' is ";
  if (why.at_limit) {
    m += "at its concurrency limit of " + std::to_string(why.limit) + " (queue delay target " +
         HumanDuration(why.target.count()) + ")";
  } else {
    m += "overloaded: predicted queue delay " + HumanDuration(why.predicted_wait.count()) +
         " over its " + HumanDuration(why.target.count()) + " target";
    if (!why.shedding) m += " (burst allowance " + std::to_string(kNormalBoundTargets) + "x)";
  }
  return m;
}

}  // namespace harrier
