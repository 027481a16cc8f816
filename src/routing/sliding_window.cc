#include "routing/sliding_window.h"

#include <cmath>

namespace harrier {

SlidingWindow::SlidingWindow(const Clock& clock, int64_t window_seconds)
    : clock_(clock), slots_(window_seconds), ring_(static_cast<size_t>(slots_.count())) {}

int SlidingWindow::BucketOf(Clock::duration latency) {
  const double us =
      std::chrono::duration_cast<std::chrono::duration<double, std::micro>>(latency).count();
  if (!(us > 1)) return 0;  // also NaN-safe; sub-microsecond latencies count as 1 µs
  const double b = std::floor(std::log2(us) * kBucketsPerOctave);
  return b >= kBuckets - 1 ? kBuckets - 1 : static_cast<int>(b);
}

double SlidingWindow::BucketValueUs(int bucket) {
  return std::exp2((bucket + 0.5) / kBucketsPerOctave);
}

void SlidingWindow::Record(Clock::duration latency, bool error) {
  const int64_t id = slots_.SlotOf(clock_.Now());
  const int bucket = BucketOf(latency);
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = ring_[slots_.Index(id)];
  if (slot.id != id) {
    // A thread that read the clock just before the ring moved a whole window on: its record
    // belongs to a slot already out of the window.
    if (slot.id > id) return;
    slot.id = id;
    slot.requests = 0;
    slot.errors = 0;
    slot.counts.fill(0);
  }
  ++slot.requests;
  if (error) ++slot.errors;
  ++slot.counts[static_cast<size_t>(bucket)];
}

WindowSnapshot SlidingWindow::Snapshot() const {
  const int64_t current = slots_.SlotOf(clock_.Now());
  std::array<uint64_t, kBuckets> counts{};
  WindowSnapshot s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Slot& slot : ring_) {
      if (!slots_.InWindow(slot.id, current)) continue;
      s.requests += slot.requests;
      s.errors += slot.errors;
      for (int b = 0; b < kBuckets; ++b) counts[b] += slot.counts[b];
    }
  }
  if (s.requests == 0) return s;
  s.error_rate = static_cast<double>(s.errors) / static_cast<double>(s.requests);
  // Nearest rank: the ceil(0.99 n)-th smallest. Integer arithmetic, so that n = 100 gives
  // rank 99 exactly.
  const uint64_t n = static_cast<uint64_t>(s.requests);
  const uint64_t rank = (n * 99 + 99) / 100;
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += counts[b];
    if (seen >= rank) {
      s.p99_us = std::llround(BucketValueUs(b));
      break;
    }
  }
  return s;
}

void SlidingWindow::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Slot& slot : ring_) slot.id = INT64_MIN;
}

}  // namespace harrier
