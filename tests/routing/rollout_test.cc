#include "routing/rollout.h"

#include <gtest/gtest.h>

#include <vector>

#include "routing/weighted_split.h"
#include "util/fake_clock.h"

namespace harrier {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;
using Outcome = GuardVerdict::Outcome;
using State = Rollout::State;

RolloutConfig Config(std::vector<double> steps, int64_t dwell_seconds = 300) {
  RolloutConfig c;
  c.candidate = 2;
  c.steps_percent = std::move(steps);
  c.dwell_seconds = dwell_seconds;
  return c;
}

GuardVerdict Verdict(Outcome outcome, std::string reason = "") {
  GuardVerdict v;
  v.outcome = outcome;
  v.reason = std::move(reason);
  return v;
}

// The candidate's share of a set of weights, in percent.
double CandidatePercent(const VersionWeights& w) {
  double sum = 0;
  for (const auto& [v, weight] : w) sum += static_cast<double>(weight);
  return 100.0 * static_cast<double>(w.at(2)) / sum;
}

TEST(RolloutTest, StepsThroughADwellAtATime) {
  FakeClock clock;
  const Clock::time_point t0 = clock.Now();
  Rollout r(Config({1, 10, 50, 100}), {{1, 1}}, t0);
  struct Step {
    Clock::duration advance;  // then Advance() with:
    Outcome verdict;
    bool changed;
    State state;
    size_t step;
    double candidate_percent;
    bool waiting_for_data;
  };
  const Step steps[] = {
      {0s, Outcome::kHolds, false, State::kRunning, 0, 1, false},
      {299s, Outcome::kHolds, false, State::kRunning, 0, 1, false},  // dwell not over
      {1s, Outcome::kHolds, true, State::kRunning, 1, 10, false},    // 300 s: next step
      {299s, Outcome::kInsufficientData, false, State::kRunning, 1, 10, false},
      {1s, Outcome::kInsufficientData, false, State::kRunning, 1, 10, true},  // extended
      {100s, Outcome::kInsufficientData, false, State::kRunning, 1, 10, true},
      {1s, Outcome::kHolds, true, State::kRunning, 2, 50, false},     // at 701 s
      {299s, Outcome::kHolds, false, State::kRunning, 2, 50, false},  // its dwell runs from 701 s
      {1s, Outcome::kHolds, true, State::kCompleted, 3, 100, false},  // the 100% step: done
      {1000s, Outcome::kBreached, false, State::kCompleted, 3, 100, false},  // final
  };
  for (size_t i = 0; i < std::size(steps); ++i) {
    const Step& s = steps[i];
    SCOPED_TRACE(::testing::Message() << "row " << i);
    clock.Advance(s.advance);
    EXPECT_EQ(r.Advance(clock.Now(), Verdict(s.verdict)), s.changed);
    EXPECT_EQ(RolloutStateName(r.state()), std::string(RolloutStateName(s.state)));
    EXPECT_EQ(r.step_index(), s.step);
    EXPECT_EQ(r.candidate_percent(), s.candidate_percent);
    EXPECT_NEAR(CandidatePercent(r.weights()), s.candidate_percent, 1e-9);
    EXPECT_EQ(r.waiting_for_data(), s.waiting_for_data);
  }
  EXPECT_EQ(r.step_started_at(), t0 + 1001s);
  EXPECT_FALSE(r.last_rollback().has_value());
  EXPECT_EQ(r.weights(), (VersionWeights{{1, 0}, {2, 10'000}}));
}

TEST(RolloutTest, BreachRollsBackAtOnceAndKeepsTheRecord) {
  FakeClock clock;
  Rollout r(Config({1, 10, 50, 100}), {{1, 90}, {3, 10}}, clock.Now());
  clock.Advance(300s);
  ASSERT_TRUE(r.Advance(clock.Now(), Verdict(Outcome::kHolds)));
  clock.Advance(42s);  // mid-dwell: a breach does not wait for the dwell's end
  GuardVerdict breach =
      Verdict(Outcome::kBreached, "candidate p99 1520 us is 1.90x baseline 800 us > 1.5");
  breach.candidate = {500, 1, 0.002, 1520};
  breach.baseline = {4500, 3, 0.0007, 800};
  ASSERT_TRUE(r.Advance(clock.Now(), breach));
  EXPECT_EQ(r.state(), State::kRolledBack);
  EXPECT_EQ(r.candidate_percent(), 0);
  // The baseline has everything again, in its own proportions.
  EXPECT_EQ(r.weights(), (VersionWeights{{1, 900'000}, {2, 0}, {3, 100'000}}));
  ASSERT_TRUE(r.last_rollback().has_value());
  const Rollout::RollbackRecord& rec = *r.last_rollback();
  EXPECT_EQ(rec.at, clock.Now());
  EXPECT_EQ(rec.step_index, 1u);
  EXPECT_EQ(rec.percent, 10);
  EXPECT_EQ(rec.reason, breach.reason);
  EXPECT_EQ(rec.candidate, breach.candidate);
  EXPECT_EQ(rec.baseline, breach.baseline);
  // Final: nothing brings it back.
  clock.Advance(1h);
  EXPECT_FALSE(r.Advance(clock.Now(), Verdict(Outcome::kHolds)));
  EXPECT_EQ(r.state(), State::kRolledBack);
}

TEST(RolloutTest, ALateAdvanceMovesOneStepOnly) {
  FakeClock clock;
  Rollout r(Config({1, 10, 50, 100}, 60), {{1, 1}}, clock.Now());
  clock.Advance(10min);
  EXPECT_TRUE(r.Advance(clock.Now(), Verdict(Outcome::kHolds)));
  EXPECT_EQ(r.step_index(), 1u);
  EXPECT_EQ(r.dwell_ends_at(), clock.Now() + 60s);
  EXPECT_FALSE(r.Advance(clock.Now(), Verdict(Outcome::kHolds)));
}

TEST(RolloutTest, ASingleHundredStepIsACutOver) {
  FakeClock clock;
  Rollout r(Config({100}), {{1, 1}}, clock.Now());
  EXPECT_EQ(r.state(), State::kCompleted);
  EXPECT_EQ(r.candidate_percent(), 100);
  EXPECT_EQ(r.weights(), (VersionWeights{{1, 0}, {2, 10'000}}));
}

TEST(RolloutWeightsTest, CandidateGetsExactlyItsPercent) {
  struct Case {
    VersionWeights baseline;
    double percent;
    VersionWeights want;
  };
  const Case cases[] = {
      {{{1, 1}}, 1, {{1, 9900}, {2, 100}}},
      {{{1, 3}, {3, 1}}, 10, {{1, 27'000}, {2, 4000}, {3, 9000}}},  // 67.5%, 10%, 22.5%
      // The candidate's own entry in the policy's weights is the rollout's to set.
      {{{1, 90}, {2, 10}}, 1, {{1, 891'000}, {2, 9000}}},
      {{{1, 5}, {3, 0}}, 0.5, {{1, 49'750}, {2, 250}, {3, 0}}},
      {{{1, 5}}, 0, {{1, 50'000}, {2, 0}}},
      {{{1, 5}}, 100, {{1, 0}, {2, 50'000}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.baseline) + " at " + std::to_string(c.percent));
    EXPECT_EQ(RolloutWeights(c.baseline, 2, c.percent), c.want);
  }
}

TEST(RolloutWeightsTest, EachStepOnlyMovesKeysToTheCandidate) {
  const VersionWeights baseline = {{1, 70}, {3, 30}};
  const std::vector<double> steps = {1, 10, 50, 100};
  for (size_t i = 0; i + 1 < steps.size(); ++i) {
    SCOPED_TRACE(steps[i]);
    const WeightedSplit before(RolloutWeights(baseline, 2, steps[i]));
    const WeightedSplit after(RolloutWeights(baseline, 2, steps[i + 1]));
    int moved = 0;
    for (uint64_t k = 0; k < 100'000; ++k) {
      const int64_t a = before.Pick(Mix64(k)), b = after.Pick(Mix64(k));
      if (a == b) continue;
      ASSERT_EQ(b, 2) << "key " << k << " moved from " << a << " to " << b;
      ++moved;
    }
    EXPECT_NEAR(moved / 1000.0, steps[i + 1] - steps[i], 1.0);
  }
}

}  // namespace
}  // namespace harrier
