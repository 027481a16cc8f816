// LoadedModel::CheckAdmission: the peek at admission control a transport makes before it reads
// a request's body.
#include <gtest/gtest.h>

#include <future>

#include "lifecycle/loaded_model.h"
#include "util/fake_backend.h"
#include "util/fake_clock.h"
#include "util/scheduled_request_builder.h"

namespace harrier {
namespace {

using testing::FakeClock;
using testing::Fp32InferenceRequest;

class LoadedModelAdmissionTest : public ::testing::Test {
 protected:
  ~LoadedModelAdmissionTest() override { Open(); }

  void MakeController(AdmissionController::Options o) {
    o.clock = &clock_;
    auto c = AdmissionController::Create(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    controller_ = std::move(c).value();
  }

  std::shared_ptr<LoadedModel> Make(BatchingPolicy policy,
                                    std::map<std::string, std::string> params = {}) {
    AdmissionController::ModelSpec spec;
    spec.name = "m";
    spec.parameters = std::move(params);
    auto admission = controller_->ForModel(spec);
    EXPECT_TRUE(admission.ok()) << admission.status().ToString();
    LoadedModel::Options options;
    options.name = "m";
    options.version = 1;
    options.io.max_batch_size = 8;
    options.io.inputs.push_back({"INPUT0", DataType::kFp32, {4}, std::nullopt, false});
    options.io.outputs.push_back({"OUTPUT0", DataType::kFp32, {4}, std::nullopt, false});
    options.policy = std::move(policy);
    options.admission = std::move(admission).value();
    std::vector<std::unique_ptr<ModelInstance>> instances;
    instances.push_back(std::make_unique<testing::GatedInstance>(&runs_, gate_));
    auto m = LoadedModel::Create(std::move(options), std::move(instances));
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return std::move(m).value();
  }

  // Sends one request; its answer arrives in the returned future (after Open() if it runs).
  std::future<Status> Send(LoadedModel& m, std::string client_id = "") {
    auto done = std::make_shared<std::promise<Status>>();
    std::future<Status> answer = done->get_future();
    auto request = Fp32InferenceRequest({1, 2, 3, 4}, {1, 4});
    request->client_id = std::move(client_id);
    m.Infer(std::move(request),
            [done](StatusOr<InferenceResponse> r) { done->set_value(r.status()); });
    return answer;
  }

  void Open() {
    if (!opened_) gate_open_.set_value();
    opened_ = true;
  }

  // A closed gate for the models made from now on (those made before keep theirs).
  void CloseGate() {
    Open();
    gate_open_ = std::promise<void>();
    gate_ = gate_open_.get_future().share();
    opened_ = false;
  }

  FakeClock clock_;
  std::unique_ptr<AdmissionController> controller_;
  std::atomic<int> runs_{0};
  std::promise<void> gate_open_;
  std::shared_future<void> gate_ = gate_open_.get_future().share();
  bool opened_ = false;
};

// Rate limits: the peek answers what Infer would, with the same message, and takes no token.
TEST_F(LoadedModelAdmissionTest, PeeksAtRateLimitsWithoutTakingATokens) {
  AdmissionController::Options o;
  o.per_client = {1, 1};
  MakeController(o);
  auto m = Make(BatchingPolicy{});
  Open();
  EXPECT_TRUE(m->CheckAdmission("a").ok());
  EXPECT_TRUE(m->CheckAdmission("a").ok());
  EXPECT_TRUE(Send(*m, "a").get().ok());  // the one token of client a
  Status peek = m->CheckAdmission("a");
  Status infer = Send(*m, "a").get();
  EXPECT_EQ(peek.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(peek.message(), infer.message());
  EXPECT_TRUE(m->CheckAdmission("b").ok());
  m->Shutdown();
}

// Overload protection: a model whose one request is held refuses the next when it may not
// queue (max_concurrency 1); a peek agrees, and takes no slot.
TEST_F(LoadedModelAdmissionTest, PeeksAtOverloadProtection) {
  MakeController({});
  auto m = Make(BatchingPolicy{}, {{"harrier.overload.max_concurrency", "1"}});
  EXPECT_TRUE(m->CheckAdmission("").ok());
  std::future<Status> held = Send(*m);
  Status peek = m->CheckAdmission("");
  EXPECT_EQ(peek.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(peek.message().find("concurrency limit of 1"), std::string::npos) << peek.message();
  EXPECT_EQ(Send(*m).get().message(), peek.message());
  Open();
  EXPECT_TRUE(held.get().ok());
  m->Shutdown();
  EXPECT_TRUE(m->CheckAdmission("").ok());
}

// With priority levels more urgent than the default, Infer exempts urgent requests from
// overload protection; the peek cannot see the priority (it is in the body), so it skips it.
TEST_F(LoadedModelAdmissionTest, SkipsOverloadProtectionWhenARequestMayBeUrgent) {
  MakeController({});
  BatchingPolicy levels;
  levels.priority_levels = 2;
  levels.default_priority_level = 2;
  auto m = Make(levels, {{"harrier.overload.max_concurrency", "1"}});
  std::future<Status> held = Send(*m);
  EXPECT_TRUE(m->CheckAdmission("").ok());
  Open();
  EXPECT_TRUE(held.get().ok());
  m->Shutdown();
}

TEST_F(LoadedModelAdmissionTest, OneLevelOrTheMostUrgentDefaultIsCheckedInFull) {
  MakeController({});
  BatchingPolicy one_level;
  one_level.priority_levels = 1;
  BatchingPolicy urgent_default;
  urgent_default.priority_levels = 3;
  urgent_default.default_priority_level = 1;
  for (const BatchingPolicy& policy : {one_level, urgent_default}) {
    CloseGate();  // the previous iteration opened it: this model's request must stay held
    auto m = Make(policy, {{"harrier.overload.max_concurrency", "1"}});
    std::future<Status> held = Send(*m);
    EXPECT_EQ(m->CheckAdmission("").code(), StatusCode::kResourceExhausted);
    Open();
    EXPECT_TRUE(held.get().ok());
    m->Shutdown();
  }
}

// The in-flight slot is given back before the answer goes out: a client that sends its next
// request the moment it has its answer (here: from the completion callback) is not refused by a
// limit it never exceeds. Before, the slot went back after the callback, and such a client got
// 429s under --max-inflight (4% of a closed loop's requests at --max-inflight 1).
TEST_F(LoadedModelAdmissionTest, TheInflightSlotIsFreeWhenTheAnswerArrives) {
  AdmissionController::Options o;
  o.max_inflight = 1;
  MakeController(o);
  auto m = Make(BatchingPolicy{});
  Open();
  std::promise<Status> next;
  auto request = Fp32InferenceRequest({1, 2, 3, 4}, {1, 4});
  m->Infer(std::move(request), [&m, &next](StatusOr<InferenceResponse> first) {
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    m->Infer(Fp32InferenceRequest({1, 2, 3, 4}, {1, 4}),
             [&next](StatusOr<InferenceResponse> r) { next.set_value(r.status()); });
  });
  const Status second = next.get_future().get();
  EXPECT_TRUE(second.ok()) << second.ToString();
  m->Shutdown();
}

}  // namespace
}  // namespace harrier
