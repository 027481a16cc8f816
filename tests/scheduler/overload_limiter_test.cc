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
using LimiterRun = OverloadLimiter::Run;

constexpr uint64_t Us(int64_t us) {
  return static_cast<uint64_t>(us) * 1000;
}

TEST(OverloadLimiterTest, DerivedTarget) {
  struct Case {
    const char* what;
    nanoseconds configured;
    nanoseconds batching_delay;
    nanoseconds batch1_service;
    nanoseconds want;
  };
  const Case cases[] = {
      {"nothing measured yet: the floor", {}, {}, {}, milliseconds(1)},
      {"fast model: the floor", {}, {}, microseconds(100), milliseconds(1)},
      {"half a batch-1 run", {}, {}, milliseconds(4), milliseconds(2)},
      {"slow model", {}, {}, milliseconds(20), milliseconds(10)},
      {"batching delay is added", {}, microseconds(500), milliseconds(4), microseconds(2500)},
      {"configured wins", milliseconds(5), microseconds(500), milliseconds(20), milliseconds(5)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    OverloadLimiter::Options o;
    o.target_queue_delay = c.configured;
    o.batching_delay = c.batching_delay;
    EXPECT_EQ(OverloadLimiter::DerivedTarget(o, c.batch1_service), c.want);
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

// Before any run is measured, only the initial limit holds a burst back.
TEST(OverloadLimiterTest, RefusesAtTheInitialLimit) {
  FakeClock clock;
  OverloadLimiter::Options o;
  o.instance_count = 2;
  o.initial_limit = 4;
  OverloadLimiter limiter(o, clock.Now());
  EXPECT_EQ(limiter.snapshot().limit, 4);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(limiter.TryAcquire(clock.Now()));
  EXPECT_FALSE(limiter.WouldAdmit(clock.Now()));
  EXPECT_FALSE(limiter.TryAcquire(clock.Now()));
  EXPECT_EQ(limiter.snapshot().in_flight, 4);
  EXPECT_EQ(limiter.snapshot().rejected, 1u);
  // An urgent request is counted but never refused; the next ordinary one still is.
  EXPECT_TRUE(limiter.TryAcquire(clock.Now(), /*exempt=*/true));
  EXPECT_EQ(limiter.snapshot().in_flight, 5);
  EXPECT_FALSE(limiter.TryAcquire(clock.Now()));
  limiter.Release();
  limiter.Release();
  EXPECT_TRUE(limiter.WouldAdmit(clock.Now()));
  EXPECT_EQ(limiter.snapshot().in_flight, 3);  // WouldAdmit takes nothing
  EXPECT_TRUE(limiter.TryAcquire(clock.Now()));
  OverloadLimiter::Refusal why;
  EXPECT_FALSE(limiter.TryAcquire(clock.Now(), false, &why));
  EXPECT_TRUE(why.at_limit);
  EXPECT_EQ(limiter.RejectionMessage("m", why),
            "model 'm' is at its concurrency limit of 4 (queue delay target 1.0 ms)");
  // The message names the limit and target that refused it, even once a measured run has
  // changed them (the first run's measurement came between a refusal and its message: "4096").
  limiter.RunStarted({}, clock.Now());
  limiter.RunFinished({}, milliseconds(10), milliseconds(10));
  EXPECT_EQ(limiter.snapshot().limit, o.max_limit);
  EXPECT_EQ(limiter.RejectionMessage("m", why),
            "model 'm' is at its concurrency limit of 4 (queue delay target 1.0 ms)");
}

TEST(OverloadLimiterTest, DisabledAdmitsEverything) {
  FakeClock clock;
  OverloadLimiter::Options o;
  o.enabled = false;
  OverloadLimiter limiter(o, clock.Now());
  for (int i = 0; i < 10'000; ++i) EXPECT_TRUE(limiter.TryAcquire(clock.Now()));
  limiter.RunStarted({}, clock.Now());
  limiter.RunFinished({}, milliseconds(10), milliseconds(10));
  limiter.OnComplete(clock.Now() + seconds(1), Us(1'000'000), Us(10));
  EXPECT_EQ(limiter.snapshot().adjustments, 0u);
  EXPECT_EQ(limiter.snapshot().median_service, nanoseconds(0));
}

// A model driven by hand: admissions, runs and completions at chosen times.
class Driver {
 public:
  explicit Driver(OverloadLimiter::Options o = {}) : limiter_(o, clock_.Now()) {}

  bool Admit() { return limiter_.TryAcquire(clock_.Now(), false, &why_); }
  std::string Message() const { return limiter_.RejectionMessage("m", why_); }
  // Runs `items` requests (already admitted) on `instance` for `service`, start to finish.
  void RunToEnd(size_t instance, int items, nanoseconds service, nanoseconds queued = {}) {
    const LimiterRun run{instance, items, items};
    limiter_.RunStarted(run, clock_.Now());
    clock_.Advance(service);
    limiter_.RunFinished(run, service, service);
    for (int i = 0; i < items; ++i) {
      limiter_.OnComplete(clock_.Now(), static_cast<uint64_t>(queued.count()), 1);
      limiter_.Release();
    }
  }
  void Start(size_t instance, int items) {
    limiter_.RunStarted({instance, items, items}, clock_.Now());
  }
  void Finish(size_t instance, int items, nanoseconds service) {
    limiter_.RunFinished({instance, items, items}, service, service);
    for (int i = 0; i < items; ++i) {
      limiter_.OnComplete(clock_.Now(), 0, 1);
      limiter_.Release();
    }
  }
  // Measures S(items) = `service` on instance 0 (admitting the requests first).
  void Measure(int items, nanoseconds service, nanoseconds queued = {}) {
    for (int i = 0; i < items; ++i) limiter_.TryAcquire(clock_.Now(), /*exempt=*/true);
    RunToEnd(0, items, service, queued);
  }
  // Back-to-back runs of one request, each having waited `queued`, for `duration`.
  void Saturate(nanoseconds service, nanoseconds queued, nanoseconds duration) {
    for (nanoseconds t{0}; t < duration; t += service) Measure(1, service, queued);
  }

  FakeClock clock_;
  OverloadLimiter limiter_;
  OverloadLimiter::Refusal why_;  // of the last refusal by Admit()
  OverloadLimiter::Snapshot s() const { return limiter_.snapshot(); }
};

// One instance, no batching, S = 20 ms: T = 10 ms; the normal bound is 8 T = 80 ms.
TEST(OverloadLimiterTest, PredictsTheWaitFromTheRunInProgressAndTheQueue) {
  Driver d;
  d.Measure(1, milliseconds(20));
  EXPECT_EQ(d.s().median_service, milliseconds(20));
  EXPECT_EQ(d.s().target, milliseconds(10));
  EXPECT_EQ(d.s().limit, 4096);
  EXPECT_FALSE(d.s().overloaded);
  // Idle: no wait.
  ASSERT_TRUE(d.Admit());
  d.Start(0, 1);
  // 20 ms left of the run: admitted (normal mode); then 40, 60 and 80 ms: within 8 T.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(d.Admit()) << i;
  // 100 ms: refused, and the message says why.
  EXPECT_FALSE(d.limiter_.WouldAdmit(d.clock_.Now()));
  EXPECT_FALSE(d.Admit());
  EXPECT_EQ(d.Message(),
            "model 'm' is overloaded: predicted queue delay 100 ms over its 10 ms target "
            "(burst allowance 8x)");
  // 15 ms later the run in progress has 5 ms left: 85 ms, still over.
  d.clock_.Advance(milliseconds(15));
  EXPECT_FALSE(d.Admit());
  // Past its expected end the run counts as about to finish: 80 ms again.
  d.clock_.Advance(milliseconds(10));
  EXPECT_TRUE(d.Admit());
  EXPECT_EQ(d.s().in_flight, 6);
}

// The autoscaling gauge's figure: the same prediction as admission's, whether or not a newcomer
// would be admitted, taking nothing; 0 while an instance is idle, before any measurement, and
// when off.
TEST(OverloadLimiterTest, PredictedWaitIsAdmissionsPredictionForTheNextArrival) {
  Driver d;
  EXPECT_EQ(d.limiter_.PredictedWait(d.clock_.Now()), nanoseconds(0));  // nothing measured
  d.Measure(1, milliseconds(20));
  EXPECT_EQ(d.limiter_.PredictedWait(d.clock_.Now()), nanoseconds(0));  // idle
  ASSERT_TRUE(d.Admit());
  d.Start(0, 1);
  EXPECT_EQ(d.limiter_.PredictedWait(d.clock_.Now()), milliseconds(20));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(d.Admit());
  EXPECT_EQ(d.limiter_.PredictedWait(d.clock_.Now()), milliseconds(100));  // over the bound
  EXPECT_EQ(d.s().in_flight, 5);                                           // taken nothing
  EXPECT_FALSE(d.Admit());
  EXPECT_EQ(d.s().predicted_wait, milliseconds(100));  // what the refusal said
  d.clock_.Advance(milliseconds(15));
  EXPECT_EQ(d.limiter_.PredictedWait(d.clock_.Now()), milliseconds(85));

  FakeClock clock;
  OverloadLimiter::Options off;
  off.enabled = false;
  OverloadLimiter disabled(off, clock.Now());
  EXPECT_EQ(disabled.PredictedWait(clock.Now()), nanoseconds(0));
}

// A standing queue with busy instances switches to shedding: the bound becomes T itself, so a
// newcomer is admitted only behind the second half of the run in progress.
TEST(OverloadLimiterTest, ShedsToTheTargetOnAStandingQueue) {
  Driver d;
  d.Saturate(milliseconds(20), milliseconds(30), milliseconds(200));  // q 30 ms > T, busy 100%
  ASSERT_TRUE(d.s().overloaded);
  EXPECT_EQ(d.s().queue_delay, milliseconds(30));
  EXPECT_GE(d.s().utilization, 0.99);
  ASSERT_TRUE(d.Admit());
  d.Start(0, 1);
  d.clock_.Advance(milliseconds(9));
  EXPECT_FALSE(d.Admit());  // 11 ms left
  EXPECT_EQ(d.Message(),
            "model 'm' is overloaded: predicted queue delay 11 ms over its 10 ms target");
  d.clock_.Advance(milliseconds(1));
  EXPECT_TRUE(d.Admit());   // 10 ms left
  EXPECT_FALSE(d.Admit());  // 10 + 20 ms
  d.clock_.Advance(milliseconds(10));
  d.Finish(0, 1, milliseconds(20));
  // Between runs: the queued request is about to take the idle instance for 20 ms.
  EXPECT_FALSE(d.Admit());
  EXPECT_EQ(d.s().in_flight, 1);
}

// A burst (short queue delays, or idle instances) does not switch to shedding.
TEST(OverloadLimiterTest, NoSheddingWithoutAStandingQueue) {
  {
    Driver d;  // busy, but the luckiest request waited only 5 ms (< T = 10 ms)
    d.Saturate(milliseconds(20), milliseconds(5), milliseconds(300));
    EXPECT_FALSE(d.s().overloaded);
  }
  {
    Driver d;  // long waits, but the instance was idle half the time
    for (int i = 0; i < 10; ++i) {
      d.Measure(1, milliseconds(20), milliseconds(30));
      d.clock_.Advance(milliseconds(20));
    }
    EXPECT_FALSE(d.s().overloaded);
    EXPECT_LT(d.s().utilization, 0.6);
  }
}

TEST(OverloadLimiterTest, SheddingStopsWhenTheInstancesIdle) {
  Driver d;
  d.Saturate(milliseconds(20), milliseconds(30), milliseconds(200));
  ASSERT_TRUE(d.s().overloaded);
  // Busy two thirds of the time: the excess is gone. One such window is not enough...
  auto idle_a_third = [&d] {
    for (int j = 0; j < 3; ++j) d.Measure(1, milliseconds(20));
    d.clock_.Advance(milliseconds(30));
  };
  const uint64_t windows = d.s().adjustments;
  while (d.s().adjustments == windows) idle_a_third();
  EXPECT_LT(d.s().utilization, 0.8);
  EXPECT_TRUE(d.s().overloaded);
  // ...two in a row are.
  while (d.s().adjustments == windows + 1) idle_a_third();
  EXPECT_FALSE(d.s().overloaded);
}

// With an idle instance a newcomer waits for nothing, whatever the others hold; with all of
// them busy it waits for the instance that will be free for it.
TEST(OverloadLimiterTest, AnIdleInstanceAdmits) {
  OverloadLimiter::Options o;
  o.instance_count = 2;
  o.target_queue_delay = milliseconds(5);  // the normal bound: 40 ms
  Driver d(o);
  d.Measure(1, milliseconds(20));
  ASSERT_TRUE(d.Admit());
  d.Start(0, 1);
  EXPECT_TRUE(d.Admit());  // instance 1 is idle
  d.Start(1, 1);
  // Both busy for 20 ms: the first queued request waits 20 ms, and so does the second; the
  // next two wait for a second run on each (40 ms); the fifth for a third (60 ms): refused.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(d.Admit()) << i;
  EXPECT_FALSE(d.Admit());
  EXPECT_EQ(d.s().predicted_wait, milliseconds(60));
}

// With batching a newcomer joins the partly filled batch at the head of the queue: it waits
// for the run in progress, plus one S(B) per full batch ahead of it.
TEST(OverloadLimiterTest, BatchingCountsFullBatchesAhead) {
  OverloadLimiter::Options o;
  o.requests_per_run = 4;
  Driver d(o);
  d.Measure(1, milliseconds(20));  // T = 10 ms, bound 40 ms
  d.Measure(4, milliseconds(60));
  EXPECT_EQ(d.s().target, milliseconds(10));  // from S(1), not S(4)
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(d.Admit()) << i;
  d.Start(0, 4);
  d.clock_.Advance(milliseconds(30));  // 30 ms left
  // Four requests join the next batch (30 ms); a fifth would wait 30 + 60 ms.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(d.Admit()) << i;
  EXPECT_FALSE(d.Admit());
  EXPECT_EQ(d.s().predicted_wait, milliseconds(90));
}

// A batch size never measured is estimated from the nearest measured one, scaled linearly.
TEST(OverloadLimiterTest, UnmeasuredBatchSizesScaleFromMeasuredOnes) {
  OverloadLimiter::Options o;
  o.requests_per_run = 8;
  Driver d(o);
  d.Measure(2, milliseconds(30));
  // S(1) is estimated as 15 ms: T = 7.5 ms.
  EXPECT_EQ(d.s().median_service, milliseconds(15));
  EXPECT_EQ(d.s().target, microseconds(7500));
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(d.Admit());
  d.Start(0, 8);  // expected 8 × 15 = 120 ms: more than 8 T, so the next one is refused
  EXPECT_FALSE(d.Admit());
  EXPECT_EQ(d.s().predicted_wait, milliseconds(120));
}

TEST(OverloadLimiterTest, MaxLimitCapsTheHeldCount) {
  OverloadLimiter::Options o;
  o.max_limit = 3;
  o.instance_count = 4;  // never below the instances
  Driver d(o);
  d.Measure(1, microseconds(10));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(d.Admit()) << i;
  EXPECT_FALSE(d.Admit());
  EXPECT_EQ(d.Message(), "model 'm' is at its concurrency limit of 4 (queue delay target 1.0 ms)");
}

TEST(OverloadLimiterTest, AConfiguredTargetIsUsed) {
  OverloadLimiter::Options o;
  o.target_queue_delay = milliseconds(5);
  Driver d(o);
  EXPECT_EQ(d.s().target, milliseconds(5));
  d.Saturate(milliseconds(20), milliseconds(6), milliseconds(200));
  EXPECT_TRUE(d.s().overloaded);  // 6 ms over a 5 ms target
  EXPECT_EQ(d.s().target, milliseconds(5));
  ASSERT_TRUE(d.Admit());
  d.Start(0, 1);
  d.clock_.Advance(milliseconds(14));
  EXPECT_FALSE(d.Admit());  // 6 ms left
  d.clock_.Advance(milliseconds(1));
  EXPECT_TRUE(d.Admit());
}

// A slow model's window spans at least four batch-1 service times.
TEST(OverloadLimiterTest, WindowStretchesForSlowModels) {
  Driver d;
  d.Measure(1, seconds(1), seconds(5));  // closes the first (100 ms) window
  const uint64_t after_first = d.s().adjustments;
  EXPECT_EQ(after_first, 1u);
  for (int i = 0; i < 3; ++i) d.Measure(1, seconds(1), seconds(5));
  EXPECT_EQ(d.s().adjustments, after_first);  // 3 s < 4 × 1 s
  d.Measure(1, seconds(1), seconds(5));
  EXPECT_EQ(d.s().adjustments, after_first + 1);
  EXPECT_TRUE(d.s().overloaded);
}

// Threads admitting, running and completing at once: no slot is lost or counted twice.
TEST(OverloadLimiterTest, ConcurrentSmoke) {
  FakeClock clock;
  OverloadLimiter::Options o;
  o.instance_count = 4;
  OverloadLimiter limiter(o, clock.Now());
  std::atomic<int> admitted{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20'000; ++i) {
        if (t == 0) clock.Advance(microseconds(50));  // 1 s in all: about ten windows
        if (!limiter.TryAcquire(clock.Now())) {
          refused++;
          continue;
        }
        admitted++;
        const LimiterRun run{static_cast<size_t>(t), 1, 1};
        limiter.RunStarted(run, clock.Now());
        limiter.RunFinished(run, microseconds(100), microseconds(100));
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
  EXPECT_GT(s.adjustments, 1u);
  EXPECT_GT(s.median_service.count(), 0);
}

}  // namespace
}  // namespace harrier
