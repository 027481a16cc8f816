// ShadowedModel: a shadow copy never takes a client's place in admission control (probe12 F12).
#include "lifecycle/shadowed_model.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "lifecycle/loaded_model.h"
#include "scheduler/admission_controller.h"
#include "util/fake_backend.h"
#include "util/fake_clock.h"
#include "util/scheduled_request_builder.h"

namespace harrier {
namespace {

using testing::Fp32InferenceRequest;

class ShadowedModelTest : public ::testing::Test {
 protected:
  ~ShadowedModelTest() override { Open(); }

  // A server with an in-flight limit of `max_inflight` and nothing else, and two versions of
  // model "m" whose runs wait for the gate.
  void MakeServer(int64_t max_inflight) {
    AdmissionController::Options o;
    o.clock = &clock_;
    o.max_inflight = max_inflight;
    o.overload_protection = false;
    auto c = AdmissionController::Create(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    admission_ = std::move(c).value();
    v1_ = MakeVersion(1);
    v2_ = MakeVersion(2);
  }

  std::shared_ptr<LoadedModel> MakeVersion(int64_t version) {
    AdmissionController::ModelSpec spec;
    spec.name = "m";
    auto admission = admission_->ForModel(spec);
    EXPECT_TRUE(admission.ok()) << admission.status().ToString();
    LoadedModel::Options options;
    options.name = "m";
    options.version = version;
    options.io.max_batch_size = 8;
    options.io.inputs.push_back({"INPUT0", DataType::kFp32, {4}, std::nullopt, false});
    options.io.outputs.push_back({"OUTPUT0", DataType::kFp32, {4}, std::nullopt, false});
    options.admission = std::move(admission).value();
    std::vector<std::unique_ptr<ModelInstance>> instances;
    instances.push_back(std::make_unique<testing::GatedInstance>(&runs_, gate_));
    auto m = LoadedModel::Create(std::move(options), std::move(instances));
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return std::move(m).value();
  }

  // Sends one request; its answer arrives in the returned future (after Open() if it runs).
  static std::future<Status> Send(ServableModel& m) {
    auto done = std::make_shared<std::promise<Status>>();
    std::future<Status> answer = done->get_future();
    m.Infer(Fp32InferenceRequest({1, 2, 3, 4}, {1, 4}),
            [done](StatusOr<InferenceResponse> r) { done->set_value(r.status()); });
    return answer;
  }

  void Open() {
    if (!opened_) gate_open_.set_value();
    opened_ = true;
  }

  void ShutDown() {
    Open();
    v1_->Shutdown();
    v2_->Shutdown();
  }

  testing::FakeClock clock_;
  std::unique_ptr<AdmissionController> admission_;
  std::shared_ptr<TrafficController> traffic_ = std::make_shared<TrafficController>("m", clock_);
  std::shared_ptr<LoadedModel> v1_, v2_;
  std::atomic<int> runs_{0};
  std::promise<void> gate_open_;
  std::shared_future<void> gate_ = gate_open_.get_future().share();
  bool opened_ = false;
};

// Two clients, a limit of two: the first client's shadow copy, still running, does not take
// the second client's slot.
TEST_F(ShadowedModelTest, AShadowCopyTakesNoInflightSlotOfTheClients) {
  MakeServer(/*max_inflight=*/2);
  ShadowedModel shadowed(v1_, v2_, traffic_);
  std::future<Status> first = Send(shadowed);
  EXPECT_EQ(admission_->in_flight(), 1);  // the first client's request only
  std::future<Status> second = Send(*v1_);
  ShutDown();
  EXPECT_TRUE(first.get().ok());
  EXPECT_TRUE(second.get().ok());
  const ModelMetrics& metrics = v2_->metrics();
  EXPECT_EQ(metrics.failures.Read(FailureReason::kRejected), 0u);
}

// With no slot to spare, the copy is shed and counted as such, not as a failure of the shadow
// version; the client's request is answered as usual.
TEST_F(ShadowedModelTest, AShadowCopyIsShedWhenTheServerHasNoSlotToSpare) {
  MakeServer(/*max_inflight=*/1);
  ShadowedModel shadowed(v1_, v2_, traffic_);
  std::future<Status> answer = Send(shadowed);
  ShutDown();
  EXPECT_TRUE(answer.get().ok());
  const std::map<int64_t, TrafficController::ShadowFigures> figures = traffic_->shadow_figures();
  ASSERT_TRUE(figures.contains(2));
  EXPECT_EQ(figures.at(2).shed, 1u);
  EXPECT_EQ(figures.at(2).errors, 0u);
  EXPECT_EQ(v2_->metrics().failures.Read(FailureReason::kRejected), 0u);
}

// A request the answering version refused (here a 400 from the request checks, which the shadow
// version makes too) counts for nothing: there was no answer to compare with, and it made a
// healthy shadow read as 100% errors (probe 38). A good request is compared.
TEST_F(ShadowedModelTest, ARequestWhoseRealAnswerFailedIsNotCountedAgainstTheShadow) {
  MakeServer(/*max_inflight=*/4);
  ShadowedModel shadowed(v1_, v2_, traffic_);
  auto bad = std::make_shared<std::promise<Status>>();
  shadowed.Infer(Fp32InferenceRequest({1, 2, 3}, {1, 3}),
                 [bad](StatusOr<InferenceResponse> r) { bad->set_value(r.status()); });
  std::future<Status> good = Send(shadowed);
  ShutDown();
  EXPECT_EQ(bad->get_future().get().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(good.get().ok());
  // The shadow's answer to the good request may come after the client's.
  std::map<int64_t, TrafficController::ShadowFigures> figures;
  for (int i = 0; i < 500; ++i) {
    figures = traffic_->shadow_figures();
    if (figures.contains(2) && figures.at(2).compared == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(figures.contains(2));
  EXPECT_EQ(figures.at(2).compared, 1u);
  EXPECT_EQ(figures.at(2).errors, 0u);
}

}  // namespace
}  // namespace harrier
