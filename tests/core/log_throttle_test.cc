#include "core/log_throttle.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace harrier {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A table of steps against one throttle with a 10 s interval: an event or a recovery at a time
// (ms since the start), and the count the throttle answers (0: no line).
TEST(LogThrottleTest, Table) {
  enum Kind { kEvent, kRecovered };
  const struct {
    Kind kind;
    int64_t at_ms;
    uint64_t line;
  } steps[] = {
      {kRecovered, 0, 0},       // nothing happened yet: nothing to say
      {kEvent, 0, 1},           // the first event: a line at once
      {kEvent, 100, 0},         // then silence for 10 s, counting
      {kEvent, 200, 0},         //
      {kEvent, 9'999, 0},       //
      {kEvent, 10'000, 4},      // 10 s after the first line: this one and the three before
      {kEvent, 10'100, 0},      //
      {kRecovered, 10'200, 0},  // recovered too soon after a line: carried
      {kEvent, 15'000, 0},      //
      {kRecovered, 20'000, 2},  // recovered, two events unreported
      {kRecovered, 21'000, 0},  // nothing new
      {kEvent, 25'000, 0},      // a new episode 5 s after the recovery line waits its turn
      {kEvent, 30'000, 2},      //
      {kEvent, 100'000, 1},     // long after: at once, alone
  };
  LogThrottle throttle(seconds(10));
  const auto start = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  int i = 0;
  for (const auto& step : steps) {
    SCOPED_TRACE("step " + std::to_string(i++));
    const auto now = start + milliseconds(step.at_ms);
    const uint64_t got = step.kind == kEvent ? throttle.Event(now) : throttle.Recovered(now);
    EXPECT_EQ(got, step.line);
  }
  EXPECT_EQ(throttle.unreported(), 0u);
}

TEST(LogThrottleTest, EventsEveryHundredMillisecondsGiveOneLinePerInterval) {
  LogThrottle throttle(seconds(10));
  const auto start = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  int lines = 0;
  uint64_t reported = 0;
  for (int i = 0; i < 600; ++i) {  // a minute of accept() failing every 100 ms
    if (const uint64_t n = throttle.Event(start + milliseconds(100 * i))) {
      ++lines;
      reported += n;
    }
  }
  EXPECT_EQ(lines, 6);
  EXPECT_EQ(reported + throttle.unreported(), 600u);
}

}  // namespace
}  // namespace harrier
