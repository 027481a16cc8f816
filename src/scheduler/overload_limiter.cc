#include "scheduler/overload_limiter.h"

#include <algorithm>
#include <cmath>
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

}  // namespace

nanoseconds OverloadLimiter::DerivedTarget(const Options& options, nanoseconds median_service) {
  if (options.target_queue_delay.count() > 0) return options.target_queue_delay;
  // The time the instances take to drain one waiting run plus half a run each: enough queue to
  // keep every instance busy, little enough that p99 stays within ~2 service times.
  const int64_t instances = std::max(1, options.instance_count);
  const nanoseconds from_service(median_service.count() * (instances + 2) / (2 * instances));
  return std::max(options.min_target_queue_delay, from_service) + options.batching_delay;
}

OverloadLimiter::OverloadLimiter(const Options& options, Clock::time_point now)
    : options_(options),
      min_limit_(std::max(1, options.instance_count) * std::max(1, options.requests_per_run)),
      max_limit_(std::max(min_limit_, options.max_limit)),
      limit_(std::min(max_limit_, std::max(2 * min_limit_, options.initial_limit))),
      window_start_ns_(ToNs(now)),
      window_length_ns_(0),  // the first completion closes the first window
      target_ns_(DerivedTarget(options, nanoseconds(0)).count()) {}

bool OverloadLimiter::TryAcquire(bool exempt) {
  if (!options_.enabled) return true;
  const int n = in_flight_.fetch_add(1, std::memory_order_relaxed) + 1;
  const int limit = limit_.load(std::memory_order_relaxed);
  if (n >= limit && !window_saturated_.load(std::memory_order_relaxed))
    window_saturated_.store(true, std::memory_order_relaxed);
  if (n > limit && !exempt) {
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  int peak = window_peak_.load(std::memory_order_relaxed);
  while (n > peak && !window_peak_.compare_exchange_weak(peak, n, std::memory_order_relaxed)) {
  }
  return true;
}

void OverloadLimiter::Release() {
  if (options_.enabled) in_flight_.fetch_sub(1, std::memory_order_relaxed);
}

void OverloadLimiter::OnComplete(Clock::time_point now, uint64_t queue_ns, uint64_t service_ns) {
  if (!options_.enabled) return;
  if (service_ns > 0) {
    const uint64_t i = service_count_.fetch_add(1, std::memory_order_relaxed);
    service_ns_[i % kServiceSamples].store(service_ns, std::memory_order_relaxed);
  }
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

uint64_t OverloadLimiter::MedianServiceNs() const {
  const uint64_t n =
      std::min<uint64_t>(service_count_.load(std::memory_order_relaxed), kServiceSamples);
  if (n == 0) return 0;
  std::array<uint64_t, kServiceSamples> samples;
  for (uint64_t i = 0; i < n; ++i) samples[i] = service_ns_[i].load(std::memory_order_relaxed);
  auto mid = samples.begin() + n / 2;
  std::nth_element(samples.begin(), mid, samples.begin() + n);
  return *mid;
}

void OverloadLimiter::CloseWindow(int64_t now_ns) {
  const uint64_t count = window_count_.exchange(0, std::memory_order_relaxed);
  const uint64_t min_q = window_min_queue_ns_.exchange(UINT64_MAX, std::memory_order_relaxed);
  const int peak =
      window_peak_.exchange(in_flight_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  const bool saturated = window_saturated_.exchange(false, std::memory_order_relaxed);
  const bool first = adjustments_.fetch_add(1, std::memory_order_relaxed) == 0;
  window_start_ns_.store(now_ns, std::memory_order_relaxed);

  const double s = static_cast<double>(MedianServiceNs());
  const int64_t target = DerivedTarget(options_, nanoseconds(static_cast<int64_t>(s))).count();
  const int64_t interval = options_.interval.count();
  window_length_ns_.store(std::max<int64_t>(interval, static_cast<int64_t>(4 * s)),
                          std::memory_order_relaxed);
  median_service_ns_.store(static_cast<int64_t>(s), std::memory_order_relaxed);
  target_ns_.store(target, std::memory_order_relaxed);
  if (count == 0) return;
  const double previous_q = static_cast<double>(
      last_queue_delay_ns_.exchange(static_cast<int64_t>(min_q), std::memory_order_relaxed));

  const double t = static_cast<double>(target);
  const double q = static_cast<double>(min_q);
  int limit = limit_.load(std::memory_order_relaxed);
  const bool was_overloaded = overloaded_.exchange(q > t, std::memory_order_relaxed);
  // The queue the instances drain within the target: (requests one round of runs takes) ×
  // (1 + T/S). The first window starts there; probing past it needs more evidence.
  const int drainable = s > 0 ? static_cast<int>(std::clamp<double>(
                                    std::floor(static_cast<double>(min_limit_) * (1.0 + t / s)),
                                    min_limit_, max_limit_))
                              : max_limit_;
  if (q > t) {
    // Requests admitted under a higher limit are still draining: the last cut has not taken
    // effect yet, and cutting again on their queue delay would overshoot.
    if (in_flight_.load(std::memory_order_relaxed) <= limit) {
      // Little's law: at the same throughput, latency S+T needs peak × (S+T)/(S+q) in flight.
      const int base = std::clamp(peak, 1, limit);
      const double scaled = std::floor(static_cast<double>(base) * (s + t) / (s + q));
      limit = static_cast<int>(std::min<double>(limit - 1, scaled));
    }
  } else if (first && s > 0) {
    limit = drainable;
  } else if (saturated && !was_overloaded &&
             (limit < drainable ? q < t / 2 : q < t / 64 && previous_q < t / 64)) {
    // Probe up when the limit, not the model, held requests back. Below the drainable queue a
    // short queue is evidence enough. Past it, more requests would only wait longer unless the
    // instances sat idle (the service time overstates how long they are busy): that takes two
    // windows in a row in which some request found an idle instance (q ≈ 0). Never in the
    // window right after a cut: it still shows the drain.
    limit += std::max(1, limit / 4);
  }
  limit_.store(std::clamp(limit, min_limit_, max_limit_), std::memory_order_relaxed);
}

OverloadLimiter::Snapshot OverloadLimiter::snapshot() const {
  Snapshot s;
  s.enabled = options_.enabled;
  s.limit = limit_.load(std::memory_order_relaxed);
  s.in_flight = in_flight_.load(std::memory_order_relaxed);
  s.overloaded = overloaded_.load(std::memory_order_relaxed);
  s.target = nanoseconds(target_ns_.load(std::memory_order_relaxed));
  s.median_service = nanoseconds(median_service_ns_.load(std::memory_order_relaxed));
  s.queue_delay = nanoseconds(last_queue_delay_ns_.load(std::memory_order_relaxed));
  s.rejected = rejected_.load(std::memory_order_relaxed);
  s.adjustments = adjustments_.load(std::memory_order_relaxed);
  return s;
}

std::string OverloadLimiter::RejectionMessage(std::string_view model) const {
  const Snapshot s = snapshot();
  std::string m = "model '" + std::string(model) + "' is ";
  if (s.overloaded) {
    m += "overloaded: queue delay " + HumanDuration(s.queue_delay.count()) + " over its " +
         HumanDuration(s.target.count()) + " target (concurrency limit " + std::to_string(s.limit) +
         ")";
  } else {
    m += "at its concurrency limit of " + std::to_string(s.limit) + " (queue delay target " +
         HumanDuration(s.target.count()) + ")";
  }
  return m;
}

}  // namespace harrier
