#include "lifecycle/repository_reports.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "routing/traffic_policy.h"
#include "util/fake_backend.h"
#include "util/scheduled_request_builder.h"

namespace harrier {
namespace {

using testing::Fp32InferenceRequest;

std::shared_ptr<LoadedModel> Loaded(std::string name, int64_t version, std::atomic<int>* runs) {
  LoadedModel::Options options;
  options.name = std::move(name);
  options.version = version;
  options.io.inputs.push_back({"INPUT0", DataType::kFp32, {4}, std::nullopt, false});
  options.io.outputs.push_back({"OUTPUT0", DataType::kFp32, {4}, std::nullopt, false});
  std::vector<std::unique_ptr<ModelInstance>> instances;
  instances.push_back(std::make_unique<testing::FakeInstance>(runs));
  auto m = LoadedModel::Create(std::move(options), std::move(instances));
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

// One request answered by `model`, waited for.
void InferOnce(LoadedModel& model) {
  std::promise<bool> done;
  model.Infer(Fp32InferenceRequest({1, 2, 3, 4}, {4}),
              [&](StatusOr<InferenceResponse> r) { done.set_value(r.ok()); });
  ASSERT_TRUE(done.get_future().get());
}

void WaitForDurations(const LoadedModel& model, uint64_t count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (model.metrics().request_duration.Snapshot().count() < count &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(model.metrics().request_duration.Snapshot().count(), count);
}

class RepositoryReportsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    v1_ = Loaded("m", 1, &runs_);
    v2_ = Loaded("m", 2, &runs_);
    InferOnce(*v1_);
    InferOnce(*v1_);
    InferOnce(*v2_);
    // A request's duration is observed once its answer is encoded, just after its callback.
    WaitForDurations(*v1_, 2);
    WaitForDurations(*v2_, 1);
    traffic_ = std::make_shared<TrafficController>("m");
    auto policy = ParseTrafficPolicy(R"({"weights": {"1": 90, "2": 10}})");
    ASSERT_TRUE(policy.ok()) << policy.status().ToString();
    ASSERT_TRUE(traffic_->SetPolicy(*policy, {1, 2}).ok());

    snapshot_.versions.push_back({{"m", 1, ModelState::kReady, ""}, 0.25, 0, v1_});
    snapshot_.versions.push_back({{"m", 2, ModelState::kReady, ""}, 0.5, 1, v2_});
    snapshot_.versions.push_back({{"m", 3, ModelState::kUnavailable, "bad file"}, 0.125, 0, {}});
    PinnedVersion loading;
    loading.state = {"new", 0, ModelState::kLoading, ""};
    snapshot_.versions.push_back(loading);
    snapshot_.traffic.push_back(traffic_);
  }

  std::atomic<int> runs_{0};
  std::shared_ptr<LoadedModel> v1_, v2_;
  std::shared_ptr<TrafficController> traffic_;
  RepositorySnapshot snapshot_;
};

TEST_F(RepositoryReportsTest, MetricsCoverEveryRowAndThePolicy) {
  FailureCounters unrouted;
  unrouted.Add(FailureReason::kRejected);
  TextExposition out;
  AppendRepositoryMetrics(snapshot_, unrouted, &out);
  const std::string text = out.Text();
  auto has = [&](const std::string& line) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\nin:\n" << text;
  };
  has(R"(harrier_request_success_total{model="m",version="1"} 2)");
  has(R"(harrier_request_success_total{model="m",version="2"} 1)");
  has(R"(harrier_traffic_weight{model="m",version="1"} 90)");
  has(R"(harrier_traffic_weight{model="m",version="2"} 10)");
  has(R"(harrier_model_state{model="m",version="3",state="UNAVAILABLE"} 1)");
  has(R"(harrier_model_state{model="new",version="0",state="LOADING"} 1)");
  has(R"(harrier_model_load_duration_seconds{model="m",version="2"} 0.5)");
  has(R"(harrier_model_warmup_failures_total{model="m",version="2"} 1)");
  // The version that is not loaded has no request figures; the model that never loaded none
  // either.
  EXPECT_EQ(text.find(R"(harrier_request_success_total{model="m",version="3"})"),
            std::string::npos);
  EXPECT_EQ(text.find(R"(harrier_request_success_total{model="new")"), std::string::npos);
}

TEST_F(RepositoryReportsTest, DashboardRowsFollowTheSnapshotWithPolicyNotes) {
  const std::vector<DashboardVersion> rows = DashboardRows(snapshot_);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_TRUE(rows[0].loaded);
  EXPECT_EQ(rows[0].success_count, 2u);
  EXPECT_EQ(rows[0].request_duration.count(), 2u);
  EXPECT_EQ(rows[0].traffic, "weight 90");
  EXPECT_EQ(rows[1].success_count, 1u);
  EXPECT_EQ(rows[1].traffic, "weight 10");
  EXPECT_FALSE(rows[2].loaded);
  EXPECT_EQ(rows[2].state.reason, "bad file");
  EXPECT_EQ(rows[2].traffic, "");
  EXPECT_EQ(rows[3].state.name, "new");
  EXPECT_EQ(rows[3].state.state, ModelState::kLoading);
}

TEST_F(RepositoryReportsTest, AClearedPolicyLeavesNoNotesAndNoWeights) {
  traffic_->ClearPolicy();
  for (const DashboardVersion& row : DashboardRows(snapshot_)) EXPECT_EQ(row.traffic, "");
  TextExposition out;
  AppendRepositoryMetrics(snapshot_, FailureCounters(), &out);
  EXPECT_EQ(out.Text().find("harrier_traffic_weight{"), std::string::npos);
}

}  // namespace
}  // namespace harrier
