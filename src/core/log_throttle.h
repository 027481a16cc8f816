// LogThrottle: which events of a repeating condition get a log line, so that a condition that
// recurs every few milliseconds (accept() failing while file descriptors are exhausted) costs
// one line per interval instead of one per event, and the lines still say how much happened.
//
// The first event gets a line at once; after it, at most one line per `interval`, and each line
// reports how many events it stands for: itself and those left unlogged since the previous
// line. When the condition ends (Recovered()), a line reports the events not yet reported, if
// the interval allows one; otherwise they are carried to the next line. So between two lines
// there are always at least `interval` (the first line excepted), whichever kind they are.
//
// Pure: the caller passes the time, so a test drives it with made-up time points. Not thread
// safe; one object per source of events, used by one thread (or under the caller's lock).
#pragma once

#include <chrono>
#include <cstdint>

namespace harrier {

class LogThrottle {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::steady_clock::duration;

  explicit LogThrottle(duration interval) : interval_(interval) {}

  // One event at `now`. 0: no line now (the event is counted for the next one). N > 0: log a
  // line now that stands for N events (this one and the N - 1 unlogged before it).
  uint64_t Event(time_point now);

  // The condition ended at `now` (the operation succeeded again). 0: nothing to log (no event
  // is unreported, or the interval does not allow a line yet and they stay counted). N > 0: log
  // that it recovered, N events having gone unlogged since the previous line.
  uint64_t Recovered(time_point now);

  // Events not yet reported by a line.
  uint64_t unreported() const { return unreported_; }

 private:
  bool LineDue(time_point now) const { return !logged_ || now - last_line_ >= interval_; }

  const duration interval_;
  bool logged_ = false;  // a line has been logged (last_line_ is set)
  time_point last_line_{};
  uint64_t unreported_ = 0;
};

}  // namespace harrier
