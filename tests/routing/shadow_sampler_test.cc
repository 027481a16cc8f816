#include "routing/shadow_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "routing/weighted_split.h"

namespace harrier {
namespace {

constexpr int kDraws = 100'000;

TEST(ShadowSamplerTest, SamplesThePercentWithinOnePercent) {
  std::mt19937_64 random(12);
  for (double percent : {0.5, 1.0, 10.0, 33.3, 50.0, 90.0, 99.5}) {
    SCOPED_TRACE(percent);
    const ShadowSampler sampler(percent);
    int sampled = 0;
    for (int i = 0; i < kDraws; ++i) sampled += sampler.Sample(random());
    EXPECT_NEAR(100.0 * sampled / kDraws, percent, 1.0);
  }
}

TEST(ShadowSamplerTest, SequentialValuesAreMixed) {
  // A caller's counter rather than a random: still the right share.
  const ShadowSampler sampler(10);
  int sampled = 0;
  for (uint64_t i = 0; i < kDraws; ++i) sampled += sampler.Sample(i);
  EXPECT_NEAR(100.0 * sampled / kDraws, 10.0, 1.0);
}

TEST(ShadowSamplerTest, ZeroNeverAndHundredAlways) {
  const ShadowSampler never(0), always(100), below(-5), above(250),
      nan(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(below.percent(), 0);
  EXPECT_EQ(above.percent(), 100);
  EXPECT_EQ(nan.percent(), 0);
  std::mt19937_64 random(3);
  for (int i = 0; i < 10'000; ++i) {
    const uint64_t r = random();
    EXPECT_FALSE(never.Sample(r));
    EXPECT_FALSE(below.Sample(r));
    EXPECT_FALSE(nan.Sample(r));
    EXPECT_TRUE(always.Sample(r));
    EXPECT_TRUE(above.Sample(r));
  }
}

TEST(ShadowSamplerTest, JustUnderHundredSamplesEverythingWithoutOverflow) {
  // percent / 100 * 2^64 is within a rounding of 2^64, which a uint64_t cannot hold.
  const ShadowSampler sampler(std::nextafter(100.0, 0.0));
  EXPECT_LT(sampler.percent(), 100);
  std::mt19937_64 random(4);
  int sampled = 0;
  for (int i = 0; i < 10'000; ++i) sampled += sampler.Sample(random());
  EXPECT_EQ(sampled, 10'000);
}

TEST(ShadowSamplerTest, SameValueAsTheSplitDoesNotCorrelate) {
  // One per-request random feeds both the split and the sampler: the shadow share must be the
  // same among the requests of each version.
  const WeightedSplit split({{1, 50}, {2, 50}});
  const ShadowSampler sampler(20);
  std::mt19937_64 random(5);
  int per_version[3] = {}, sampled[3] = {};
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t r = random();
    const int64_t v = split.Pick(r);
    ++per_version[v];
    sampled[v] += sampler.Sample(r);
  }
  EXPECT_NEAR(100.0 * sampled[1] / per_version[1], 20.0, 1.0);
  EXPECT_NEAR(100.0 * sampled[2] / per_version[2], 20.0, 1.0);
}

TEST(ShadowSamplerTest, IsDeterministic) {
  const ShadowSampler a(25), b(25);
  for (uint64_t i = 0; i < 1000; ++i) EXPECT_EQ(a.Sample(i * 7919), b.Sample(i * 7919));
}

}  // namespace
}  // namespace harrier
