#include "scheduler/overload_limiter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "util/fake_clock.h"

namespace harrier {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using testing::FakeClock;

constexpr uint64_t Us(int64_t us) {
  return static_cast<uint64_t>(us) * 1000;
}

TEST(OverloadLimiterTest, DerivedTarget) {
  struct Case {
    const char* what;
    nanoseconds configured;
    nanoseconds batching_delay;
    nanoseconds median_service;
    nanoseconds want;
  };
  const Case cases[] = {
      {"nothing measured yet: the floor", {}, {}, {}, milliseconds(1)},
      {"fast model: the floor", {}, {}, microseconds(100), milliseconds(1)},
      {"1 instance: 1.5 x service", {}, {}, milliseconds(2), milliseconds(3)},
      {"slow model", {}, {}, milliseconds(20), milliseconds(30)},
      {"batching delay is added", {}, microseconds(500), milliseconds(2), microseconds(3500)},
      {"configured wins", milliseconds(5), microseconds(500), milliseconds(20), milliseconds(5)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    OverloadLimiter::Options o;
    o.target_queue_delay = c.configured;
    o.batching_delay = c.batching_delay;
    EXPECT_EQ(OverloadLimiter::DerivedTarget(o, c.median_service), c.want);
  }
}

// With more instances a waiting request is picked up sooner: (1/N + 1/2) × service.
TEST(OverloadLimiterTest, DerivedTargetShrinksWithInstances) {
  const std::pair<int, nanoseconds> cases[] = {{1, milliseconds(30)},
                                               {2, milliseconds(20)},
                                               {4, milliseconds(15)},
                                               {8, microseconds(12500)}};
  for (const auto& [instances, want] : cases) {
    SCOPED_TRACE(instances);
    OverloadLimiter::Options o;
    o.instance_count = instances;
    EXPECT_EQ(OverloadLimiter::DerivedTarget(o, milliseconds(20)), want);
  }
}

TEST(OverloadLimiterTest, InitialLimit) {
  struct Case {
    int instances, per_run, initial, want;
  };
  const Case cases[] = {{1, 1, 16, 16}, {2, 1, 16, 16}, {4, 8, 16, 64}, {1, 1, 2, 2}, {3, 1, 1, 6}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.instances << "x" << c.per_run << " " << c.initial);
    FakeClock clock;
    OverloadLimiter::Options o;
    o.instance_count = c.instances;
    o.requests_per_run = c.per_run;
    o.initial_limit = c.initial;
    EXPECT_EQ(OverloadLimiter(o, clock.Now()).snapshot().limit, c.want);
  }
}

TEST(OverloadLimiterTest, RefusesAtTheLimit) {
  FakeClock clock;
  OverloadLimiter::Options o;
  o.instance_count = 2;
  o.initial_limit = 4;
  OverloadLimiter limiter(o, clock.Now());
  EXPECT_EQ(limiter.snapshot().limit, 4);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(limiter.TryAcquire());
  EXPECT_FALSE(limiter.TryAcquire());
  EXPECT_EQ(limiter.snapshot().in_flight, 4);
  EXPECT_EQ(limiter.snapshot().rejected, 1u);
  // An urgent request is counted but never refused; the next ordinary one still is.
  EXPECT_TRUE(limiter.TryAcquire(/*exempt=*/true));
  EXPECT_EQ(limiter.snapshot().in_flight, 5);
  EXPECT_FALSE(limiter.TryAcquire());
  limiter.Release();
  limiter.Release();
  EXPECT_TRUE(limiter.TryAcquire());
  EXPECT_EQ(limiter.RejectionMessage("m"),
            "model 'm' is at its concurrency limit of 4 (queue delay target 1.0 ms)");
}

TEST(OverloadLimiterTest, DisabledAdmitsEverything) {
  FakeClock clock;
  OverloadLimiter::Options o;
  o.enabled = false;
  OverloadLimiter limiter(o, clock.Now());
  for (int i = 0; i < 10'000; ++i) EXPECT_TRUE(limiter.TryAcquire());
  limiter.OnComplete(clock.Now(), Us(1'000'000), Us(10));
  EXPECT_EQ(limiter.snapshot().adjustments, 0u);
}

// The first completion sets the limit to what the instances drain within the target.
TEST(OverloadLimiterTest, FirstCompletionSizesTheLimitFromServiceTime) {
  struct Case {
    int instances;
    int per_run;
    uint64_t service_ns;
    int want_limit;
  };
  const Case cases[] = {
      {1, 1, Us(100), 11},     // T = 1 ms (floor): 1 × (1 + 10)
      {2, 1, Us(100), 22},     // two instances drain twice as much
      {1, 1, Us(20'000), 2},   // T = 30 ms: 1 × 2.5, rounded down
      {1, 8, Us(80'000), 20},  // batches of 8: 8 × 2.5
      {1, 1, 100, 4096},       // 100 ns: capped at max_limit
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.instances << "x" << c.per_run << " " << c.service_ns);
    FakeClock clock;
    OverloadLimiter::Options o;
    o.instance_count = c.instances;
    o.requests_per_run = c.per_run;
    OverloadLimiter limiter(o, clock.Now());
    ASSERT_TRUE(limiter.TryAcquire());
    limiter.OnComplete(clock.Now(), 0, c.service_ns);
    limiter.Release();
    EXPECT_EQ(limiter.snapshot().limit, c.want_limit);
    EXPECT_FALSE(limiter.snapshot().overloaded);
  }
}

// Drives one window: holds `in_flight` requests, completes `count` of them with the given
// queue delay and service time, and closes the window at its end.
class Driver {
 public:
  explicit Driver(OverloadLimiter::Options o = {}) : limiter_(o, clock_.Now()) {
    // The first window: 100 µs service, queue empty → limit 11, T = 1 ms.
    EXPECT_TRUE(limiter_.TryAcquire());
    limiter_.OnComplete(clock_.Now(), 0, Us(100));
    limiter_.Release();
  }

  void Window(int in_flight, uint64_t queue_ns, int attempts_over = 0) {
    int held = 0;
    for (int i = 0; i < in_flight; ++i) held += limiter_.TryAcquire() ? 1 : 0;
    for (int i = 0; i < attempts_over; ++i) EXPECT_FALSE(limiter_.TryAcquire());
    for (int i = 0; i < held; ++i) {
      clock_.Advance(milliseconds(100) / (held + 1));
      limiter_.OnComplete(clock_.Now(), queue_ns, Us(100));
      limiter_.Release();
    }
    clock_.Advance(milliseconds(100));
    // One more completion after the interval closes the window.
    ASSERT_TRUE(limiter_.TryAcquire());
    limiter_.OnComplete(clock_.Now(), queue_ns, Us(100));
    limiter_.Release();
  }

  OverloadLimiter::Snapshot s() const { return limiter_.snapshot(); }
  OverloadLimiter& limiter() { return limiter_; }
  FakeClock& clock() { return clock_; }

 private:
  FakeClock clock_;
  OverloadLimiter limiter_;
};

TEST(OverloadLimiterTest, EntersOverloadWhenTheMinimumQueueDelayExceedsTheTarget) {
  Driver d;
  ASSERT_EQ(d.s().limit, 11);
  ASSERT_EQ(d.s().target, milliseconds(1));
  // Every request waited 10 ms: a standing queue ten times the target.
  d.Window(11, Us(10'000));
  const auto s = d.s();
  EXPECT_TRUE(s.overloaded);
  EXPECT_EQ(s.queue_delay, milliseconds(10));
  // peak 11 × (0.1 + 1) / (0.1 + 10) = 1.19 → 1
  EXPECT_EQ(s.limit, 1);
  EXPECT_EQ(d.limiter().RejectionMessage("m"),
            "model 'm' is overloaded: queue delay 10 ms over its 1.0 ms target (concurrency "
            "limit 1)");
}

TEST(OverloadLimiterTest, DecreasesAtLeastOneStepWhenSlightlyOver) {
  Driver d;
  d.Window(11, Us(1'050));
  EXPECT_TRUE(d.s().overloaded);
  EXPECT_EQ(d.s().limit, 10);  // 11 × 1.1/1.15 = 10.5 → 10, and at most 11 − 1
}

TEST(OverloadLimiterTest, AShortBurstIsNotOverload) {
  Driver d;
  // One request in the window went straight through: the minimum is 0, so no standing queue.
  d.Window(11, Us(50'000));
  ASSERT_TRUE(d.s().overloaded);
  const int limit = d.s().limit;
  d.limiter().TryAcquire();
  d.limiter().OnComplete(d.clock().Now(), 0, Us(100));
  d.limiter().Release();
  d.Window(1, Us(50'000));
  EXPECT_FALSE(d.s().overloaded);
  EXPECT_GE(d.s().limit, limit);
}

TEST(OverloadLimiterTest, LeavesOverloadAndProbesBackUpWhenQueuesDrain) {
  Driver d;
  d.Window(11, Us(10'000));
  ASSERT_TRUE(d.s().overloaded);
  ASSERT_EQ(d.s().limit, 1);
  // Queues are short again and the limit is being hit: after one calm window (which still
  // shows the drain), probe up by max(1, limit/4) to the drainable queue (11 here), and no
  // further while requests still wait (q = 100 µs).
  std::vector<int> limits;
  for (int i = 0; i < 12; ++i) {
    d.Window(d.s().limit, Us(100), /*attempts_over=*/1);
    EXPECT_FALSE(d.s().overloaded);
    limits.push_back(d.s().limit);
  }
  EXPECT_EQ(limits, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 12, 12}));
}

// Past the drainable queue, the limit grows only when requests find idle instances (q ≈ 0)
// two windows in a row: the service time overstated how long the instances are busy.
TEST(OverloadLimiterTest, ProbesPastTheDrainableQueueOnlyWhenInstancesSitIdle) {
  Driver d;
  ASSERT_EQ(d.s().limit, 11);
  d.Window(11, Us(100), /*attempts_over=*/1);
  EXPECT_EQ(d.s().limit, 11);  // requests waited: no reason to hold more
  d.Window(11, 0, /*attempts_over=*/1);
  EXPECT_EQ(d.s().limit, 11);  // one window of idle evidence is not enough
  d.Window(11, 0, /*attempts_over=*/1);
  EXPECT_EQ(d.s().limit, 13);
  d.Window(13, Us(100), /*attempts_over=*/1);
  EXPECT_EQ(d.s().limit, 13);
}

TEST(OverloadLimiterTest, HoldsBetweenHalfAndFullTarget) {
  Driver d;
  d.Window(11, Us(700), /*attempts_over=*/1);
  EXPECT_FALSE(d.s().overloaded);
  EXPECT_EQ(d.s().limit, 11);
}

TEST(OverloadLimiterTest, DoesNotGrowWhenTheLimitIsNotReached) {
  Driver d;
  for (int i = 0; i < 20; ++i) d.Window(3, 0);
  EXPECT_EQ(d.s().limit, 11);
}

TEST(OverloadLimiterTest, NeverBelowOneRunPerInstanceNorAboveMax) {
  OverloadLimiter::Options o;
  o.instance_count = 2;
  o.requests_per_run = 4;
  o.max_limit = 100;
  Driver d(o);
  EXPECT_EQ(d.s().limit, 88);  // 8 × (1 + 10)
  for (int i = 0; i < 5; ++i) d.Window(d.s().limit, Us(500'000));
  EXPECT_TRUE(d.s().overloaded);
  EXPECT_EQ(d.s().limit, 8);
  for (int i = 0; i < 30; ++i) d.Window(d.s().limit, 0, /*attempts_over=*/1);
  EXPECT_EQ(d.s().limit, 100);
}

TEST(OverloadLimiterTest, AConfiguredTargetIsUsed) {
  OverloadLimiter::Options o;
  o.target_queue_delay = milliseconds(20);
  Driver d(o);
  EXPECT_EQ(d.s().target, milliseconds(20));
  d.Window(11, Us(10'000));  // 10 ms is within a 20 ms target
  EXPECT_FALSE(d.s().overloaded);
  d.Window(11, Us(30'000));
  EXPECT_TRUE(d.s().overloaded);
}

// A slow model's window spans at least four service times, so it sees several completions.
TEST(OverloadLimiterTest, WindowStretchesForSlowModels) {
  FakeClock clock;
  OverloadLimiter limiter({}, clock.Now());
  ASSERT_TRUE(limiter.TryAcquire());
  limiter.OnComplete(clock.Now(), 0, Us(1'000'000));  // 1 s service, first window
  limiter.Release();
  ASSERT_EQ(limiter.snapshot().adjustments, 1u);
  for (int i = 0; i < 3; ++i) {
    clock.Advance(seconds(1));
    limiter.OnComplete(clock.Now(), Us(5'000'000), Us(1'000'000));
  }
  EXPECT_EQ(limiter.snapshot().adjustments, 1u);  // 3 s < 4 × 1 s
  clock.Advance(seconds(1));
  limiter.OnComplete(clock.Now(), Us(5'000'000), Us(1'000'000));
  EXPECT_EQ(limiter.snapshot().adjustments, 2u);
  EXPECT_TRUE(limiter.snapshot().overloaded);
}

// Threads admitting and completing at once: no slot is lost or counted twice.
TEST(OverloadLimiterTest, ConcurrentSmoke) {
  FakeClock clock;
  OverloadLimiter::Options o;
  o.instance_count = 2;
  OverloadLimiter limiter(o, clock.Now());
  std::atomic<int> admitted{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20'000; ++i) {
        if (t == 0) clock.Advance(microseconds(50));  // 1 s in all: about ten windows
        if (!limiter.TryAcquire()) {
          refused++;
          continue;
        }
        admitted++;
        limiter.OnComplete(clock.Now(), Us(i % 7 == 0 ? 3'000 : 200), Us(100));
        limiter.Release();
      }
    });
  }
  for (auto& t : threads) t.join();
  const auto s = limiter.snapshot();
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(admitted + refused, 80'000);
  EXPECT_EQ(static_cast<uint64_t>(refused.load()), s.rejected);
  EXPECT_GE(s.limit, 2);
  EXPECT_LE(s.limit, o.max_limit);
  EXPECT_GT(s.adjustments, 1u);
}

}  // namespace
}  // namespace harrier
