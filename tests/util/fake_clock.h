// FakeClock: a Clock that moves only when a test says so.
#pragma once

#include <atomic>

#include "harrier/clock.h"

namespace harrier::testing {

class FakeClock : public Clock {
 public:
  FakeClock() : now_(time_point{} + std::chrono::hours(1)) {}
  time_point Now() const override { return now_.load(); }
  void Advance(duration d) { now_.store(now_.load() + d); }
  void Set(time_point t) { now_.store(t); }

 private:
  std::atomic<time_point> now_;
};

}  // namespace harrier::testing
