// Clock: the time source for everything that waits or measures (batching delays, deadlines,
// rate limits, shedding), injected so that tests drive time by hand (tests/util/fake_clock.h)
// instead of sleeping.
#pragma once

#include <chrono>

namespace harrier {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::steady_clock::duration;

  virtual ~Clock() = default;
  virtual time_point Now() const = 0;
};

// std::chrono::steady_clock. Lives for the whole process; thread-safe.
const Clock& SteadyClock();

}  // namespace harrier
