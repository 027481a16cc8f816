#include "routing/weighted_split.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace harrier {
namespace {

constexpr int kKeys = 100'000;

// Keys as a caller makes them: random per request, or HashKey of a header value.
uint64_t RandomKey(int i) {
  return Mix64(static_cast<uint64_t>(i) * 0x2545f4914f6cdd1dULL);
}

std::map<int64_t, double> Shares(const WeightedSplit& split) {
  std::map<int64_t, int> counts;
  for (int i = 0; i < kKeys; ++i) ++counts[split.Pick(RandomKey(i))];
  std::map<int64_t, double> shares;
  for (const auto& [v, n] : counts) shares[v] = static_cast<double>(n) / kKeys;
  return shares;
}

TEST(WeightedSplitTest, SharesFollowTheWeightsWithinOnePercent) {
  const VersionWeights tables[] = {
      {{1, 90}, {2, 10}},
      {{1, 1}, {2, 99}},
      {{1, 50}, {2, 30}, {3, 20}},
      {{1, 1}, {2, 1}, {3, 1}},
      {{7, 5}},
      {{1, 70}, {2, 0}, {3, 30}},  // weight 0: never picked
      {{1, 9000}, {2, 1000}},      // only the ratio matters
  };
  for (const VersionWeights& weights : tables) {
    double sum = 0;
    for (const auto& [v, w] : weights) sum += static_cast<double>(w);
    SCOPED_TRACE(::testing::PrintToString(weights));
    const WeightedSplit split(weights);
    const std::map<int64_t, double> shares = Shares(split);
    for (const auto& [v, w] : weights) {
      const double want = static_cast<double>(w) / sum;
      const double got = shares.count(v) ? shares.at(v) : 0.0;
      EXPECT_NEAR(got, want, 0.01) << "version " << v;
      if (w == 0) {
        EXPECT_EQ(got, 0.0) << "version " << v;
      }
    }
  }
}

TEST(WeightedSplitTest, SameKeySameVersion) {
  const WeightedSplit split({{1, 50}, {2, 50}});
  for (int i = 0; i < 1000; ++i) {
    const uint64_t key = HashKey("user-" + std::to_string(i));
    EXPECT_EQ(split.Pick(key), split.Pick(key));
    EXPECT_EQ(WeightedSplit({{2, 50}, {1, 50}}).Pick(key), split.Pick(key));
  }
}

TEST(WeightedSplitTest, WeightChangeMovesFewKeysAndOnlyToTheVersionThatGained) {
  const WeightedSplit before({{1, 90}, {2, 10}});
  const WeightedSplit after({{1, 80}, {2, 20}});
  int moved_1_to_2 = 0, moved_2_to_1 = 0;
  for (int i = 0; i < kKeys; ++i) {
    const int64_t a = before.Pick(RandomKey(i)), b = after.Pick(RandomKey(i));
    if (a == 1 && b == 2) ++moved_1_to_2;
    if (a == 2 && b == 1) ++moved_2_to_1;
  }
  EXPECT_EQ(moved_2_to_1, 0);
  // The least that can move is the 10% of the keys version 2 gained.
  EXPECT_NEAR(static_cast<double>(moved_1_to_2) / kKeys, 0.10, 0.01);
}

TEST(WeightedSplitTest, AddingAVersionOnlyMovesKeysToIt) {
  const WeightedSplit before({{1, 60}, {2, 40}});
  const WeightedSplit after({{1, 60}, {2, 40}, {3, 25}});  // version 3 takes 25/125 = 20%
  int moved = 0;
  for (int i = 0; i < kKeys; ++i) {
    const int64_t a = before.Pick(RandomKey(i)), b = after.Pick(RandomKey(i));
    if (a == b) continue;
    ASSERT_EQ(b, 3) << "key " << i << " moved from " << a << " to " << b;
    ++moved;
  }
  EXPECT_NEAR(static_cast<double>(moved) / kKeys, 0.20, 0.01);
}

TEST(WeightedSplitTest, RemovingAVersionOnlyMovesItsKeysInProportion) {
  const WeightedSplit before({{1, 50}, {2, 30}, {3, 20}});
  const WeightedSplit after({{1, 50}, {2, 30}, {3, 0}});
  std::map<int64_t, int> went_to;
  int from_3 = 0;
  for (int i = 0; i < kKeys; ++i) {
    const int64_t a = before.Pick(RandomKey(i)), b = after.Pick(RandomKey(i));
    if (a != 3) {
      ASSERT_EQ(a, b) << "key " << i;
      continue;
    }
    ++from_3;
    ++went_to[b];
  }
  // Version 3's keys are shared 50:30 between the others.
  EXPECT_NEAR(static_cast<double>(went_to[1]) / from_3, 50.0 / 80, 0.02);
  EXPECT_NEAR(static_cast<double>(went_to[2]) / from_3, 30.0 / 80, 0.02);
}

TEST(WeightedSplitTest, RankStartsWithPickAndSkippingIsTheRenormalisedSplit) {
  const WeightedSplit split({{1, 50}, {2, 30}, {3, 20}, {4, 0}});
  const WeightedSplit without_1({{2, 30}, {3, 20}});
  std::vector<int64_t> ranked;
  for (int i = 0; i < kKeys; ++i) {
    split.Rank(RandomKey(i), &ranked);
    ASSERT_EQ(ranked.size(), 3u);  // weight 0 is not ranked
    EXPECT_EQ(ranked[0], split.Pick(RandomKey(i)));
    EXPECT_EQ(std::set<int64_t>(ranked.begin(), ranked.end()), (std::set<int64_t>{1, 2, 3}));
    // Skipping version 1 (an open breaker) = the split without it, key by key.
    const int64_t first_not_1 = ranked[0] != 1 ? ranked[0] : ranked[1];
    ASSERT_EQ(first_not_1, without_1.Pick(RandomKey(i))) << "key " << i;
  }
}

TEST(WeightedSplitTest, EmptyWhenNoWeightIsPositive) {
  EXPECT_TRUE(WeightedSplit(VersionWeights{}).empty());
  EXPECT_TRUE(WeightedSplit(VersionWeights{{1, 0}}).empty());
  const WeightedSplit split({{1, 0}, {2, 3}});
  EXPECT_FALSE(split.empty());
  EXPECT_EQ(split.weights(), (VersionWeights{{2, 3}}));
}

// Sticky clients keep their version across restarts and releases only if these never change.
TEST(HashKeyTest, IsStable) {
  EXPECT_EQ(Mix64(0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(HashKey(""), Mix64(0xcbf29ce484222325ULL));
  EXPECT_EQ(HashKey("user-42"), 0xe28ba372823de243ULL);  // also computed outside Harrier
  EXPECT_NE(HashKey("user-42"), HashKey("user-43"));
  const WeightedSplit split({{1, 50}, {2, 50}});
  // Pinned picks: a change of hash or score function shows up here.
  std::string picks;
  for (int i = 0; i < 16; ++i)
    picks += std::to_string(split.Pick(HashKey("u" + std::to_string(i))));
  EXPECT_EQ(picks, "1212221222112212");
}

TEST(HashKeyTest, SimilarValuesSpreadEvenly) {
  // Sequential ids are what sticky headers often carry.
  const WeightedSplit split({{1, 50}, {2, 50}});
  int ones = 0;
  for (int i = 0; i < kKeys; ++i) ones += split.Pick(HashKey("session-" + std::to_string(i))) == 1;
  EXPECT_NEAR(static_cast<double>(ones) / kKeys, 0.5, 0.01);
}

}  // namespace
}  // namespace harrier
