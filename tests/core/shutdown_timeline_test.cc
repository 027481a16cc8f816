#include "core/shutdown_timeline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace harrier {
namespace {

using Action = ShutdownTimeline::Action;
using Phase = ShutdownTimeline::Phase;
using std::chrono::seconds;

// One step of a timeline: at `at` (seconds after the start), a signal or a look at the clock,
// and what the timeline must answer and be afterwards.
struct Step {
  double at_s;
  bool signal;  // false: OnTime
  Action action;
  Phase phase;
  bool draining;
};

struct Case {
  std::string name;
  double delay_s;
  std::vector<Step> steps;
};

TEST(ShutdownTimelineTest, Table) {
  const std::vector<Case> cases = {
      {"no delay: the first signal stops, readiness off too",
       0,
       {{0, false, Action::kNone, Phase::kServing, false},
        {1, true, Action::kStop, Phase::kStopping, true},
        {2, false, Action::kNone, Phase::kStopping, true},
        {3, true, Action::kExitNow, Phase::kStopping, true}}},
      {"a delay: readiness off at the signal, requests served until it is over",
       5,
       {{1, false, Action::kNone, Phase::kServing, false},
        {2, true, Action::kDrain, Phase::kDraining, true},
        {6.9, false, Action::kNone, Phase::kDraining, true},
        {7, false, Action::kStop, Phase::kStopping, true},
        {8, false, Action::kNone, Phase::kStopping, true},
        {9, true, Action::kExitNow, Phase::kStopping, true}}},
      {"a second signal during the delay skips the rest of it, a third exits",
       30,
       {{0, true, Action::kDrain, Phase::kDraining, true},
        {1, true, Action::kStop, Phase::kStopping, true},
        {31, false, Action::kNone, Phase::kStopping, true},
        {32, true, Action::kExitNow, Phase::kStopping, true}}},
      {"the clock alone never begins a shutdown",
       5,
       {{100, false, Action::kNone, Phase::kServing, false}}},
      {"a negative delay counts as none", -1, {{0, true, Action::kStop, Phase::kStopping, true}}},
  };
  const Clock::time_point start = Clock::time_point{} + std::chrono::hours(1);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ShutdownTimeline timeline(
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(c.delay_s)));
    EXPECT_FALSE(timeline.draining());
    for (const Step& s : c.steps) {
      SCOPED_TRACE("at " + std::to_string(s.at_s) + " s");
      const Clock::time_point now = start + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(s.at_s));
      EXPECT_EQ(s.signal ? timeline.OnSignal(now) : timeline.OnTime(now), s.action);
      EXPECT_EQ(timeline.phase(), s.phase);
      EXPECT_EQ(timeline.draining(), s.draining);
    }
  }
}

TEST(ShutdownTimelineTest, DelayLeftCountsDownWhileDraining) {
  ShutdownTimeline timeline(seconds(10));
  const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);
  EXPECT_EQ(timeline.DelayLeft(t0), Clock::duration::zero());  // not draining yet
  ASSERT_EQ(timeline.OnSignal(t0), Action::kDrain);
  EXPECT_EQ(timeline.DelayLeft(t0), seconds(10));
  EXPECT_EQ(timeline.DelayLeft(t0 + seconds(4)), seconds(6));
  EXPECT_EQ(timeline.DelayLeft(t0 + seconds(11)), Clock::duration::zero());  // never negative
  ASSERT_EQ(timeline.OnSignal(t0 + seconds(5)), Action::kStop);              // skipped
  EXPECT_EQ(timeline.DelayLeft(t0 + seconds(5)), Clock::duration::zero());
}

}  // namespace
}  // namespace harrier
