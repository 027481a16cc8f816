// GrpcServer with a Tracer: ModelInfer and each ModelStreamInfer request traced from the call's
// traceparent / tracestate metadata, the traceresponse initial metadata, and the record submitted
// once gRPC is done with the response.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "protocol/grpc/grpc_server.h"
#include "protocol/grpc/grpc_service.grpc.pb.h"
#include "util/fake_model_manager.h"
#include "util/fake_tracer.h"

namespace harrier::grpc_frontend {
namespace {

using inference::GRPCInferenceService;
using TimePoint = RequestTrace::TimePoint;

constexpr const char* kParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

class GrpcTracingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = models_.AddReady("echo", 1);
    model_->infer = [this](const InferenceRequest& request) {
      StatusOr<InferenceResponse> r = model_->Echo(request);
      r->timing.batch_start = std::chrono::steady_clock::now();
      r->timing.infer_start = std::chrono::steady_clock::now();
      r->timing.infer_end = std::chrono::steady_clock::now();
      r->timing.batch_size = 1;
      r->timing.batch_requests = 1;
      return r;
    };
    GrpcServer::Options options;
    options.address = "127.0.0.1";
    options.port = 0;
    options.handler.tracer = &tracer_;
    auto created = GrpcServer::Create(options, &models_);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    server_ = std::move(created).value();
    ASSERT_TRUE(server_->Start().ok());
    stub_ = GRPCInferenceService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { server_->Stop(std::chrono::milliseconds(0)); }

  static inference::ModelInferRequest EchoRequest(const std::string& model = "echo") {
    inference::ModelInferRequest r;
    r.set_model_name(model);
    r.set_id("id");
    auto* in = r.add_inputs();
    in->set_name("INPUT0");
    in->set_datatype("INT32");
    in->add_shape(1);
    in->add_shape(4);
    const int32_t values[4] = {1, 2, 3, 4};
    r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
    return r;
  }

  static std::string InitialMetadata(const grpc::ClientContext& context, const std::string& key) {
    auto it = context.GetServerInitialMetadata().find(key);
    if (it == context.GetServerInitialMetadata().end()) return "<absent>";
    return std::string(it->second.data(), it->second.size());
  }

  testing::FakeModelManager models_;
  std::shared_ptr<testing::FakeServableModel> model_;
  testing::FakeTracer tracer_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

TEST_F(GrpcTracingTest, ModelInferIsTracedFromItsMetadata) {
  grpc::ClientContext context;
  context.AddMetadata("traceparent", kParent);
  context.AddMetadata("tracestate", "vendor=x");
  context.AddMetadata("x-request-id", "req-7");
  inference::ModelInferResponse response;
  const grpc::Status s = stub_->ModelInfer(&context, EchoRequest(), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::vector<RequestTrace> records = tracer_.WaitForRecords(1);
  ASSERT_EQ(records.size(), 1u);
  const RequestTrace& t = records[0];
  EXPECT_EQ(FormatTraceparent(t.parent), kParent);
  EXPECT_EQ(t.tracestate, "vendor=x");
  EXPECT_EQ(t.server.trace_id, t.parent.trace_id);
  EXPECT_EQ(InitialMetadata(context, "traceresponse"), FormatTraceparent(t.server));
  EXPECT_EQ(FormatTraceparent(model_->last_request->trace), FormatTraceparent(t.server));
  EXPECT_EQ(t.name, "ModelInfer");
  EXPECT_EQ(t.protocol, "grpc");
  EXPECT_EQ(t.transport, "gRPC");
  EXPECT_EQ(t.target, "/inference.GRPCInferenceService/ModelInfer");
  EXPECT_EQ(t.request_id, "req-7");
  EXPECT_EQ(t.model, "echo");
  EXPECT_EQ(t.model_version, 1);
  EXPECT_EQ(t.status, 0);
  EXPECT_EQ(t.error, "");
  EXPECT_GT(t.request_bytes, 0u);
  EXPECT_EQ(t.response_bytes, response.ByteSizeLong());
  EXPECT_EQ(t.received, t.body_received);  // gRPC hands the message over whole
  const std::vector<std::pair<const char*, TimePoint>> stages = {
      {"received", t.received},       {"decoded", t.decoded},
      {"batch_start", t.batch_start}, {"infer_start", t.infer_start},
      {"infer_end", t.infer_end},     {"batch_end", t.batch_end},
      {"encoded", t.encoded},         {"sent", t.sent}};
  for (size_t i = 0; i < stages.size(); ++i) {
    EXPECT_NE(stages[i].second, TimePoint{}) << stages[i].first;
    if (i > 0) {
      EXPECT_LE(stages[i - 1].second, stages[i].second) << stages[i].first;
    }
  }
}

TEST_F(GrpcTracingTest, ARefusedModelInferIsTracedWithItsCode) {
  grpc::ClientContext context;
  context.AddMetadata("traceparent", kParent);
  inference::ModelInferResponse response;
  const grpc::Status s = stub_->ModelInfer(&context, EchoRequest("nope"), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  const std::vector<RequestTrace> records = tracer_.WaitForRecords(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(records[0].error, "");
  EXPECT_EQ(records[0].batch_start, TimePoint{});
  EXPECT_NE(records[0].encoded, TimePoint{});
  EXPECT_NE(InitialMetadata(context, "traceresponse"), "<absent>");
}

TEST_F(GrpcTracingTest, AnUntracedCallHasNoRecordAndNoTraceresponse) {
  tracer_.sample = false;
  grpc::ClientContext context;
  inference::ModelInferResponse response;
  ASSERT_TRUE(stub_->ModelInfer(&context, EchoRequest(), &response).ok());
  grpc::ClientContext unsampled;  // a parent that was not sampled
  unsampled.AddMetadata("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
  ASSERT_TRUE(stub_->ModelInfer(&unsampled, EchoRequest(), &response).ok());
  EXPECT_EQ(InitialMetadata(context, "traceresponse"), "<absent>");
  EXPECT_EQ(InitialMetadata(unsampled, "traceresponse"), "<absent>");
  EXPECT_EQ(tracer_.starts(), 2);
  // Nothing is submitted later either: the server is stopped (every call done) before looking.
  server_->Stop(std::chrono::milliseconds(0));
  EXPECT_TRUE(tracer_.records().empty());
}

TEST_F(GrpcTracingTest, EachStreamRequestIsTracedOnItsOwn) {
  grpc::ClientContext context;
  context.AddMetadata("traceparent", kParent);
  auto stream = stub_->ModelStreamInfer(&context);
  ASSERT_TRUE(stream->Write(EchoRequest()));
  ASSERT_TRUE(stream->Write(EchoRequest("nope")));
  ASSERT_TRUE(stream->Write(EchoRequest()));
  stream->WritesDone();
  inference::ModelStreamInferResponse r;
  int answers = 0;
  while (stream->Read(&r)) ++answers;
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answers, 3);
  const std::vector<RequestTrace> records = tracer_.WaitForRecords(3);
  ASSERT_EQ(records.size(), 3u);
  std::set<std::string> spans;
  int failed = 0;
  for (const RequestTrace& t : records) {
    EXPECT_EQ(t.name, "ModelStreamInfer");
    EXPECT_EQ(t.target, "/inference.GRPCInferenceService/ModelStreamInfer");
    EXPECT_EQ(FormatTraceparent(t.parent), kParent);
    EXPECT_NE(t.sent, TimePoint{});  // its response's write completed
    EXPECT_LE(t.encoded, t.sent);
    spans.insert(FormatTraceparent(t.server));
    failed += t.status == grpc::StatusCode::NOT_FOUND;
  }
  EXPECT_EQ(spans.size(), 3u);
  EXPECT_EQ(failed, 1);
}

}  // namespace
}  // namespace harrier::grpc_frontend
