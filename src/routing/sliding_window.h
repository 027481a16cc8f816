// SlidingWindow: one version's requests over the last window_seconds — how many, how many
// failed, and their p99 latency — read by the rollout guard (guard.h).
//
// The window is a ring of time slots (time_slots.h: 1 s each for windows up to 60 s, at most 60
// slots); a slot is reused, and its old figures dropped, once the clock has moved a whole
// window past it. Time comes only from the injected clock.
//
// Latency: each slot counts requests in log-scale buckets, 8 per octave (bucket b holds
// [2^(b/8), 2^((b+1)/8)) µs) from 1 µs to 2^28 µs (about 268 s); shorter latencies count as
// 1 µs, longer ones in the last bucket. The p99 is the nearest-rank p99 (the ceil(0.99 n)-th
// smallest latency) read as its bucket's geometric middle, so it is within 2^(1/16) - 1 = 4.5%
// of the exact nearest-rank value, plus rounding to whole microseconds (which dominates only
// below ~10 µs). Errors count in the latency distribution too: the p99 is what clients waited,
// failures included.
//
// Size: 224 four-byte counters per slot, about 54 KB for a 60-slot window.
//
// Thread safety: Record() and Snapshot() from any thread; one mutex guards the ring. Record()
// reads the clock and finds its bucket before taking it, so the lock is held for a few
// increments (and, once per slot, a clear of the reused slot).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <vector>

#include "harrier/clock.h"
#include "routing/time_slots.h"

namespace harrier {

struct WindowSnapshot {
  int64_t requests = 0;
  int64_t errors = 0;
  double error_rate = 0;  // errors / requests; 0 without requests
  int64_t p99_us = 0;     // 0 without requests

  bool operator==(const WindowSnapshot&) const = default;
};

class SlidingWindow {
 public:
  static constexpr int kBucketsPerOctave = 8;
  static constexpr int kOctaves = 28;
  static constexpr int kBuckets = kBucketsPerOctave * kOctaves;

  // `clock` must outlive the window. REQUIRES: window_seconds >= 1.
  SlidingWindow(const Clock& clock, int64_t window_seconds);

  SlidingWindow(const SlidingWindow&) = delete;
  SlidingWindow& operator=(const SlidingWindow&) = delete;

  // One finished request: how long it took, and whether it failed.
  void Record(Clock::duration latency, bool error);

  // The figures of the current window.
  WindowSnapshot Snapshot() const;

  // Forgets everything recorded.
  void Clear();

  const TimeSlots& slots() const { return slots_; }

  // The latency bucket of `latency`, and the value a bucket is read as (in µs); for tests.
  static int BucketOf(Clock::duration latency);
  static double BucketValueUs(int bucket);

 private:
  struct Slot {
    int64_t id = INT64_MIN;  // the TimeSlots slot number; INT64_MIN = never used
    int64_t requests = 0;
    int64_t errors = 0;
    std::array<uint32_t, kBuckets> counts{};
  };

  // Constant after construction.
  const Clock& clock_;
  const TimeSlots slots_;

  mutable std::mutex mu_;
  std::vector<Slot> ring_;  // guarded by mu_; slots_.count() slots
};

}  // namespace harrier
