// InferenceFlow: the steps between a front end's decoding and its encoding, in order; where each
// refusal is counted; what the access line and the trace are told; and that the codec is
// answered exactly once, with what it needs.
#include "protocol/common/inference_flow.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "util/fake_model_manager.h"
#include "util/fake_tracer.h"
#include "util/recording_access_log.h"

namespace harrier {
namespace {

using ::harrier::testing::FakeModelManager;
using ::harrier::testing::FakeServableModel;
using ::harrier::testing::FakeTracer;
using ::harrier::testing::RecordingAccessLog;

constexpr const char* kSampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

// What the codec was asked and what it answers; shared by the codec's copies.
struct Script {
  Status check, decode, prepare;
  std::vector<RequestedOutput> outputs;  // the decoded request's
  std::vector<std::string> steps;
  std::string decoded_for;  // the model Decode was given
  InferenceRequest prepared;  // a copy of what Prepare saw
  int sends = 0;
  InferenceAnswer answer;
};

class FakeCodec {
 public:
  explicit FakeCodec(std::shared_ptr<Script> script) : script_(std::move(script)) {}

  Status Check() const {
    script_->steps.push_back("check");
    return script_->check;
  }
  StatusOr<std::unique_ptr<InferenceRequest>> Decode(ServableModel& model,
                                                     const SharedMemoryContext& shared_memory) {
    script_->steps.push_back("decode");
    script_->decoded_for = std::string(shared_memory.model_name) + "/" + model.name();
    if (!script_->decode.ok()) return script_->decode;
    auto request = std::make_unique<InferenceRequest>();
    request->model_name = model.name();
    Tensor x;
    x.name = "x";
    x.dtype = DataType::kFp32;
    x.shape = {1, 2};
    request->inputs.push_back(x);
    request->outputs = script_->outputs;
    return request;
  }
  Status Prepare(ServableModel&, InferenceRequest* request) {
    script_->steps.push_back("prepare");
    script_->prepared.received_at = request->received_at;
    script_->prepared.allow_inline = request->allow_inline;
    script_->prepared.cancellation = request->cancellation;
    script_->prepared.trace = request->trace;  // set after Prepare, by the trace observer
    return script_->prepare;
  }
  InferenceOutcome Refuse(const Status& s) {
    script_->steps.push_back("refuse");
    return {400, s, 7};
  }
  InferenceOutcome Encode(StatusOr<InferenceResponse> result,
                          std::span<const SharedMemoryOutput>) {
    script_->steps.push_back("encode");
    if (!result.ok()) return {500, result.status(), 9};
    return {200, Status::Ok(), 42};
  }
  void Send(InferenceAnswer answer) {
    script_->steps.push_back("send");
    ++script_->sends;
    script_->answer = std::move(answer);
  }

 private:
  std::shared_ptr<Script> script_;
};

static_assert(InferenceCodec<FakeCodec>);

class InferenceFlowTest : public ::testing::Test {
 protected:
  InferenceFlowTest() { model_ = models_.AddReady("m", 3, 4); }

  InferenceCall Call() {
    InferenceCall call;
    call.protocol = "grpc";
    call.method = "ModelInfer";
    call.target = "/inference.GRPCInferenceService/ModelInfer";
    call.request_id = "rid-1";
    call.key_id = "k1";
    call.model = "m";
    call.unrouted_log_model = "m";
    call.request_bytes = 123;
    call.received_at = std::chrono::steady_clock::now();
    call.sole_requester = true;
    return call;
  }

  void Run(InferenceCall call, AccessLog* log = nullptr) {
    InferenceFlow flow(&models_, {.access_log = log});
    flow.Run(std::move(call), FakeCodec(script_));
  }

  FakeModelManager models_;
  std::shared_ptr<FakeServableModel> model_;
  std::shared_ptr<Script> script_ = std::make_shared<Script>();
  RecordingAccessLog log_;
};

TEST_F(InferenceFlowTest, RunsEveryStepInOrderAndAnswersOnce) {
  InferenceCall call = Call();
  call.cancellation = std::make_shared<CancellationToken>();
  const auto received = call.received_at;
  const auto token = call.cancellation;
  Run(std::move(call), &log_);
  EXPECT_EQ(script_->steps,
            (std::vector<std::string>{"check", "decode", "prepare", "encode", "send"}));
  EXPECT_EQ(script_->decoded_for, "m/m");
  EXPECT_EQ(script_->sends, 1);
  EXPECT_TRUE(script_->answer.completed);
  EXPECT_EQ(script_->answer.request_id, "rid-1");
  EXPECT_EQ(script_->answer.trace, nullptr);
  EXPECT_GT(script_->answer.timing.total_ns, 0u);
  // What the transport knows, on the request before the front end's own fields.
  EXPECT_EQ(script_->prepared.received_at, received);
  EXPECT_EQ(script_->prepared.cancellation, token);
  // kSoleRequester and the sole requester
  EXPECT_EQ(script_->prepared.allow_inline, InlineAllowance::kAlways);
  EXPECT_EQ(model_->infer_calls, 1);
  EXPECT_TRUE(model_->recorded_failures.empty());
  EXPECT_TRUE(models_.unrouted_failures.empty());

  const auto records = log_.records();
  ASSERT_EQ(records.size(), 1u);
  const auto& r = records[0];
  EXPECT_EQ(r.request_id, "rid-1");
  EXPECT_EQ(r.protocol, "grpc");
  EXPECT_EQ(r.method, "ModelInfer");
  EXPECT_EQ(r.target, "/inference.GRPCInferenceService/ModelInfer");
  EXPECT_EQ(r.key_id, "k1");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.version, 3);
  EXPECT_EQ(r.inputs, R"([{"name":"x","datatype":"FP32","shape":[1,2]}])");
  EXPECT_EQ(r.request_bytes, 123u);
  EXPECT_EQ(r.response_bytes, 42u);
  EXPECT_EQ(r.total_ns, script_->answer.timing.total_ns);
  EXPECT_EQ(r.output_ns, script_->answer.timing.output_ns);
}

TEST_F(InferenceFlowTest, ModelFailureIsEncodedAndLoggedWithoutTiming) {
  model_->infer = [](const InferenceRequest&) -> StatusOr<InferenceResponse> {
    return Internal("engine broke");
  };
  Run(Call(), &log_);
  EXPECT_EQ(script_->steps.back(), "send");
  EXPECT_TRUE(script_->answer.completed);
  const auto records = log_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, 500);
  EXPECT_EQ(records[0].error, "engine broke");
  EXPECT_EQ(records[0].response_bytes, 9u);
  EXPECT_EQ(records[0].total_ns, 0u);  // stage durations are a success's only
  EXPECT_FALSE(records[0].inputs.empty());
}

// A client that went away was sent nothing: its line has no response bytes, whatever the error
// body built for it (probe 41; nginx logs 0 for a 499).
TEST_F(InferenceFlowTest, ACancelledCallsLineHasNoResponseBytes) {
  model_->infer = [](const InferenceRequest&) -> StatusOr<InferenceResponse> {
    return Cancelled("the request was cancelled while queued");
  };
  Run(Call(), &log_);
  const auto records = log_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].error, "the request was cancelled while queued");
  EXPECT_EQ(records[0].response_bytes, 0u);
}

// Where each refusal counts: nowhere (the codec's check), under model="" (no version chosen),
// or in the version's statistics (once routed).
TEST_F(InferenceFlowTest, RefusalsAreCountedWhereTheyHappen) {
  struct Row {
    const char* what;
    std::function<void(InferenceCall*, Script*)> arrange;
    std::vector<std::string> steps;
    bool unrouted;
    bool on_version;
    std::string logged_model;
    int64_t logged_version;
  };
  const std::vector<Row> rows = {
      {"check", [](InferenceCall*, Script* s) { s->check = InvalidArgument("bad call"); },
       {"check", "refuse", "send"}, false, false, "m", 0},
      {"version", [](InferenceCall* c, Script*) { c->version = InvalidArgument("bad version"); },
       {"check", "refuse", "send"}, true, false, "m", 0},
      {"unknown model", [](InferenceCall* c, Script*) { c->model = "nope"; },
       {"check", "refuse", "send"}, true, false, "m", 0},
      {"decode", [](InferenceCall*, Script* s) { s->decode = InvalidArgument("bad body"); },
       {"check", "decode", "refuse", "send"}, false, true, "m", 3},
      {"prepare", [](InferenceCall*, Script* s) { s->prepare = InvalidArgument("bad field"); },
       {"check", "decode", "prepare", "refuse", "send"}, false, true, "m", 3},
      // Shared memory is off: an output naming a region is refused before Prepare.
      {"shared memory", [](InferenceCall*, Script* s) {
         RequestedOutput out;
         out.name = "y";
         out.parameters["shared_memory_region"] = std::string("r");
         out.parameters["shared_memory_byte_size"] = int64_t{8};
         s->outputs.push_back(out);
       },
       {"check", "decode", "refuse", "send"}, false, true, "m", 3},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    FakeModelManager models;
    auto model = models.AddReady("m", 3);
    auto script = std::make_shared<Script>();
    RecordingAccessLog log;
    InferenceCall call = Call();
    row.arrange(&call, script.get());
    InferenceFlow(&models, {.access_log = &log}).Run(std::move(call), FakeCodec(script));
    EXPECT_EQ(script->steps, row.steps);
    EXPECT_EQ(script->sends, 1);
    EXPECT_FALSE(script->answer.completed);
    EXPECT_EQ(script->answer.request_id, "rid-1");
    EXPECT_EQ(models.unrouted_failures.size(), row.unrouted ? 1u : 0u);
    EXPECT_EQ(model->recorded_failures.size(), row.on_version ? 1u : 0u);
    EXPECT_EQ(model->infer_calls, 0);
    const auto records = log.records();
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].status, 400);
    EXPECT_FALSE(records[0].error.empty());
    EXPECT_EQ(records[0].model, row.logged_model);
    EXPECT_EQ(records[0].version, row.logged_version);
    EXPECT_EQ(records[0].inputs, "");  // never handed to the model
    EXPECT_EQ(records[0].response_bytes, 7u);
    EXPECT_EQ(records[0].total_ns, 0u);
  }
}

TEST_F(InferenceFlowTest, UnroutedLineNamesWhatTheFrontEndSays) {
  InferenceCall call = Call();
  call.model = "nope";
  call.unrouted_log_model = "";  // REST's: no model until a version is chosen
  Run(std::move(call), &log_);
  const auto records = log_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].model, "");
  EXPECT_EQ(records[0].error, "unknown model 'nope'");
}

TEST_F(InferenceFlowTest, TracedCallGetsItsStagesAndTheServerSpan) {
  FakeTracer tracer;
  InferenceCall call = Call();
  call.trace = TracedRequest::Start(&tracer, kSampled, "");
  ASSERT_NE(call.trace, nullptr);
  const SpanContext server = call.trace->server();
  Run(std::move(call));
  // The model saw the server span; the codec got the trace to finish.
  ASSERT_NE(model_->last_request, nullptr);
  EXPECT_EQ(model_->last_request->trace.span_id, server.span_id);
  EXPECT_EQ(model_->last_request->trace.trace_id, server.trace_id);
  ASSERT_NE(script_->answer.trace, nullptr);
  RequestTrace& t = script_->answer.trace->record();
  EXPECT_EQ(t.model, "m");
  EXPECT_EQ(t.model_version, 3);
  EXPECT_NE(t.decoded, RequestTrace::TimePoint{});
  EXPECT_NE(t.batch_end, RequestTrace::TimePoint{});
  EXPECT_GE(t.encoded, t.batch_end);
  EXPECT_EQ(t.status, 200);
  EXPECT_EQ(t.response_bytes, 42u);
  script_->answer.trace.reset();  // the last holder: submitted now
  EXPECT_EQ(tracer.records().size(), 1u);
}

TEST_F(InferenceFlowTest, TracedRefusalEndsItsStagesAtTheRefusal) {
  FakeTracer tracer;
  InferenceCall call = Call();
  call.model = "nope";
  call.trace = TracedRequest::Start(&tracer, kSampled, "");
  Run(std::move(call));
  ASSERT_NE(script_->answer.trace, nullptr);
  RequestTrace& t = script_->answer.trace->record();
  EXPECT_NE(t.decoded, RequestTrace::TimePoint{});
  EXPECT_EQ(t.encoded, t.decoded);
  EXPECT_EQ(t.batch_end, RequestTrace::TimePoint{});  // never ran
  EXPECT_EQ(t.status, 400);
  EXPECT_EQ(t.error, "unknown model 'nope'");
  EXPECT_EQ(t.response_bytes, 7u);
  script_->answer.trace.reset();  // submitted while the tracer lives
}

TEST_F(InferenceFlowTest, UntracedAndUnloggedCallHasNoObservers) {
  Run(Call());
  EXPECT_EQ(script_->answer.trace, nullptr);
  ASSERT_NE(model_->last_request, nullptr);
  EXPECT_FALSE(model_->last_request->trace.valid());
  EXPECT_TRUE(script_->answer.completed);
}

TEST(InputShapesJsonTest, NamesDatatypesAndShapes) {
  Tensor a;
  a.name = "a";
  a.dtype = DataType::kInt64;
  a.shape = {2};
  Tensor b;
  b.name = "b\"";
  b.dtype = DataType::kBytes;
  b.shape = {1, 3};
  EXPECT_EQ(InputShapesJson({}), "[]");
  EXPECT_EQ(InputShapesJson({a, b}),
            R"([{"name":"a","datatype":"INT64","shape":[2]},)"
            R"({"name":"b\"","datatype":"BYTES","shape":[1,3]}])");
}

}  // namespace
}  // namespace harrier
