#include "scheduler/adaptive_delay.h"

#include <algorithm>

namespace harrier {
namespace {

double Ewma(double average, double sample) {
  return average < 0 ? sample : average + AdaptiveDelay::kAlpha * (sample - average);
}

Clock::duration FromNs(double ns) {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::nanoseconds(static_cast<int64_t>(ns)));
}

}  // namespace

AdaptiveDelay::AdaptiveDelay(Clock::duration target, int64_t max_batch_size)
    : target_(target),
      max_batch_size_(std::max<int64_t>(1, max_batch_size)),
      // Read by an adaptive delay (a target) and by the batcher's deadline check
      // (BatchFormer::LatestStart), which every batching model has.
      service_ns_(static_cast<size_t>(max_batch_size_) + 1, -1.0) {}

void AdaptiveDelay::RecordArrival(Clock::time_point now) {
  if (last_arrival_ && now >= *last_arrival_) {
    gap_ns_ = Ewma(gap_ns_, std::chrono::duration<double, std::nano>(now - *last_arrival_).count());
  }
  last_arrival_ = now;
}

void AdaptiveDelay::RecordExecution(int64_t batch_size, Clock::duration run_time) {
  if (batch_size < 1 || batch_size > max_batch_size_ || service_ns_.empty()) return;
  double& s = service_ns_[static_cast<size_t>(batch_size)];
  s = Ewma(s, std::chrono::duration<double, std::nano>(run_time).count());
}

Clock::duration AdaptiveDelay::ServiceTime(int64_t batch_size) const {
  if (service_ns_.empty()) return Clock::duration::zero();
  batch_size = std::clamp<int64_t>(batch_size, 1, max_batch_size_);
  if (service_ns_[batch_size] >= 0) return FromNs(service_ns_[batch_size]);
  for (int64_t k = batch_size - 1; k >= 1; --k)  // linear in the batch size: pessimistic
    if (service_ns_[k] >= 0) return FromNs(service_ns_[k] * static_cast<double>(batch_size) / k);
  for (int64_t k = batch_size + 1; k <= max_batch_size_; ++k)
    if (service_ns_[k] >= 0) return FromNs(service_ns_[k]);
  return Clock::duration::zero();
}

std::optional<Clock::duration> AdaptiveDelay::ExpectedGap(Clock::time_point now) const {
  if (gap_ns_ < 0 || !last_arrival_) return std::nullopt;
  return std::max(FromNs(gap_ns_), now - *last_arrival_);
}

Clock::time_point AdaptiveDelay::WaitUntil(Clock::time_point now, Clock::time_point oldest,
                                           int64_t batch_items) const {
  if (batch_items >= max_batch_size_) return now;
  if (gap_ns_ < 0 || !last_arrival_) return now;
  const Clock::duration gap = FromNs(gap_ns_);
  // Light load: the instance keeps up one batch at a time.
  if (gap >= ServiceTime(batch_items)) return now;
  const Clock::time_point next_arrival = *last_arrival_ + gap;
  if (next_arrival <= now) return now;  // the expected request did not come
  const Clock::time_point start_by = oldest + target_ - ServiceTime(batch_items + 1);
  if (start_by <= now || next_arrival > start_by) return now;
  return next_arrival;
}

}  // namespace harrier
