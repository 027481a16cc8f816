// TimeSlots: the slot arithmetic shared by the sliding windows (SlidingWindow, CircuitBreaker):
// a window of window_seconds cut into at most kMaxSlots equal whole-second slots, so that a
// long window stays small. A slot is numbered by the clock: SlotOf(t) = floor(t / slot).
//
// The window at time t is the slot holding t and the count - 1 slots before it: between
// (count - 1) and count slot lengths of history, i.e. the last window_seconds give or take one
// slot (1 s for windows up to 60 s; window_seconds rounded up to whole slots above that).
//
// Value type; constant after construction.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "harrier/clock.h"

namespace harrier {

class TimeSlots {
 public:
  static constexpr int64_t kMaxSlots = 60;

  // REQUIRES: window_seconds >= 1.
  explicit TimeSlots(int64_t window_seconds)
      : slot_seconds_((std::max<int64_t>(1, window_seconds) + kMaxSlots - 1) / kMaxSlots),
        count_((std::max<int64_t>(1, window_seconds) + slot_seconds_ - 1) / slot_seconds_) {}

  int64_t SlotOf(Clock::time_point t) const {
    const int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    const int64_t slot_ns = slot_seconds_ * 1'000'000'000;
    // Floor division: a time before the clock's epoch still falls in the slot below it.
    return ns >= 0 ? ns / slot_ns : -((-ns + slot_ns - 1) / slot_ns);
  }

  // Is slot `id` in the window that ends in slot `current`?
  bool InWindow(int64_t id, int64_t current) const {
    return id <= current && id > current - count_;
  }

  int64_t slot_seconds() const { return slot_seconds_; }
  int64_t count() const { return count_; }
  // The ring position of slot `id`.
  size_t Index(int64_t id) const {
    const int64_t m = id % count_;
    return static_cast<size_t>(m < 0 ? m + count_ : m);
  }

 private:
  int64_t slot_seconds_;
  int64_t count_;
};

}  // namespace harrier
