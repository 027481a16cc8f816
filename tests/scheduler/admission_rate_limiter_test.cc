#include <gtest/gtest.h>

#include <string>

#include "scheduler/rate_limiter.h"
#include "util/fake_clock.h"

namespace harrier {
namespace {

using std::chrono::milliseconds;
using testing::FakeClock;

TEST(ClientRateLimiterTest, ClientsHaveTheirOwnBuckets) {
  FakeClock clock;
  ClientRateLimiter limiter({{10, 2}, 100});
  EXPECT_TRUE(limiter.TryAcquire("a", clock.Now()));
  EXPECT_TRUE(limiter.TryAcquire("a", clock.Now()));
  Clock::duration wait{};
  EXPECT_FALSE(limiter.TryAcquire("a", clock.Now(), &wait));
  EXPECT_EQ(wait, milliseconds(100));
  // b is not held back by a.
  EXPECT_TRUE(limiter.TryAcquire("b", clock.Now()));
  EXPECT_TRUE(limiter.TryAcquire("b", clock.Now()));
  EXPECT_FALSE(limiter.TryAcquire("b", clock.Now()));
  // The empty key (anonymous) is a client like any other.
  EXPECT_TRUE(limiter.TryAcquire("", clock.Now()));
  clock.Advance(milliseconds(100));
  EXPECT_TRUE(limiter.TryAcquire("a", clock.Now()));
  EXPECT_FALSE(limiter.TryAcquire("a", clock.Now()));
  EXPECT_EQ(limiter.size(), 3u);
}

TEST(ClientRateLimiterTest, EvictsTheLeastRecentlySeenClient) {
  FakeClock clock;
  ClientRateLimiter limiter({{1, 1}, 2});
  ASSERT_TRUE(limiter.TryAcquire("a", clock.Now()));
  ASSERT_TRUE(limiter.TryAcquire("b", clock.Now()));
  EXPECT_FALSE(limiter.TryAcquire("a", clock.Now()));  // a is now the most recent
  EXPECT_TRUE(limiter.TryAcquire("c", clock.Now()));   // evicts b
  EXPECT_EQ(limiter.size(), 2u);
  EXPECT_EQ(limiter.evictions(), 1u);
  EXPECT_FALSE(limiter.TryAcquire("a", clock.Now()));  // a kept its (empty) bucket
  EXPECT_FALSE(limiter.TryAcquire("c", clock.Now()));
  // b comes back with a fresh, full bucket: the price of a bounded table.
  EXPECT_TRUE(limiter.TryAcquire("b", clock.Now()));
  EXPECT_EQ(limiter.evictions(), 2u);
}

// A flood of distinct client ids cannot grow the table past its bound.
TEST(ClientRateLimiterTest, FloodOfClientIdsStaysBounded) {
  FakeClock clock;
  constexpr size_t kMax = 4096;  // large enough for the sharded table
  ClientRateLimiter limiter({{5, 1}, kMax});
  for (int i = 0; i < 100'000; ++i) {
    EXPECT_TRUE(limiter.TryAcquire("client-" + std::to_string(i), clock.Now()));
  }
  EXPECT_LE(limiter.size(), kMax);
  EXPECT_GE(limiter.size(), kMax * 3 / 4);  // shards fill unevenly, but the table is used
  EXPECT_EQ(limiter.evictions(), 100'000 - limiter.size());
}

TEST(ClientRateLimiterTest, RefundReturnsAToken) {
  FakeClock clock;
  ClientRateLimiter limiter({{1, 1}, 10});
  ASSERT_TRUE(limiter.TryAcquire("a", clock.Now()));
  ASSERT_FALSE(limiter.TryAcquire("a", clock.Now()));
  limiter.Refund("a");
  EXPECT_TRUE(limiter.TryAcquire("a", clock.Now()));
  limiter.Refund("never-seen");  // no-op
  EXPECT_EQ(limiter.size(), 1u);
}

}  // namespace
}  // namespace harrier
