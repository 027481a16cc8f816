#include "routing/traffic_router.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "routing/rollout.h"
#include "util/fake_clock.h"

namespace harrier {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;

constexpr int kRequests = 100'000;

std::unique_ptr<TrafficRouter> MakeRouter(std::string_view json, std::vector<int64_t> available) {
  auto policy = ParseTrafficPolicy(json);
  EXPECT_TRUE(policy.ok()) << policy.status().ToString();
  auto router = TrafficRouter::Create(*policy, std::move(available));
  EXPECT_TRUE(router.ok()) << router.status().ToString();
  return router.ok() ? std::move(router).value() : nullptr;
}

RouteRequest Random(std::mt19937_64& random) {
  RouteRequest r;
  r.random = random();
  return r;
}

// Shares of the primary version over kRequests random requests, in percent.
std::map<int64_t, double> Shares(TrafficRouter& router, Clock::time_point now) {
  std::mt19937_64 random(1);
  std::map<int64_t, int> counts;
  for (int i = 0; i < kRequests; ++i) {
    auto d = router.Route(Random(random), now);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    if (d.ok()) ++counts[d->version];
  }
  std::map<int64_t, double> shares;
  for (const auto& [v, n] : counts) shares[v] = 100.0 * n / kRequests;
  return shares;
}

TEST(TrafficRouterTest, CreateChecksThePolicyAgainstTheServedVersions) {
  auto policy = ParseTrafficPolicy(R"({"weights": {"1": 90, "2": 10}})");
  ASSERT_TRUE(policy.ok());
  auto router = TrafficRouter::Create(*policy, {1});
  ASSERT_FALSE(router.ok());
  EXPECT_EQ(router.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(router.status().message().find("weights.2: version 2 is not served"),
            std::string::npos);
}

TEST(TrafficRouterTest, SplitsByWeight) {
  FakeClock clock;
  auto router = MakeRouter(R"({"weights": {"1": 90, "2": 10}})", {1, 2, 3});
  const auto shares = Shares(*router, clock.Now());
  EXPECT_NEAR(shares.at(1), 90, 1);
  EXPECT_NEAR(shares.at(2), 10, 1);
  EXPECT_EQ(shares.count(3), 0u);  // served, but no weight
}

TEST(TrafficRouterTest, StickyKeyKeepsItsVersionWhateverTheRandom) {
  FakeClock clock;
  auto router = MakeRouter(R"({"weights": {"1": 50, "2": 50}, "sticky_header": "x-user"})", {1, 2});
  std::mt19937_64 random(2);
  std::map<int64_t, int> users_per_version;
  for (int user = 0; user < 1000; ++user) {
    RouteRequest r;
    r.sticky_key = HashKey("user-" + std::to_string(user));
    r.random = random();
    const int64_t first = router->Route(r, clock.Now())->version;
    ++users_per_version[first];
    for (int again = 0; again < 5; ++again) {
      r.random = random();
      ASSERT_EQ(router->Route(r, clock.Now())->version, first) << "user " << user;
    }
  }
  EXPECT_NEAR(users_per_version[1], 500, 60);
}

TEST(TrafficRouterTest, ForcedVersionBypassesTheSplitAndTheShadow) {
  FakeClock clock;
  auto router =
      MakeRouter(R"({"weights": {"1": 100}, "shadow": {"version": 3, "percent": 100}})", {1, 2, 3});
  RouteRequest r;
  r.forced_version = 2;
  auto d = router->Route(r, clock.Now());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->version, 2);
  EXPECT_TRUE(d->forced);
  EXPECT_FALSE(d->shadow_version.has_value());

  r.forced_version = 7;
  d = router->Route(r, clock.Now());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(d.status().message(), "version 7 of the model is not served");

  r.forced_version.reset();
  d = router->Route(r, clock.Now());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->version, 1);
  EXPECT_FALSE(d->forced);
  EXPECT_EQ(d->shadow_version, 3);
}

TEST(TrafficRouterTest, ShadowsThePercentButNeverTheChosenVersion) {
  FakeClock clock;
  auto router = MakeRouter(
      R"({"weights": {"1": 50, "2": 50}, "shadow": {"version": 2, "percent": 10}})", {1, 2});
  std::mt19937_64 random(3);
  int to_1 = 0, shadowed_1 = 0;
  for (int i = 0; i < kRequests; ++i) {
    auto d = router->Route(Random(random), clock.Now());
    ASSERT_TRUE(d.ok());
    if (d->version == 2) {
      ASSERT_FALSE(d->shadow_version.has_value());  // already its answer
    } else {
      ++to_1;
      if (d->shadow_version) {
        EXPECT_EQ(*d->shadow_version, 2);
        ++shadowed_1;
      }
    }
  }
  EXPECT_NEAR(100.0 * shadowed_1 / to_1, 10, 1);
}

TEST(TrafficRouterTest, OpenBreakerSkipsTheVersionAndRenormalises) {
  FakeClock clock;
  auto router =
      MakeRouter(R"({"weights": {"1": 50, "2": 30, "3": 20}, "breaker": {"failure_threshold": 3}})",
                 {1, 2, 3});
  // Which version each request goes to while every breaker is closed.
  std::vector<int64_t> before;
  {
    std::mt19937_64 random(1);
    for (int i = 0; i < kRequests; ++i)
      before.push_back(router->Route(Random(random), clock.Now())->version);
  }
  for (int i = 0; i < 3; ++i) router->RecordResult(2, clock.Now(), /*failure=*/true);
  ASSERT_EQ(router->breaker(2)->state(clock.Now()), CircuitBreaker::State::kOpen);

  std::mt19937_64 random(1);
  std::map<int64_t, int> counts;
  for (int i = 0; i < kRequests; ++i) {
    const int64_t v = router->Route(Random(random), clock.Now())->version;
    ++counts[v];
    // Only version 2's requests move.
    if (before[i] != 2) {
      ASSERT_EQ(v, before[i]) << "request " << i;
    }
  }
  EXPECT_EQ(counts.count(2), 0u);
  EXPECT_NEAR(100.0 * counts[1] / kRequests, 100.0 * 50 / 70, 1);
  EXPECT_NEAR(100.0 * counts[3] / kRequests, 100.0 * 20 / 70, 1);

  // After open_seconds (30) version 2 gets its one probe, then is refused again until it reports.
  clock.Advance(30s);
  std::map<int64_t, int> half_open;
  for (int i = 0; i < 1000; ++i) ++half_open[router->Route(Random(random), clock.Now())->version];
  EXPECT_EQ(half_open[2], 1);
  router->RecordResult(2, clock.Now(), /*failure=*/false);  // the probe succeeded: closed
  const auto shares = Shares(*router, clock.Now());
  EXPECT_NEAR(shares.at(2), 30, 1);
}

// Breakers move traffic between versions; they never take the model out of service. One
// client's inputs that fail on every version opened them all, and then every client got 503
// (probe 38). With every version with traffic refusing, the split routes as if none did (a
// panic, as Envoy's below its panic threshold), forced versions included.
TEST(TrafficRouterTest, EveryBreakerOpenIsAPanicThatRoutesByTheWeights) {
  FakeClock clock;
  auto router = MakeRouter(
      R"({"weights": {"1": 1, "2": 1}, "breaker": {"failure_threshold": 1, "open_seconds": 20}})",
      {1, 2, 3});
  router->RecordResult(1, clock.Now(), true);
  // One version open: the other takes its traffic, and a request forced to it is refused.
  Clock::duration retry_after{};
  RouteRequest r;
  for (uint64_t random = 0; random < 100; ++random) {
    r.random = random * 0x9e3779b97f4a7c15ull;
    auto d = router->Route(r, clock.Now(), &retry_after);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->version, 2);
    EXPECT_FALSE(d->panic);
  }
  r.forced_version = 1;
  auto d = router->Route(r, clock.Now(), &retry_after);
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(retry_after, 20s);
  EXPECT_EQ(d.status().message(),
            "version 1 is failing and its circuit breaker is open; retry after 20 s");

  clock.Advance(5s);
  router->RecordResult(2, clock.Now(), true);
  clock.Advance(1s);
  // Both open: each request goes where the split would send it with no breaker.
  r.forced_version.reset();
  std::map<int64_t, int> counts;
  for (uint64_t random = 0; random < 1000; ++random) {
    r.random = random * 0x9e3779b97f4a7c15ull;
    d = router->Route(r, clock.Now(), &retry_after);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_TRUE(d->panic);
    ++counts[d->version];
  }
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_NEAR(counts[1], 500, 60);
  // Version 3 has no weight: it is not a fallback.
  EXPECT_EQ(counts.count(3), 0u);
  EXPECT_EQ(router->breaker(3)->state(clock.Now()), CircuitBreaker::State::kClosed);
  r.forced_version = 2;
  d = router->Route(r, clock.Now(), &retry_after);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->version, 2);
  EXPECT_TRUE(d->panic);
  EXPECT_TRUE(d->forced);

  // Version 1 half-opens (20 s after it opened): its probe goes to it, the rest to the panic.
  clock.Advance(14s);
  r.forced_version.reset();
  int probes = 0;
  for (uint64_t random = 0; random < 200; ++random) {
    r.random = random * 0x9e3779b97f4a7c15ull;
    d = router->Route(r, clock.Now());
    ASSERT_TRUE(d.ok());
    if (!d->panic) {
      ++probes;
      EXPECT_EQ(d->version, 1);
    }
  }
  EXPECT_EQ(probes, 1);
  router->RecordResult(1, clock.Now(), false);  // the probe succeeded: closed, the panic is over
  r.random = 12345;
  d = router->Route(r, clock.Now());
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->panic);
  EXPECT_EQ(d->version, 1);
}

TEST(TrafficRouterTest, NoShadowToAVersionWhoseBreakerIsOpen) {
  FakeClock clock;
  auto router = MakeRouter(
      R"({"weights": {"1": 1}, "shadow": {"version": 2, "percent": 100},
          "breaker": {"failure_threshold": 1}})",
      {1, 2});
  RouteRequest r;
  EXPECT_EQ(router->Route(r, clock.Now())->shadow_version, 2);
  router->RecordResult(2, clock.Now(), true);
  auto d = router->Route(r, clock.Now());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->version, 1);
  EXPECT_FALSE(d->shadow_version.has_value());
}

TEST(TrafficRouterTest, StartsAtTheRolloutsFirstStepAndTakesNewWeights) {
  FakeClock clock;
  auto router = MakeRouter(
      R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [10, 100],
          "dwell_seconds": 60}, "breaker": {"failure_threshold": 1}})",
      {1, 2});
  EXPECT_EQ(router->weights(), (VersionWeights{{1, 9000}, {2, 1000}}));
  EXPECT_NEAR(Shares(*router, clock.Now()).at(2), 10, 1);

  router->RecordResult(1, clock.Now(), true);  // breakers survive a weight change
  ASSERT_TRUE(router->SetWeights({{1, 1}, {2, 1}}).ok());
  EXPECT_EQ(router->weights(), (VersionWeights{{1, 1}, {2, 1}}));
  EXPECT_EQ(router->breaker(1)->state(clock.Now()), CircuitBreaker::State::kOpen);
  EXPECT_EQ(Shares(*router, clock.Now()).at(2), 100);

  EXPECT_EQ(router->SetWeights({{1, 0}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(router->SetWeights({{1, 1}, {4, 1}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(router->weights(), (VersionWeights{{1, 1}, {2, 1}}));  // unchanged
}

}  // namespace
}  // namespace harrier
