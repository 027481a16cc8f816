// What a version tells its model's traffic controller (probe12 F5): only server-side failures
// are errors, and only requests the split routed feed a rollout's guard windows; a request that
// names its version (URL, X-Harrier-Model-Version through ForcedVersionModel) feeds the breaker
// alone.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <string>

#include "lifecycle/forced_version_model.h"
#include "lifecycle/loaded_model.h"
#include "routing/traffic_controller.h"
#include "util/fake_backend.h"
#include "util/fake_clock.h"
#include "util/scheduled_request_builder.h"

namespace harrier {
namespace {

using testing::Fp32InferenceRequest;

// An engine that fails every run: a server-side failure.
class FailingInstance : public ModelInstance {
 public:
  Status Run(std::span<const Tensor>, std::span<const std::string>, std::vector<Tensor>*,
             const RunContext&) override {
    return Internal("the engine failed");
  }
};

TrafficPolicy Parse(const std::string& json) {
  auto p = ParseTrafficPolicy(json);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : TrafficPolicy{};
}

// Version 1 the baseline, version 2 the candidate of a rollout at 10% whose guard allows 10%
// errors over 10 requests; a breaker opens after 5 failures.
constexpr char kRollout[] = R"({"weights":{"1":1},
    "rollout":{"candidate":2,"steps":[10,100],"dwell_seconds":600},
    "guard":{"window_seconds":60,"min_requests":10,"max_error_rate":0.1},
    "breaker":{"failure_threshold":5,"open_seconds":600}})";

class LoadedModelTrafficTest : public ::testing::Test {
 protected:
  LoadedModelTrafficTest() { EXPECT_TRUE(traffic_->SetPolicy(Parse(kRollout), {1, 2}).ok()); }
  ~LoadedModelTrafficTest() override {
    if (candidate_) candidate_->Shutdown();
  }

  // The candidate, version 2, with `instance` as its engine.
  void MakeCandidate(std::unique_ptr<ModelInstance> instance) {
    LoadedModel::Options options;
    options.name = "m";
    options.version = 2;
    options.io.max_batch_size = 8;
    options.io.inputs.push_back({"INPUT0", DataType::kFp32, {4}, std::nullopt, false});
    options.io.outputs.push_back({"OUTPUT0", DataType::kFp32, {4}, std::nullopt, false});
    options.traffic = traffic_;
    std::vector<std::unique_ptr<ModelInstance>> instances;
    instances.push_back(std::move(instance));
    auto m = LoadedModel::Create(std::move(options), std::move(instances));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    candidate_ = std::move(m).value();
  }

  // Sends `request` to `model` and waits for its status code.
  static StatusCode Call(ServableModel& model, std::unique_ptr<InferenceRequest> request) {
    std::promise<StatusCode> done;
    model.Infer(std::move(request),
                [&](StatusOr<InferenceResponse> r) { done.set_value(r.status().code()); });
    return done.get_future().get();
  }

  // The guard's evaluation after what was recorded (at most every 100 ms).
  std::string Evaluate() {
    clock_.Advance(std::chrono::milliseconds(200));
    return traffic_->StateJson();
  }

  testing::FakeClock clock_;
  std::shared_ptr<TrafficController> traffic_ = std::make_shared<TrafficController>("m", clock_);
  std::shared_ptr<LoadedModel> candidate_;
  std::atomic<int> runs_{0};
};

// The engine's kInvalidArgument (an input it cannot take: the client's fault) is a request of
// the candidate, not an error: a client sending bad requests cannot roll a rollout back.
TEST_F(LoadedModelTrafficTest, AClientsBadRequestsAreNotCandidateErrors) {
  MakeCandidate(
      std::make_unique<testing::FakeInstance>(&runs_, testing::FakeInstance::Fails::kOnZeros));
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(Call(*candidate_, Fp32InferenceRequest({0, 0, 0, 0}, {1, 4})),
              StatusCode::kInvalidArgument);
  const std::string state = Evaluate();
  EXPECT_EQ(traffic_->rollbacks(), 0u) << state;
  EXPECT_NE(state.find(R"("candidate":{"requests":20,"errors":0,)"), std::string::npos) << state;
  EXPECT_EQ(traffic_->breaker_states().at(2), CircuitBreaker::State::kClosed);
}

// Engine failures of requests the split sent are what the guard judges.
TEST_F(LoadedModelTrafficTest, EngineFailuresOfRoutedRequestsRollTheCandidateBack) {
  MakeCandidate(std::make_unique<FailingInstance>());
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(Call(*candidate_, Fp32InferenceRequest({1, 2, 3, 4}, {1, 4})), StatusCode::kInternal);
  const std::string state = Evaluate();
  EXPECT_EQ(traffic_->rollbacks(), 1u) << state;
}

// A request with the version in its URL: its failure opens the breaker, but the rollout's
// windows do not see it.
TEST_F(LoadedModelTrafficTest, RequestsNamingTheirVersionFeedTheBreakerNotTheGuard) {
  MakeCandidate(std::make_unique<FailingInstance>());
  for (int i = 0; i < 10; ++i) {
    auto request = Fp32InferenceRequest({1, 2, 3, 4}, {1, 4});
    request->model_version = 2;
    EXPECT_EQ(Call(*candidate_, std::move(request)), StatusCode::kInternal);
  }
  const std::string state = Evaluate();
  EXPECT_EQ(traffic_->rollbacks(), 0u) << state;
  EXPECT_EQ(traffic_->breaker_states().at(2), CircuitBreaker::State::kOpen);
}

// X-Harrier-Model-Version: the handle the router gives such a request marks it as naming its
// version, so it counts as the URL's does.
TEST_F(LoadedModelTrafficTest, AVersionForcedByTheHeaderDoesNotFeedTheGuard) {
  MakeCandidate(std::make_unique<FailingInstance>());
  ForcedVersionModel forced(candidate_);
  EXPECT_EQ(forced.version(), 2);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(Call(forced, Fp32InferenceRequest({1, 2, 3, 4}, {1, 4})), StatusCode::kInternal);
  const std::string state = Evaluate();
  EXPECT_EQ(traffic_->rollbacks(), 0u) << state;
  EXPECT_EQ(traffic_->breaker_states().at(2), CircuitBreaker::State::kOpen);
}

}  // namespace
}  // namespace harrier
