#include "core/log_throttle.h"

namespace harrier {

uint64_t LogThrottle::Event(time_point now) {
  ++unreported_;
  if (!LineDue(now)) return 0;
  logged_ = true;
  last_line_ = now;
  const uint64_t events = unreported_;
  unreported_ = 0;
  return events;
}

uint64_t LogThrottle::Recovered(time_point now) {
  if (unreported_ == 0 || !LineDue(now)) return 0;
  logged_ = true;
  last_line_ = now;
  const uint64_t events = unreported_;
  unreported_ = 0;
  return events;
}

}  // namespace harrier
