#include "backends/llamacpp/thread_governor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace harrier {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Governor = ThreadGovernor;

// Drives a governor with whole windows of steps, on a clock of its own.
class ThreadGovernorTest : public ::testing::Test {
 protected:
  // One window's worth of steps, `off_share` of their time off-core; the clock moves on by it.
  void Window(Governor& g, double off_share) {
    const Governor::Duration wall = Governor::kWindow;
    const auto off = Governor::Duration(static_cast<int64_t>(off_share * wall.count()));
    now_ += wall;
    g.Record(wall, wall - off, now_);
  }
  // Calm windows until `span` has passed.
  void CalmFor(Governor& g, Governor::Duration span) {
    const auto until = now_ + span;
    while (now_ < until) Window(g, 0.0);
  }

  Governor::TimePoint now_{seconds(1000)};
};

TEST_F(ThreadGovernorTest, CalmStepsKeepEveryThread) {
  Governor g(4, now_);
  CalmFor(g, seconds(30));
  EXPECT_EQ(g.threads(), 4);
  // Time off-core at the threshold is not contention.
  Window(g, Governor::kContendedShare);
  EXPECT_EQ(g.threads(), 4);
  EXPECT_EQ(g.decreases(), 0);
}

TEST_F(ThreadGovernorTest, AContendedWindowHalvesTheThreadsDownToOne) {
  Governor g(8, now_);
  Window(g, 0.5);
  EXPECT_EQ(g.threads(), 4);
  Window(g, 0.5);
  EXPECT_EQ(g.threads(), 2);
  Window(g, 0.3);
  EXPECT_EQ(g.threads(), 1);
  Window(g, 0.9);
  EXPECT_EQ(g.threads(), 1);
  EXPECT_EQ(g.decreases(), 3);
}

TEST_F(ThreadGovernorTest, StepsAreJudgedOnlyOnceTheyFillAWindow) {
  Governor g(2, now_);
  // Nine tenths of a window, all of it off-core: not judged yet.
  const Governor::Duration step = Governor::kWindow / 10;
  for (int i = 0; i < 9; ++i) {
    now_ += step;
    g.Record(step, Governor::Duration(0), now_);
  }
  EXPECT_EQ(g.threads(), 2);
  // The tenth fills it: 100% off-core.
  now_ += step;
  g.Record(step, Governor::Duration(0), now_);
  EXPECT_EQ(g.threads(), 1);
  // The next window starts empty: one calm window is judged calm.
  Window(g, 0.0);
  EXPECT_EQ(g.threads(), 1);
  EXPECT_EQ(g.decreases(), 1);
}

TEST_F(ThreadGovernorTest, ACpuClockAheadOfTheWallClockIsNoTimeOffCore) {
  Governor g(2, now_);
  now_ += Governor::kWindow;
  g.Record(Governor::kWindow, Governor::kWindow + milliseconds(1), now_);
  EXPECT_EQ(g.threads(), 2);
}

TEST_F(ThreadGovernorTest, AfterACalmSecondOneMoreThreadIsTriedAndKeptWhenItHolds) {
  Governor g(4, now_);
  Window(g, 0.5);
  Window(g, 0.5);
  ASSERT_EQ(g.threads(), 1);
  CalmFor(g, Governor::kFirstTryAfter - Governor::kWindow);
  EXPECT_EQ(g.threads(), 1);
  Window(g, 0.0);  // a second since the last contended window
  EXPECT_EQ(g.threads(), 2);
  // Kept: the next try comes a second later, and so on up to the configured four.
  CalmFor(g, Governor::kFirstTryAfter);
  EXPECT_EQ(g.threads(), 3);
  CalmFor(g, Governor::kFirstTryAfter);
  EXPECT_EQ(g.threads(), 4);
  CalmFor(g, seconds(10));
  EXPECT_EQ(g.threads(), 4);
}

TEST_F(ThreadGovernorTest, AFailedTryDoublesTheWaitUpToTheLongest) {
  Governor g(2, now_);
  Window(g, 0.5);
  ASSERT_EQ(g.threads(), 1);
  Governor::Duration wait = Governor::kFirstTryAfter;
  for (int failures = 0; failures < 8; ++failures) {
    CalmFor(g, wait - Governor::kWindow);
    EXPECT_EQ(g.threads(), 1) << "failures " << failures;
    Window(g, 0.0);
    ASSERT_EQ(g.threads(), 2) << "failures " << failures;
    Window(g, 0.5);  // the try's first window is contended
    ASSERT_EQ(g.threads(), 1);
    wait = std::min(wait * 2, Governor::kLongestTryAfter);
  }
  EXPECT_EQ(wait, Governor::kLongestTryAfter);
  // A try that holds resets the wait.
  CalmFor(g, wait);
  ASSERT_EQ(g.threads(), 2);
  Window(g, 0.0);
  Window(g, 0.5);  // contention later than the try's first window: halves, the wait stays 1 s
  ASSERT_EQ(g.threads(), 1);
  CalmFor(g, Governor::kFirstTryAfter);
  EXPECT_EQ(g.threads(), 2);
}

// A failed try goes back to the count that held, not to half the tried one, and its wait keeps
// doubling: `threads` 3 on 2 free cores settles on 2, trying 3 ever more rarely. With halving,
// it fell to 1, and the climb back to 2 reset the wait (probe 37: 66% of the time on 1).
TEST_F(ThreadGovernorTest, AFailedTryGoesBackToTheCountThatHeld) {
  Governor g(3, now_);
  Window(g, 0.5);  // contention, not a try: halves
  ASSERT_EQ(g.threads(), 1);
  CalmFor(g, Governor::kFirstTryAfter);
  ASSERT_EQ(g.threads(), 2);
  CalmFor(g, Governor::kFirstTryAfter);  // 2 held
  ASSERT_EQ(g.threads(), 3);
  Governor::Duration wait = Governor::kFirstTryAfter;
  for (int failures = 0; failures < 6; ++failures) {
    Window(g, 0.5);  // 3 does not hold
    ASSERT_EQ(g.threads(), 2) << "failures " << failures;
    wait = std::min(wait * 2, Governor::kLongestTryAfter);
    CalmFor(g, wait - Governor::kWindow);
    EXPECT_EQ(g.threads(), 2) << "failures " << failures;
    Window(g, 0.0);
    ASSERT_EQ(g.threads(), 3) << "failures " << failures;
  }
  EXPECT_EQ(wait, Governor::kLongestTryAfter);
}

// After an idle spell longer than the longest wait the count starts from the most again: a
// model idle after a busy spell kept its reduced count, then climbed a thread a second (probe
// 37). A shorter pause keeps it.
TEST_F(ThreadGovernorTest, AfterALongIdleSpellStepsStartFromTheMost) {
  Governor g(4, now_);
  Window(g, 0.5);
  ASSERT_EQ(g.threads(), 2);
  EXPECT_EQ(g.StepThreads(now_ + Governor::kLongestTryAfter), 2);
  EXPECT_EQ(g.StepThreads(now_ + Governor::kLongestTryAfter + milliseconds(1)), 4);
  EXPECT_EQ(g.threads(), 4);
  // And is judged afresh from there: a contended window halves it again.
  now_ += Governor::kLongestTryAfter + milliseconds(1);
  Window(g, 0.5);
  EXPECT_EQ(g.threads(), 2);
}

TEST_F(ThreadGovernorTest, ContentionWithOneThreadPutsTheNextTryOff) {
  Governor g(2, now_);
  Window(g, 0.5);
  ASSERT_EQ(g.threads(), 1);
  // Half a second calm, then a contended window: the second starts again from there.
  CalmFor(g, milliseconds(500));
  Window(g, 0.5);
  CalmFor(g, Governor::kFirstTryAfter - Governor::kWindow);
  EXPECT_EQ(g.threads(), 1);
  Window(g, 0.0);
  EXPECT_EQ(g.threads(), 2);
  EXPECT_EQ(g.decreases(), 1);
}

TEST_F(ThreadGovernorTest, AtLeastOneThread) {
  Governor none(0, now_);
  EXPECT_EQ(none.threads(), 1);
  Window(none, 0.9);
  CalmFor(none, seconds(5));
  EXPECT_EQ(none.threads(), 1);
  EXPECT_EQ(none.decreases(), 0);
}

TEST(ThreadGovernorCpuTime, CountsTheCallingThreadsTimeOnACoreNotWhileItSleeps) {
  // Spinning moves it (within a generous bound of wall time, for a loaded machine)...
  const Governor::Duration start = Governor::ThreadCpuTime();
  const auto give_up = std::chrono::steady_clock::now() + seconds(10);
  volatile uint64_t spin = 0;
  while (Governor::ThreadCpuTime() - start < milliseconds(5) &&
         std::chrono::steady_clock::now() < give_up) {
    spin = spin + 1;
  }
  EXPECT_GE(Governor::ThreadCpuTime() - start, milliseconds(5));
  // ...sleeping hardly does: it is the thread's CPU time, not the wall clock's.
  const Governor::Duration before_sleep = Governor::ThreadCpuTime();
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_LT(Governor::ThreadCpuTime() - before_sleep, milliseconds(10));
}

}  // namespace
}  // namespace harrier
