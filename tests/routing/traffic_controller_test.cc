#include "routing/traffic_controller.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "util/fake_clock.h"

namespace harrier {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TrafficPolicy Parse(const std::string& json) {
  auto p = ParseTrafficPolicy(json);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : TrafficPolicy{};
}

RequestOutcome Ok(std::chrono::microseconds latency) {
  RequestOutcome o;
  o.latency = latency;
  return o;
}

// An engine failure or a timeout.
RequestOutcome ServerFailure(std::chrono::microseconds latency) {
  RequestOutcome o = Ok(latency);
  o.server_failure = true;
  return o;
}

// A request whose version the client named (URL or X-Harrier-Model-Version).
RequestOutcome Forced(RequestOutcome o) {
  o.routed_by_split = false;
  return o;
}

TEST(TrafficControllerTest, InactiveUntilAPolicyThatFitsTheServedVersions) {
  testing::FakeClock clock;
  TrafficController c("m", clock);
  EXPECT_FALSE(c.active());
  EXPECT_FALSE(c.Route(std::nullopt, {}).ok());
  EXPECT_EQ(c.SetPolicy(Parse(R"({"weights":{"1":90,"3":10}})"), {1, 2}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(c.active());  // nothing changed
  ASSERT_TRUE(c.SetPolicy(Parse(R"({"weights":{"1":90,"2":10}})"), {1, 2}).ok());
  EXPECT_TRUE(c.active());
  c.ClearPolicy();
  EXPECT_FALSE(c.active());
}

TEST(TrafficControllerTest, SplitsStickyClientsStayAndTheHeaderForces) {
  testing::FakeClock clock;
  TrafficController c("m", clock);
  ASSERT_TRUE(
      c.SetPolicy(Parse(R"({"weights":{"1":90,"2":10},"sticky_header":"x-user"})"), {1, 2}).ok());
  std::map<int64_t, int> counts;
  for (int i = 0; i < 20000; ++i) counts[c.Route(std::nullopt, {})->version]++;
  EXPECT_NEAR(counts[2] / 20000.0, 0.10, 0.01);
  // One sticky client: one version, every time.
  const TrafficController::Headers user = {{"x-user", "alice"}};
  const int64_t first = c.Route(std::nullopt, user)->version;
  for (int i = 0; i < 100; ++i) EXPECT_EQ(c.Route(std::nullopt, user)->version, first);
  EXPECT_EQ(c.Route(2, user)->version, 2);
  EXPECT_TRUE(c.Route(2, user)->forced);
}

TEST(TrafficControllerTest, AGuardBreachRollsTheCandidateBackWithinOneWindow) {
  testing::FakeClock clock;
  TrafficController c("m", clock);
  ASSERT_TRUE(c.SetPolicy(Parse(R"({"weights":{"1":100},
      "rollout":{"candidate":"2","steps":[10,50,100],"dwell_seconds":5},
      "guard":{"window_seconds":2,"max_p99_ratio":1.5,"min_requests":20}})"),
                          {1, 2})
                  .ok());
  EXPECT_EQ(c.weights().at(2), 10 * c.weights().at(1) / 90);
  // The candidate takes 10 ms, the baseline 1 ms: a breach as soon as both have 20 requests.
  for (int i = 0; i < 30; ++i) {
    c.Record(1, Ok(milliseconds(1)));
    c.Record(2, Ok(milliseconds(10)));
    clock.Advance(milliseconds(20));
  }
  clock.Advance(milliseconds(150));
  (void)c.Route(std::nullopt, {});  // evaluates
  EXPECT_EQ(c.rollbacks(), 1u);
  EXPECT_EQ(c.weights().count(2) ? c.weights().at(2) : 0, 0);
  const std::string state = c.StateJson();
  EXPECT_NE(state.find("\"rolled back\""), std::string::npos) << state;
  EXPECT_NE(state.find("\"last_rollback\":{"), std::string::npos) << state;
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(c.Route(std::nullopt, {})->version, 1);
}

TEST(TrafficControllerTest, AHealthyCandidateAdvancesEachDwell) {
  testing::FakeClock clock;
  TrafficController c("m", clock);
  ASSERT_TRUE(c.SetPolicy(Parse(R"({"weights":{"1":100},
      "rollout":{"candidate":"2","steps":[10,100],"dwell_seconds":2},
      "guard":{"window_seconds":2,"max_p99_ratio":1.5,"min_requests":5}})"),
                          {1, 2})
                  .ok());
  for (int i = 0; i < 150; ++i) {
    c.Record(1, Ok(milliseconds(1)));
    c.Record(2, Ok(milliseconds(1)));
    clock.Advance(milliseconds(20));
    (void)c.Route(std::nullopt, {});
  }
  EXPECT_EQ(c.rollbacks(), 0u);
  EXPECT_EQ(c.weights().count(1) ? c.weights().at(1) : 0, 0);  // completed: all to 2
  EXPECT_GT(c.weights().at(2), 0);
}

TEST(TrafficControllerTest, APolicyNamingAVersionThatWentIsDropped) {
  testing::FakeClock clock;
  TrafficController c("m", clock);
  ASSERT_TRUE(c.SetPolicy(Parse(R"({"weights":{"1":50,"2":50}})"), {1, 2}).ok());
  EXPECT_FALSE(c.OnVersionsChanged({1, 2, 3}).has_value());  // still fits
  EXPECT_TRUE(c.active());
  auto dropped = c.OnVersionsChanged({1});
  ASSERT_TRUE(dropped.has_value());
  EXPECT_FALSE(c.active());
}

Tensor Fp32(std::vector<float> values, Shape shape, std::vector<float>* storage) {
  *storage = std::move(values);
  Tensor t;
  t.name = "scores";
  t.dtype = DataType::kFp32;
  t.shape = std::move(shape);
  t.data = reinterpret_cast<const std::byte*>(storage->data());
  t.size_bytes = storage->size() * sizeof(float);
  return t;
}

TEST(TrafficControllerTest, CompareOutputsGivesTheLargestDifferenceAndTopOneAgreement) {
  std::vector<float> a, b, c;
  const std::vector<Tensor> answered = {Fp32({0.1f, 0.7f, 0.2f}, {1, 3}, &a)};
  const std::vector<Tensor> same_top = {Fp32({0.1f, 0.5f, 0.4f}, {1, 3}, &b)};
  const std::vector<Tensor> other_top = {Fp32({0.9f, 0.05f, 0.05f}, {1, 3}, &c)};
  ShadowComparison x = CompareOutputs(answered, same_top);
  EXPECT_NEAR(x.max_abs_difference, 0.2, 1e-6);
  ASSERT_TRUE(x.top1_agrees.has_value());
  EXPECT_TRUE(*x.top1_agrees);
  ShadowComparison y = CompareOutputs(answered, other_top);
  EXPECT_NEAR(y.max_abs_difference, 0.8, 1e-6);
  EXPECT_FALSE(*y.top1_agrees);
}

// An output the shadow lacks, or holds with another type or shape, is a mismatch, never an
// agreement: a [4] against a [2,2] with the same data read as a difference of 0 (probe 40).
TEST(TrafficControllerTest, CompareOutputsCallsAnotherShapeOrAMissingOutputAMismatch) {
  std::vector<float> a, b, c;
  const std::vector<Tensor> answered = {Fp32({1, 2, 3, 4}, {4}, &a)};
  EXPECT_TRUE(CompareOutputs(answered, {Fp32({1, 2, 3, 4}, {2, 2}, &b)}).mismatched);
  EXPECT_TRUE(CompareOutputs(answered, {}).mismatched);
  Tensor other_name = Fp32({1, 2, 3, 4}, {4}, &c);
  other_name.name = "other";
  EXPECT_TRUE(CompareOutputs(answered, {other_name}).mismatched);
  EXPECT_FALSE(CompareOutputs(answered, {Fp32({1, 2, 3, 5}, {4}, &b)}).mismatched);

  testing::FakeClock clock;
  TrafficController controller("m", clock);
  ShadowComparison mismatch;
  mismatch.mismatched = true;
  controller.RecordShadow(2, mismatch);
  const auto figures = controller.shadow_figures().at(2);
  EXPECT_EQ(figures.mismatched, 1u);
  EXPECT_EQ(figures.compared, 0u);
  EXPECT_EQ(figures.errors, 0u);
}

TEST(TrafficControllerTest, BreakerStatesOfEachServedVersionForTheMetrics) {
  testing::FakeClock clock;
  TrafficController c("m", clock);
  EXPECT_TRUE(c.breaker_states().empty());  // no policy, no breakers
  ASSERT_TRUE(c.SetPolicy(Parse(R"({"weights":{"1":50,"2":50},
                                   "breaker":{"failure_threshold":2,"open_seconds":5}})"),
                          {1, 2})
                  .ok());
  using State = CircuitBreaker::State;
  EXPECT_EQ(c.breaker_states(),
            (std::map<int64_t, State>{{1, State::kClosed}, {2, State::kClosed}}));
  for (int i = 0; i < 2; ++i) c.Record(2, ServerFailure(milliseconds(1)));
  EXPECT_EQ(c.breaker_states(), (std::map<int64_t, State>{{1, State::kClosed}, {2, State::kOpen}}));
  clock.Advance(std::chrono::seconds(5));
  EXPECT_EQ(c.breaker_states().at(2), State::kHalfOpen);
  c.ClearPolicy();
  EXPECT_TRUE(c.breaker_states().empty());
}

// probe12 F5: requests forced to the candidate (a tester's, or anyone's) are not the rollout's
// traffic. They open its breaker, but the guard does not judge them.
TEST(TrafficControllerTest, ForcedRequestsFeedTheBreakerButNotTheGuard) {
  testing::FakeClock clock;
  TrafficController c("m", clock);
  ASSERT_TRUE(c.SetPolicy(Parse(R"({"weights":{"1":1},
      "rollout":{"candidate":2,"steps":[10,100],"dwell_seconds":600},
      "guard":{"window_seconds":60,"min_requests":10,"max_error_rate":0.1},
      "breaker":{"failure_threshold":5,"open_seconds":600}})"),
                          {1, 2})
                  .ok());
  for (int i = 0; i < 15; ++i) c.Record(2, Forced(ServerFailure(milliseconds(1))));
  clock.Advance(milliseconds(200));
  const std::string state = c.StateJson();
  EXPECT_EQ(c.rollbacks(), 0u) << state;
  EXPECT_NE(state.find(R"("state":"running")"), std::string::npos) << state;
  EXPECT_EQ(c.breaker_states().at(2), CircuitBreaker::State::kOpen);
}

// probe12 F5: a candidate failing exactly as often as its baseline (bad input for both, a
// shared dependency down) is not rolled back; one failing more than the allowance above it is.
TEST(TrafficControllerTest, TheErrorLimitIsOverTheBaselinesOwnRate) {
  testing::FakeClock clock;
  TrafficController c("m", clock);
  const TrafficPolicy policy = Parse(R"({"weights":{"1":1},
      "rollout":{"candidate":2,"steps":[50,100],"dwell_seconds":600},
      "guard":{"window_seconds":60,"min_requests":10,"max_error_rate":0.1}})");
  ASSERT_TRUE(c.SetPolicy(policy, {1, 2}).ok());
  for (int i = 0; i < 20; ++i) {
    c.Record(1, ServerFailure(milliseconds(1)));
    c.Record(2, ServerFailure(milliseconds(1)));
  }
  clock.Advance(milliseconds(200));
  std::string state = c.StateJson();
  EXPECT_EQ(c.rollbacks(), 0u) << state;

  ASSERT_TRUE(c.SetPolicy(policy, {1, 2}).ok());  // fresh windows
  for (int i = 0; i < 20; ++i) {
    c.Record(1, i < 2 ? ServerFailure(milliseconds(1)) : Ok(milliseconds(1)));  // 10%
    c.Record(2, i < 5 ? ServerFailure(milliseconds(1)) : Ok(milliseconds(1)));  // 25%
  }
  clock.Advance(milliseconds(200));
  state = c.StateJson();
  EXPECT_EQ(c.rollbacks(), 1u) << state;
  EXPECT_NE(state.find("candidate error rate 25.00% (5 of 20) > baseline 10.00% + "
                       "max_error_rate 10.00%"),
            std::string::npos)
      << state;
}

// A candidate failing every request at a high rate is rolled back within a few milliseconds of
// the data being enough, not at the next 100 ms evaluation: at 1,000 requests a second that was
// ~100 more failed requests past min_requests. Its failures are what is evaluated early.
TEST(TrafficControllerTest, ACandidatesFailuresAreJudgedWithoutWaitingForThePeriod) {
  testing::FakeClock clock;
  TrafficController c("m", clock);
  ASSERT_TRUE(c.SetPolicy(Parse(R"({"weights":{"1":1},
      "rollout":{"candidate":2,"steps":[50,100],"dwell_seconds":600},
      "guard":{"window_seconds":10,"min_requests":20,"max_error_rate":0.1}})"),
                          {1, 2})
                  .ok());
  (void)c.Route(std::nullopt, {});  // an evaluation now: the next periodic one is 100 ms away
  int failed = 0;
  while (c.rollbacks() == 0 && failed < 100) {
    c.Record(1, Ok(milliseconds(1)));
    c.Record(2, ServerFailure(milliseconds(1)));
    ++failed;
    clock.Advance(milliseconds(1));  // 1,000 a second of each
  }
  EXPECT_EQ(c.rollbacks(), 1u) << c.StateJson();
  EXPECT_LE(failed, 20 + 5) << "failures past min_requests before the rollback";
}

// probe12 F11: a guard on latency alone still rolls back a candidate that fails every request
// (fast failures keep its p99 low), by the default error allowance.
TEST(TrafficControllerTest, ALatencyOnlyGuardRollsBackAnAllFailingCandidate) {
  testing::FakeClock clock;
  TrafficController c("m", clock);
  ASSERT_TRUE(c.SetPolicy(Parse(R"({"weights":{"1":1},
      "rollout":{"candidate":2,"steps":[50,100],"dwell_seconds":1},
      "guard":{"window_seconds":2,"min_requests":5,"max_p99_ratio":2}})"),
                          {1, 2})
                  .ok());
  for (int i = 0; i < 40; ++i) {
    c.Record(1, Ok(std::chrono::microseconds(189)));
    c.Record(2, ServerFailure(std::chrono::microseconds(189)));
    clock.Advance(milliseconds(50));
    (void)c.Route(std::nullopt, {});
  }
  const std::string state = c.StateJson();
  EXPECT_EQ(c.rollbacks(), 1u) << state;
  EXPECT_EQ(c.weights().count(2) ? c.weights().at(2) : 0, 0) << state;
  EXPECT_NE(state.find("max_error_rate 5.00% (default)"), std::string::npos) << state;
}

// probe12 F10: a version whose failing instance a reload replaced gets traffic again at once,
// not after open_seconds; the other versions' breakers and the weights are untouched.
TEST(TrafficControllerTest, AReplacedVersionsBreakerClosesAgain) {
  testing::FakeClock clock;
  TrafficController c("m", clock);
  ASSERT_TRUE(c.SetPolicy(Parse(R"({"weights":{"1":1,"2":1,"3":1},
                                   "breaker":{"failure_threshold":2,"open_seconds":600}})"),
                          {1, 2, 3})
                  .ok());
  using State = CircuitBreaker::State;
  for (int i = 0; i < 2; ++i) {
    c.Record(2, ServerFailure(milliseconds(1)));
    c.Record(3, ServerFailure(milliseconds(1)));
  }
  ASSERT_EQ(c.breaker_states().at(2), State::kOpen);
  const VersionWeights weights = c.weights();
  c.OnVersionReplaced(2);
  EXPECT_EQ(c.breaker_states(), (std::map<int64_t, State>{
                                    {1, State::kClosed}, {2, State::kClosed}, {3, State::kOpen}}));
  EXPECT_EQ(c.weights(), weights);
  std::map<int64_t, int> counts;
  for (int i = 0; i < 1000; ++i) counts[c.Route(std::nullopt, {})->version]++;
  EXPECT_GT(counts[2], 300);
  EXPECT_EQ(counts[3], 0);
  // The window starts empty: one more failure does not reopen it (the threshold is 2).
  c.Record(2, ServerFailure(milliseconds(1)));
  EXPECT_EQ(c.breaker_states().at(2), State::kClosed);
  // Without a policy, or for a version not served: nothing happens.
  c.OnVersionReplaced(7);
  c.ClearPolicy();
  c.OnVersionReplaced(2);
  EXPECT_TRUE(c.breaker_states().empty());
}

}  // namespace
}  // namespace harrier
