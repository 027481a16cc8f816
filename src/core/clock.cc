#include "harrier/clock.h"

namespace harrier {
namespace {

class SteadyClockImpl : public Clock {
 public:
  time_point Now() const override { return std::chrono::steady_clock::now(); }
};

}  // namespace

const Clock& SteadyClock() {
  static const SteadyClockImpl clock;
  return clock;
}

}  // namespace harrier
