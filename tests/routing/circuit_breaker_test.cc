#include "routing/circuit_breaker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "util/fake_clock.h"

namespace harrier {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;
using State = CircuitBreaker::State;

BreakerConfig Config(int64_t threshold, std::optional<double> rate = std::nullopt) {
  BreakerConfig c;
  c.failure_threshold = threshold;
  c.failure_rate = rate;
  c.min_requests = 10;
  c.window_seconds = 10;
  c.open_seconds = 30;
  c.half_open_probes = 2;
  return c;
}

enum class Op { kAllow, kOk, kFail };

struct Event {
  Clock::duration advance;  // first, then
  Op op;
  int times;
  bool allowed;  // kAllow: the answer expected every time
  State state;   // afterwards
};

void Replay(CircuitBreaker& b, FakeClock& clock, const std::vector<Event>& events) {
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    SCOPED_TRACE(::testing::Message() << "event " << i);
    clock.Advance(e.advance);
    for (int n = 0; n < e.times; ++n) {
      if (e.op == Op::kAllow) {
        EXPECT_EQ(b.Allow(clock.Now()), e.allowed) << "call " << n;
      } else {
        b.Record(clock.Now(), e.op == Op::kFail);
      }
    }
    EXPECT_EQ(BreakerStateName(b.state(clock.Now())), std::string(BreakerStateName(e.state)));
  }
}

TEST(CircuitBreakerTest, OpensAtTheFailureCountThenProbes) {
  FakeClock clock;
  CircuitBreaker b(Config(5));
  Replay(b, clock,
         {
             {0s, Op::kAllow, 3, true, State::kClosed},
             {0s, Op::kOk, 100, false, State::kClosed},  // successes never open it
             {0s, Op::kFail, 4, false, State::kClosed},
             {1s, Op::kFail, 1, false, State::kOpen},  // the 5th in 10 s
             {0s, Op::kAllow, 3, false, State::kOpen},
             {0s, Op::kOk, 1, false, State::kOpen},         // ignored while open
             {29s, Op::kAllow, 1, false, State::kOpen},     // 29 s of 30
             {1s, Op::kAllow, 2, true, State::kHalfOpen},   // two probes
             {0s, Op::kAllow, 1, false, State::kHalfOpen},  // no third
             {1s, Op::kOk, 1, false, State::kClosed},       // a probe succeeded
             {0s, Op::kAllow, 5, true, State::kClosed},
             // The window started empty again: 4 failures do not open it.
             {0s, Op::kFail, 4, false, State::kClosed},
         });
  EXPECT_EQ(b.times_opened(), 1);
}

// probe12 F10: the version's instance was replaced. Open, half-open or closed with failures
// counted: closed with an empty window; times_opened() stays.
TEST(CircuitBreakerTest, ResetClosesWithAnEmptyWindow) {
  FakeClock clock;
  CircuitBreaker b(Config(3));
  Replay(b, clock, {{0s, Op::kFail, 3, false, State::kOpen}});
  b.Reset();
  Replay(b, clock,
         {
             {0s, Op::kAllow, 5, true, State::kClosed},
             {0s, Op::kFail, 2, false, State::kClosed},  // 2 of 3
         });
  b.Reset();
  Replay(b, clock,
         {
             {0s, Op::kFail, 2, false, State::kClosed},  // 2 of 3 again, not 4
             {0s, Op::kFail, 1, false, State::kOpen},
             {30s, Op::kAllow, 2, true, State::kHalfOpen},
             {0s, Op::kAllow, 1, false, State::kHalfOpen},
         });
  b.Reset();
  Replay(b, clock, {{0s, Op::kAllow, 5, true, State::kClosed}});
  EXPECT_EQ(b.times_opened(), 2);
}

TEST(CircuitBreakerTest, FailuresOutsideTheWindowDoNotCount) {
  FakeClock clock;
  CircuitBreaker b(Config(5));
  Replay(b, clock,
         {
             {0s, Op::kFail, 4, false, State::kClosed},
             {10s, Op::kFail, 4, false, State::kClosed},  // the first 4 have left the window
             {9s, Op::kFail, 1, false, State::kOpen},     // 4 + 1 within 10 s
         });
}

TEST(CircuitBreakerTest, AFailedProbeReopens) {
  FakeClock clock;
  CircuitBreaker b(Config(1));
  Replay(b, clock,
         {
             {0s, Op::kFail, 1, false, State::kOpen},
             {30s, Op::kAllow, 1, true, State::kHalfOpen},
             {2s, Op::kFail, 1, false, State::kOpen},  // open again, for 30 s from now
             {29s, Op::kAllow, 1, false, State::kOpen},
             {1s, Op::kAllow, 1, true, State::kHalfOpen},
         });
  EXPECT_EQ(b.times_opened(), 2);
}

TEST(CircuitBreakerTest, OpensAtTheFailureRateOnceThereAreEnoughRequests) {
  FakeClock clock;
  CircuitBreaker b(Config(0, 0.5));  // rate only
  Replay(b, clock,
         {
             {0s, Op::kFail, 9, false, State::kClosed},  // 9 of 9, but under min_requests 10
             {1s, Op::kFail, 1, false, State::kOpen},    // 10 of 10
         });
}

TEST(CircuitBreakerTest, RateCountsFailuresAgainstAllRequestsInTheWindow) {
  FakeClock clock;
  CircuitBreaker b(Config(0, 0.5));
  Replay(b, clock,
         {
             {0s, Op::kOk, 6, false, State::kClosed},
             {0s, Op::kFail, 5, false, State::kClosed},  // 5 of 11 < 50%
             {0s, Op::kFail, 1, false, State::kOpen},    // 6 of 12 = 50%
         });
}

TEST(CircuitBreakerTest, LostProbesDoNotWedgeIt) {
  FakeClock clock;
  CircuitBreaker b(Config(1));
  Replay(b, clock,
         {
             {0s, Op::kFail, 1, false, State::kOpen},
             {30s, Op::kAllow, 2, true, State::kHalfOpen},
             {29s, Op::kAllow, 1, false, State::kHalfOpen},  // the probes' results are awaited
             {1s, Op::kAllow, 2, true, State::kHalfOpen},    // 30 s without news: new probes
         });
}

TEST(CircuitBreakerTest, RetryAfterSaysWhenAProbeIsFree) {
  FakeClock clock;
  CircuitBreaker b(Config(1));
  EXPECT_EQ(b.RetryAfter(clock.Now()), Clock::duration::zero());
  b.Record(clock.Now(), true);
  EXPECT_EQ(b.RetryAfter(clock.Now()), 30s);
  clock.Advance(12s);
  EXPECT_EQ(b.RetryAfter(clock.Now()), 18s);
  clock.Advance(18s);
  EXPECT_EQ(b.RetryAfter(clock.Now()), Clock::duration::zero());  // half-open, probes free
  EXPECT_TRUE(b.Allow(clock.Now()));
  EXPECT_EQ(b.RetryAfter(clock.Now()), Clock::duration::zero());  // one probe left
  EXPECT_TRUE(b.Allow(clock.Now()));
  clock.Advance(5s);
  EXPECT_EQ(b.RetryAfter(clock.Now()), 25s);  // both out: until they are presumed lost
}

TEST(CircuitBreakerTest, HalfOpenLetsOnlyTheProbesThroughAcrossThreads) {
  FakeClock clock;
  BreakerConfig config = Config(1);
  config.half_open_probes = 3;
  CircuitBreaker b(config);
  b.Record(clock.Now(), true);
  clock.Advance(30s);
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) allowed += b.Allow(clock.Now());
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(allowed.load(), 3);
}

}  // namespace
}  // namespace harrier
