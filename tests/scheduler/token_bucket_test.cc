#include "scheduler/token_bucket.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "util/fake_clock.h"

namespace harrier {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using testing::FakeClock;

TEST(ParseRateLimitTest, AcceptsRateAndOptionalBurst) {
  struct Case {
    const char* text;
    double per_second;
    int64_t burst;
  };
  const Case cases[] = {
      {"50", 50, 50},    {"50:100", 50, 100}, {"0.5", 0.5, 1},
      {"0.5:3", 0.5, 3}, {"2.5", 2.5, 3},     {"1:1", 1, 1},
      {"0", 0, 0},       {"off", 0, 0},       {"1000000000", 1e9, 1'000'000'000},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    auto limit = ParseRateLimit(c.text);
    ASSERT_TRUE(limit.ok()) << limit.status().ToString();
    EXPECT_EQ(limit->per_second, c.per_second);
    EXPECT_EQ(limit->burst, c.burst);
    EXPECT_EQ(limit->enabled(), c.per_second > 0);
  }
}

TEST(ParseRateLimitTest, RejectsMalformed) {
  for (const char* text : {"", "-1", "abc", "5:0", "5:", ":5", "5:x", "5:-2", "1e10", "nan", "inf",
                           "0:5", "5:1.5", " 5", "5 ", "on"}) {
    SCOPED_TRACE(text);
    auto limit = ParseRateLimit(text);
    ASSERT_FALSE(limit.ok());
    EXPECT_EQ(limit.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(limit.status().message().find("RPS:BURST"), std::string::npos);
  }
}

TEST(RateLimitTest, ToStringShowsBurstOnlyWhenNotDefault) {
  EXPECT_EQ((RateLimit{50, 50}).ToString(), "50 req/s");
  EXPECT_EQ((RateLimit{50, 100}).ToString(), "50 req/s, burst 100");
  EXPECT_EQ((RateLimit{0.5, 1}).ToString(), "0.5 req/s");
  EXPECT_EQ(RateLimit{}.ToString(), "no limit");
}

// Burst tokens at once, then one per 1/rate; the refusal says how long to wait.
TEST(TokenBucketTest, BurstThenRate) {
  struct Case {
    double per_second;
    int64_t burst;
    nanoseconds interval;
  };
  const Case cases[] = {
      {1, 1, seconds(1)},   {10, 5, milliseconds(100)},     {1000, 1, milliseconds(1)},
      {0.5, 2, seconds(2)}, {1e6, 1000, nanoseconds(1000)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE((RateLimit{c.per_second, c.burst}).ToString());
    FakeClock clock;
    TokenBucket bucket({c.per_second, c.burst});
    EXPECT_TRUE(bucket.IsFull(clock.Now()));
    EXPECT_EQ(bucket.Available(clock.Now()), c.burst);
    for (int64_t i = 0; i < c.burst; ++i) EXPECT_TRUE(bucket.TryAcquire(clock.Now())) << i;
    Clock::duration wait{};
    EXPECT_FALSE(bucket.TryAcquire(clock.Now(), &wait));
    EXPECT_EQ(wait, c.interval);
    EXPECT_EQ(bucket.Available(clock.Now()), 0);
    // Just before the next token: still refused, and the wait shrinks accordingly.
    clock.Advance(c.interval - nanoseconds(1));
    EXPECT_FALSE(bucket.TryAcquire(clock.Now(), &wait));
    EXPECT_EQ(wait, nanoseconds(1));
    clock.Advance(nanoseconds(1));
    EXPECT_TRUE(bucket.TryAcquire(clock.Now()));
    EXPECT_FALSE(bucket.TryAcquire(clock.Now()));
  }
}

TEST(TokenBucketTest, IdleTimeRefillsNoMoreThanTheBurst) {
  FakeClock clock;
  TokenBucket bucket({10, 3});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(bucket.TryAcquire(clock.Now()));
  clock.Advance(seconds(3600));
  EXPECT_TRUE(bucket.IsFull(clock.Now()));
  EXPECT_EQ(bucket.Available(clock.Now()), 3);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bucket.TryAcquire(clock.Now()));
  EXPECT_FALSE(bucket.TryAcquire(clock.Now()));
}

TEST(TokenBucketTest, SteadyRateIsExact) {
  FakeClock clock;
  TokenBucket bucket({100, 1});
  int admitted = 0;
  // 10 s in 1 ms steps, trying 3 times per step: exactly 100/s after the first token.
  for (int step = 0; step < 10'000; ++step) {
    for (int i = 0; i < 3; ++i) admitted += bucket.TryAcquire(clock.Now()) ? 1 : 0;
    clock.Advance(milliseconds(1));
  }
  EXPECT_EQ(admitted, 1000);
}

TEST(TokenBucketTest, RefundGivesBackOneTokenButNeverOverTheBurst) {
  FakeClock clock;
  TokenBucket bucket({1, 2});
  ASSERT_TRUE(bucket.TryAcquire(clock.Now()));
  ASSERT_TRUE(bucket.TryAcquire(clock.Now()));
  ASSERT_FALSE(bucket.TryAcquire(clock.Now()));
  bucket.Refund();
  EXPECT_TRUE(bucket.TryAcquire(clock.Now()));
  EXPECT_FALSE(bucket.TryAcquire(clock.Now()));

  TokenBucket full({1, 2});
  full.Refund();
  full.Refund();
  EXPECT_EQ(full.Available(clock.Now()), 2);
  EXPECT_TRUE(full.TryAcquire(clock.Now()));
  EXPECT_TRUE(full.TryAcquire(clock.Now()));
  EXPECT_FALSE(full.TryAcquire(clock.Now()));
}

TEST(TokenBucketTest, ResetRefills) {
  FakeClock clock;
  TokenBucket bucket({1, 1});
  ASSERT_TRUE(bucket.TryAcquire(clock.Now()));
  EXPECT_FALSE(bucket.IsFull(clock.Now()));
  bucket.Reset();
  EXPECT_TRUE(bucket.IsFull(clock.Now()));
  EXPECT_TRUE(bucket.TryAcquire(clock.Now()));
}

// Threads racing for one bucket at a fixed time take exactly `burst` tokens.
TEST(TokenBucketTest, ConcurrentAcquireTakesExactlyTheBurst) {
  FakeClock clock;
  TokenBucket bucket({1, 5000});
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i)
        if (bucket.TryAcquire(clock.Now())) admitted++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 5000);
}

}  // namespace
}  // namespace harrier
