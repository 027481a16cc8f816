#include "routing/sliding_window.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "util/fake_clock.h"

namespace harrier {
namespace {

using namespace std::chrono_literals;
using std::chrono::microseconds;
using testing::FakeClock;

// The nearest-rank p99 of `us`: the ceil(0.99 n)-th smallest.
int64_t ExactP99(std::vector<int64_t> us) {
  std::sort(us.begin(), us.end());
  const size_t rank = (us.size() * 99 + 99) / 100;
  return us[rank - 1];
}

TEST(SlidingWindowTest, EmptyWindowIsAllZero) {
  FakeClock clock;
  SlidingWindow w(clock, 60);
  EXPECT_EQ(w.Snapshot(), WindowSnapshot{});
}

TEST(SlidingWindowTest, CountsRequestsAndErrors) {
  FakeClock clock;
  SlidingWindow w(clock, 60);
  for (int i = 0; i < 200; ++i) {
    w.Record(1ms, /*error=*/i % 40 == 0);
    clock.Advance(100ms);  // spread over 20 s: several slots
  }
  const WindowSnapshot s = w.Snapshot();
  EXPECT_EQ(s.requests, 200);
  EXPECT_EQ(s.errors, 5);
  EXPECT_DOUBLE_EQ(s.error_rate, 0.025);
  EXPECT_NEAR(s.p99_us, 1000, 1000 * 0.045);
}

TEST(SlidingWindowTest, P99IsTheNearestRank) {
  struct Case {
    int fast, slow;  // requests at 1 ms and at 5 ms
    int64_t p99_us;  // the nearest-rank value
  };
  const Case cases[] = {
      {99, 1, 1000},                  // rank 99 of 100: the 99th is fast
      {98, 2, 5000},                  // the 99th is slow
      {990, 10, 1000},                // rank 990 of 1000
      {989, 11, 5000}, {1, 0, 1000},  // one request: it is the p99
      {0, 1, 5000},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.fast << " fast, " << c.slow << " slow");
    FakeClock clock;
    SlidingWindow w(clock, 10);
    for (int i = 0; i < c.fast; ++i) w.Record(1ms, false);
    for (int i = 0; i < c.slow; ++i) w.Record(5ms, false);
    const int64_t p99 = w.Snapshot().p99_us;
    EXPECT_NEAR(p99, c.p99_us, c.p99_us * 0.045) << p99;
  }
}

TEST(SlidingWindowTest, P99WithinFivePercentOfExact) {
  std::mt19937_64 random(99);
  auto uniform = [&] { return static_cast<double>(random() >> 11) * 0x1p-53; };
  struct Distribution {
    const char* name;
    std::function<int64_t()> draw_us;
  };
  const Distribution distributions[] = {
      {"uniform 100 us .. 10 ms", [&] { return static_cast<int64_t>(100 + uniform() * 9900); }},
      {"log-uniform 10 us .. 1 s",
       [&] { return static_cast<int64_t>(std::exp(std::log(10.0) + uniform() * std::log(1e5))); }},
      {"exponential, mean 2 ms",
       [&] { return static_cast<int64_t>(1 - 2000 * std::log(1 - uniform())); }},
      {"99.5% at ~800 us, tail at ~40 ms",
       [&] {
         return static_cast<int64_t>(uniform() < 0.995 ? 700 + uniform() * 200
                                                       : 30000 + uniform() * 20000);
       }},
  };
  for (const Distribution& d : distributions) {
    SCOPED_TRACE(d.name);
    for (int n : {100, 1000, 50'000}) {
      SCOPED_TRACE(n);
      FakeClock clock;
      SlidingWindow w(clock, 60);
      std::vector<int64_t> us;
      for (int i = 0; i < n; ++i) {
        us.push_back(d.draw_us());
        w.Record(microseconds(us.back()), false);
        if (i % 1000 == 999) clock.Advance(1s);
      }
      const WindowSnapshot s = w.Snapshot();
      ASSERT_EQ(s.requests, n);
      const int64_t exact = ExactP99(us);
      EXPECT_LE(std::abs(static_cast<double>(s.p99_us - exact)), 0.045 * exact + 0.5)
          << "p99 " << s.p99_us << " us, exact " << exact << " us";
    }
  }
}

TEST(SlidingWindowTest, BucketsBoundTheRelativeError) {
  // Every latency from 1 µs to 200 s reads back within 2^(1/16) - 1 of itself.
  const double bound = std::exp2(1.0 / 16) - 1;
  EXPECT_LT(bound, 0.045);
  for (double us = 1; us < 2e8; us *= 1.013) {
    const auto latency =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::micro>(us));
    const double read = SlidingWindow::BucketValueUs(SlidingWindow::BucketOf(latency));
    ASSERT_LE(std::abs(read - us) / us, bound + 1e-9) << us << " us read as " << read;
  }
  // Out of range: below 1 µs counts as 1 µs, beyond 2^28 µs in the last bucket.
  EXPECT_EQ(SlidingWindow::BucketOf(0ns), 0);
  EXPECT_EQ(SlidingWindow::BucketOf(-5ms), 0);
  EXPECT_EQ(SlidingWindow::BucketOf(500ns), 0);
  EXPECT_EQ(SlidingWindow::BucketOf(1h), SlidingWindow::kBuckets - 1);
}

TEST(SlidingWindowTest, OldSlotsExpireAsTimeAdvances) {
  FakeClock clock;  // starts on a whole second
  SlidingWindow w(clock, 60);
  for (int i = 0; i < 10; ++i) w.Record(2ms, i < 4);
  clock.Advance(30s);
  for (int i = 0; i < 5; ++i) w.Record(8ms, false);
  struct Step {
    Clock::duration advance;
    int64_t requests;
    int64_t errors;
  };
  const Step steps[] = {
      {0s, 15, 4}, {29s, 15, 4},  // 59 s after the first records: still in the window
      {1s, 5, 0},                 // 60 s: the first slot has left it
      {29s, 5, 0},                // 59 s after the second
      {1s, 0, 0},
  };
  for (const Step& s : steps) {
    clock.Advance(s.advance);
    const WindowSnapshot snap = w.Snapshot();
    EXPECT_EQ(snap.requests, s.requests);
    EXPECT_EQ(snap.errors, s.errors);
  }
  // A slot reused a whole window later starts empty.
  w.Record(1ms, false);
  EXPECT_EQ(w.Snapshot().requests, 1);
  EXPECT_NEAR(w.Snapshot().p99_us, 1000, 45);
}

TEST(SlidingWindowTest, OnlyTheSlowRequestsStillInTheWindowCount) {
  FakeClock clock;
  SlidingWindow w(clock, 10);
  for (int i = 0; i < 100; ++i) w.Record(50ms, false);
  clock.Advance(5s);
  for (int i = 0; i < 100; ++i) w.Record(1ms, false);
  EXPECT_NEAR(w.Snapshot().p99_us, 50000, 50000 * 0.045);
  clock.Advance(5s);  // the slow ones leave
  EXPECT_EQ(w.Snapshot().requests, 100);
  EXPECT_NEAR(w.Snapshot().p99_us, 1000, 45);
}

TEST(SlidingWindowTest, LongWindowsUseWiderSlots) {
  FakeClock clock;
  SlidingWindow w(clock, 600);
  EXPECT_EQ(w.slots().slot_seconds(), 10);
  EXPECT_EQ(w.slots().count(), 60);
  w.Record(1ms, false);
  clock.Advance(595s);
  EXPECT_EQ(w.Snapshot().requests, 1);
  clock.Advance(5s);
  EXPECT_EQ(w.Snapshot().requests, 0);
  // window_seconds rounded up to whole slots: 61 s is 31 slots of 2 s.
  SlidingWindow odd(clock, 61);
  EXPECT_EQ(odd.slots().slot_seconds(), 2);
  EXPECT_EQ(odd.slots().count(), 31);
}

TEST(SlidingWindowTest, ClearForgetsEverything) {
  FakeClock clock;
  SlidingWindow w(clock, 60);
  w.Record(1ms, true);
  w.Clear();
  EXPECT_EQ(w.Snapshot(), WindowSnapshot{});
  w.Record(1ms, false);
  EXPECT_EQ(w.Snapshot().requests, 1);
}

TEST(SlidingWindowTest, RecordsFromManyThreadsAreAllCounted) {
  FakeClock clock;
  SlidingWindow w(clock, 60);
  constexpr int kThreads = 4, kEach = 20'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&w, t] {
      for (int i = 0; i < kEach; ++i) w.Record(microseconds(100 + t), i % 100 == 0);
    });
  }
  for (std::thread& t : threads) t.join();
  const WindowSnapshot s = w.Snapshot();
  EXPECT_EQ(s.requests, kThreads * kEach);
  EXPECT_EQ(s.errors, kThreads * kEach / 100);
}

}  // namespace
}  // namespace harrier
