// GrpcServer end to end in one process: the real grpc++ server on port 0 over the fake
// ModelManager, called through the generated C++ stub (Harrier's own gRPC client) — every RPC,
// status codes, the stream, the message size limit.
#include "protocol/grpc/grpc_server.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "protocol/grpc/grpc_service.grpc.pb.h"
#include "protocol/kserve/scheduling_fields.h"
#include "util/fake_model_manager.h"
#include "util/recording_access_log.h"

namespace harrier::grpc_frontend {
namespace {

using ::harrier::testing::RecordingAccessLog;
using inference::GRPCInferenceService;

class GrpcServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = models_.AddReady("echo", 1);
    model_->config_json = R"({"name":"echo","platform":"onnxruntime_onnx","max_batch_size":8,)"
                          R"("input":[{"name":"INPUT0","data_type":"TYPE_INT32","dims":[4]}]})";
    models_.AddState("broken", 1, ModelState::kUnavailable, "bad file");
    models_.metadata["echo"].platform = "onnxruntime_onnx";
    models_.metadata["echo"].inputs.push_back({"INPUT0", DataType::kInt32, {-1, 4}});
    ModelVersionStats stats;
    stats.inference_count = 5;
    stats.success = {5, 1000};
    stats.batch_stats.push_back({1, {5, 10}, {5, 20}, {5, 30}});
    models_.stats[{"echo", 1}] = stats;
    StartServer(GrpcServer::Options{});
  }

  void StartServer(GrpcServer::Options options) {
    if (server_) server_->Stop(std::chrono::milliseconds(0));
    options.address = "127.0.0.1";
    options.port = 0;
    options.handler.server_version = "1.2.3";
    auto created = GrpcServer::Create(options, &models_);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    server_ = std::move(created).value();
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_NE(server_->port(), 0);
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(-1);
    stub_ = GRPCInferenceService::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials(), args));
  }

  void TearDown() override { server_->Stop(std::chrono::milliseconds(0)); }

  static inference::ModelInferRequest EchoRequest(int32_t base) {
    inference::ModelInferRequest r;
    r.set_model_name("echo");
    r.set_id("id-" + std::to_string(base));
    auto* in = r.add_inputs();
    in->set_name("INPUT0");
    in->set_datatype("INT32");
    in->add_shape(1);
    in->add_shape(4);
    int32_t values[4] = {base, base + 1, base + 2, base + 3};
    r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
    return r;
  }

  testing::FakeModelManager models_;
  std::shared_ptr<testing::FakeServableModel> model_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

TEST_F(GrpcServerTest, HealthAndMetadata) {
  grpc::ClientContext c1, c2, c3, c4;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub_->ServerLive(&c1, {}, &live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  models_.all_ready = false;
  ASSERT_TRUE(stub_->ServerReady(&c2, {}, &ready).ok());
  EXPECT_FALSE(ready.ready());
  inference::ServerMetadataResponse md;
  ASSERT_TRUE(stub_->ServerMetadata(&c3, {}, &md).ok());
  EXPECT_EQ(md.name(), "harrier");
  EXPECT_EQ(md.version(), "1.2.3");
  EXPECT_GE(md.extensions_size(), 4);
  inference::ModelMetadataRequest mreq;
  mreq.set_name("echo");
  inference::ModelMetadataResponse mmd;
  ASSERT_TRUE(stub_->ModelMetadata(&c4, mreq, &mmd).ok());
  EXPECT_EQ(mmd.platform(), "onnxruntime_onnx");
  ASSERT_EQ(mmd.inputs_size(), 1);
  EXPECT_EQ(mmd.inputs(0).datatype(), "INT32");
  EXPECT_EQ(mmd.inputs(0).shape(0), -1);
  EXPECT_EQ(mmd.versions(0), "1");
}

// A shutdown's drain (docs/deployment.md): ServerReady turns false while ServerLive and
// inference are answered as before.
TEST_F(GrpcServerTest, ServerReadyIsFalseWhileDrainingAndInferenceIsServed) {
  struct Draining : ServerReadiness {
    bool draining() const override { return on.load(); }
    std::atomic<bool> on{false};  // read on the server's I/O thread
  } readiness;
  GrpcServer::Options options;
  options.handler.readiness = &readiness;
  StartServer(options);
  auto ready = [&] {
    grpc::ClientContext context;
    inference::ServerReadyResponse response;
    EXPECT_TRUE(stub_->ServerReady(&context, {}, &response).ok());
    return response.ready();
  };
  EXPECT_TRUE(ready());
  readiness.on = true;
  EXPECT_FALSE(ready());
  grpc::ClientContext live_context;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub_->ServerLive(&live_context, {}, &live).ok());
  EXPECT_TRUE(live.live());
  grpc::ClientContext infer_context;
  inference::ModelInferResponse answer;
  grpc::Status status = stub_->ModelInfer(&infer_context, EchoRequest(7), &answer);
  EXPECT_TRUE(status.ok()) << status.error_message();
  server_->Stop(std::chrono::milliseconds(0));  // no call reads `readiness` once it is gone
}
// Triton's logging extension over gRPC: the same settings and rules as GET/POST /v2/logging.
TEST_F(GrpcServerTest, LogSettingsReadAndChangeTheLogControlsSettings) {
  struct RecordingLogControl : LogControl {
    LogSettings Get() const override { return settings; }
    Status Set(const LogSettings& s) override {
      ++sets;
      if (s.log_format != settings.log_format) return InvalidArgument("log_format is fixed");
      settings = s;
      return Status::Ok();
    }
    LogSettings settings;
    int sets = 0;
  } control;
  GrpcServer::Options options;
  options.handler.log_control = &control;
  StartServer(options);
  using Request = inference::LogSettingsRequest;
  auto call = [&](const Request& request, inference::LogSettingsResponse* response) {
    grpc::ClientContext context;
    return stub_->LogSettings(&context, request, response);
  };

  inference::LogSettingsResponse read;
  ASSERT_TRUE(call(Request(), &read).ok());
  EXPECT_EQ(control.sets, 0);  // nothing asked: nothing set
  ASSERT_EQ(read.settings().size(), 6u);
  EXPECT_TRUE(read.settings().at("log_info").bool_param());
  EXPECT_EQ(read.settings().at("log_verbose_level").uint32_param(), 0u);
  EXPECT_EQ(read.settings().at("log_format").string_param(), "text");
  EXPECT_EQ(read.settings().at("log_file").string_param(), "");

  Request change;
  (*change.mutable_settings())["log_verbose_level"].set_uint32_param(2);
  (*change.mutable_settings())["log_info"].set_bool_param(true);
  inference::LogSettingsResponse changed;
  ASSERT_TRUE(call(change, &changed).ok());
  EXPECT_EQ(control.settings.log_verbose_level, 2);
  EXPECT_EQ(changed.settings().at("log_verbose_level").uint32_param(), 2u);

  // Refusals change nothing: a wrong type, an unknown name, what the control refuses.
  for (auto fill : std::vector<std::function<void(Request*)>>{
           [](Request* r) { (*r->mutable_settings())["log_info"].set_string_param("yes"); },
           [](Request* r) { (*r->mutable_settings())["log_colour"].set_bool_param(true); },
           [](Request* r) { (*r->mutable_settings())["log_format"].set_string_param("json"); }}) {
    Request bad;
    fill(&bad);
    inference::LogSettingsResponse response;
    const grpc::Status status = call(bad, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_EQ(control.settings.log_verbose_level, 2);
    EXPECT_EQ(control.settings.log_format, "text");
  }
}

TEST_F(GrpcServerTest, ModelReadyStates) {
  struct Row {
    const char* name;
    const char* version;
    grpc::StatusCode code;
    bool ready;
  };
  const Row rows[] = {
      {"echo", "", grpc::StatusCode::OK, true},
      {"echo", "1", grpc::StatusCode::OK, true},
      {"broken", "", grpc::StatusCode::OK, false},
      {"nope", "", grpc::StatusCode::NOT_FOUND, false},
      {"echo", "2", grpc::StatusCode::NOT_FOUND, false},
      {"echo", "x", grpc::StatusCode::INVALID_ARGUMENT, false},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(std::string(r.name) + " " + r.version);
    grpc::ClientContext context;
    inference::ModelReadyRequest req;
    req.set_name(r.name);
    req.set_version(r.version);
    inference::ModelReadyResponse resp;
    grpc::Status s = stub_->ModelReady(&context, req, &resp);
    EXPECT_EQ(s.error_code(), r.code) << s.error_message();
    EXPECT_EQ(resp.ready(), r.ready);
  }
}

TEST_F(GrpcServerTest, ConfigStatisticsIndexAndModelControl) {
  {
    grpc::ClientContext context;
    inference::ModelConfigRequest req;
    req.set_name("echo");
    inference::ModelConfigResponse resp;
    ASSERT_TRUE(stub_->ModelConfig(&context, req, &resp).ok());
    EXPECT_EQ(resp.config().name(), "echo");
    EXPECT_EQ(resp.config().max_batch_size(), 8);
    ASSERT_EQ(resp.config().input_size(), 1);
    EXPECT_EQ(resp.config().input(0).data_type(), inference::TYPE_INT32);
    EXPECT_EQ(resp.config().input(0).dims(0), 4);
  }
  {
    grpc::ClientContext context;
    inference::ModelStatisticsRequest req;
    req.set_name("echo");
    inference::ModelStatisticsResponse resp;
    ASSERT_TRUE(stub_->ModelStatistics(&context, req, &resp).ok());
    ASSERT_EQ(resp.model_stats_size(), 1);
    EXPECT_EQ(resp.model_stats(0).version(), "1");
    EXPECT_EQ(resp.model_stats(0).inference_count(), 5u);
    EXPECT_EQ(resp.model_stats(0).inference_stats().success().ns(), 1000u);
    ASSERT_EQ(resp.model_stats(0).batch_stats_size(), 1);
    EXPECT_EQ(resp.model_stats(0).batch_stats(0).compute_output().ns(), 30u);
  }
  {
    grpc::ClientContext context;
    inference::ModelStatisticsRequest req;
    req.set_name("nope");
    inference::ModelStatisticsResponse resp;
    EXPECT_EQ(stub_->ModelStatistics(&context, req, &resp).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext context;
    inference::RepositoryIndexResponse resp;
    ASSERT_TRUE(stub_->RepositoryIndex(&context, {}, &resp).ok());
    ASSERT_EQ(resp.models_size(), 2);
    EXPECT_EQ(resp.models(0).name(), "broken");
    EXPECT_EQ(resp.models(0).state(), "UNAVAILABLE");
    EXPECT_EQ(resp.models(0).reason(), "bad file");
    EXPECT_EQ(resp.models(1).state(), "READY");
  }
  {
    grpc::ClientContext context;
    inference::RepositoryIndexRequest req;
    req.set_ready(true);
    inference::RepositoryIndexResponse resp;
    ASSERT_TRUE(stub_->RepositoryIndex(&context, req, &resp).ok());
    ASSERT_EQ(resp.models_size(), 1);
    EXPECT_EQ(resp.models(0).name(), "echo");
  }
  {
    grpc::ClientContext context;
    inference::RepositoryModelLoadRequest req;
    req.set_model_name("echo");
    inference::RepositoryModelLoadResponse resp;
    grpc::Status s = stub_->RepositoryModelLoad(&context, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_NE(s.error_message().find("not supported"), std::string::npos);
  }
  {
    grpc::ClientContext context;
    inference::RepositoryModelUnloadRequest req;
    inference::RepositoryModelUnloadResponse resp;
    EXPECT_EQ(stub_->RepositoryModelUnload(&context, req, &resp).error_code(),
              grpc::StatusCode::UNIMPLEMENTED);
  }
  // With model control: the calls reach the manager, the config override with them.
  models_.model_control = true;
  {
    grpc::ClientContext context;
    inference::RepositoryModelLoadRequest req;
    req.set_model_name("echo");
    (*req.mutable_parameters())["config"].set_string_param(R"({"max_batch_size":2})");
    inference::RepositoryModelLoadResponse resp;
    grpc::Status s = stub_->RepositoryModelLoad(&context, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(models_.loads.size(), 1u);
    EXPECT_EQ(models_.loads[0].second, std::optional<std::string>(R"({"max_batch_size":2})"));
  }
  {
    grpc::ClientContext context;
    inference::RepositoryModelLoadRequest req;
    req.set_model_name("echo");
    (*req.mutable_parameters())["config"].set_string_param("{}");
    (*req.mutable_parameters())["file:1/model.onnx"].set_bytes_param(std::string("\0x", 2));
    inference::RepositoryModelLoadResponse resp;
    grpc::Status s = stub_->RepositoryModelLoad(&context, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(models_.load_files.size(), 2u);  // Triton's file override: a bytes_param
    ASSERT_EQ(models_.load_files[1].size(), 1u);
    EXPECT_EQ(models_.load_files[1][0].path, "1/model.onnx");
    EXPECT_EQ(models_.load_files[1][0].content, std::string("\0x", 2));
  }
  {
    grpc::ClientContext context;
    inference::RepositoryModelLoadRequest req;
    req.set_model_name("echo");
    (*req.mutable_parameters())["config"].set_bytes_param("{}");  // the wrong type: said so
    inference::RepositoryModelLoadResponse resp;
    grpc::Status s = stub_->RepositoryModelLoad(&context, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("'config' must be a string_param"), std::string::npos)
        << s.error_message();
  }
  {
    grpc::ClientContext context;
    inference::RepositoryModelLoadRequest req;
    req.set_model_name("echo");
    (*req.mutable_parameters())["file:1/model.onnx"].set_string_param("x");
    inference::RepositoryModelLoadResponse resp;
    grpc::Status s = stub_->RepositoryModelLoad(&context, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("must be a bytes_param"), std::string::npos);
    EXPECT_EQ(models_.loads.size(), 2u);
  }
  {
    grpc::ClientContext context;
    inference::RepositoryModelUnloadRequest req;
    req.set_model_name("echo");
    (*req.mutable_parameters())["unload_dependents"].set_bool_param(true);
    inference::RepositoryModelUnloadResponse resp;
    EXPECT_TRUE(stub_->RepositoryModelUnload(&context, req, &resp).ok());
    EXPECT_EQ(models_.unloads.size(), 1u);
  }
  {  // a known parameter of the wrong type is named as such, not as unknown
    grpc::ClientContext context;
    inference::RepositoryModelUnloadRequest req;
    req.set_model_name("echo");
    (*req.mutable_parameters())["unload_dependents"].set_string_param("yes");
    inference::RepositoryModelUnloadResponse resp;
    grpc::Status s = stub_->RepositoryModelUnload(&context, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("'unload_dependents' must be a bool_param"), std::string::npos)
        << s.error_message();
    EXPECT_EQ(models_.unloads.size(), 1u);
  }
}

TEST_F(GrpcServerTest, ModelInferPassesCallFieldsAndAnswersRaw) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  context.AddMetadata("x-client-id", "tenant-a");
  inference::ModelInferResponse resp;
  const auto before = std::chrono::steady_clock::now();
  grpc::Status s = stub_->ModelInfer(&context, EchoRequest(10), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.model_name(), "echo");
  EXPECT_EQ(resp.model_version(), "1");
  EXPECT_EQ(resp.id(), "id-10");
  ASSERT_EQ(resp.raw_output_contents_size(), 1);
  int32_t out[4];
  ASSERT_EQ(resp.raw_output_contents(0).size(), sizeof(out));
  std::memcpy(out, resp.raw_output_contents(0).data(), sizeof(out));
  EXPECT_EQ(out[3], 13);

  const InferenceRequest& seen = *model_->last_request;
  EXPECT_EQ(seen.client_id, "tenant-a");
  ASSERT_NE(seen.cancellation, nullptr);
  EXPECT_FALSE(seen.cancellation->cancelled());
  // grpc-timeout became the request's deadline: about 30 s after it was received.
  EXPECT_GT(seen.deadline, before + std::chrono::seconds(25));
  EXPECT_LT(seen.deadline, before + std::chrono::seconds(31));
}

std::string InitialMetadata(const grpc::ClientContext& context, const std::string& key) {
  auto it = context.GetServerInitialMetadata().find(key);
  if (it == context.GetServerInitialMetadata().end()) return "<absent>";
  return std::string(it->second.data(), it->second.size());
}

TEST_F(GrpcServerTest, RequestIdIsEchoedOrGeneratedAsInitialMetadata) {
  inference::ModelInferResponse resp;
  grpc::ClientContext sent;
  sent.AddMetadata("x-request-id", "grpc-req-1");
  ASSERT_TRUE(stub_->ModelInfer(&sent, EchoRequest(1), &resp).ok());
  EXPECT_EQ(InitialMetadata(sent, "x-request-id"), "grpc-req-1");

  grpc::ClientContext none;
  ASSERT_TRUE(stub_->ModelInfer(&none, EchoRequest(1), &resp).ok());
  const std::string generated = InitialMetadata(none, "x-request-id");
  EXPECT_EQ(generated.size(), 15u) << generated;
  EXPECT_EQ(generated[6], '-') << generated;

  // An error, and another RPC, carry it too.
  grpc::ClientContext error;
  error.AddMetadata("x-request-id", "grpc-req-2");
  inference::ModelInferRequest unknown = EchoRequest(1);
  unknown.set_model_name("nope");
  EXPECT_EQ(stub_->ModelInfer(&error, unknown, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(InitialMetadata(error, "x-request-id"), "grpc-req-2");
  grpc::ClientContext live;
  live.AddMetadata("x-request-id", "grpc-req-3");
  inference::ServerLiveResponse live_response;
  ASSERT_TRUE(stub_->ServerLive(&live, inference::ServerLiveRequest(), &live_response).ok());
  EXPECT_EQ(InitialMetadata(live, "x-request-id"), "grpc-req-3");
}

TEST_F(GrpcServerTest, ModelInferIsAccessLogged) {
  RecordingAccessLog access_log;
  GrpcServer::Options options;
  options.handler.access_log = &access_log;
  StartServer(options);
  model_->infer = [this](const InferenceRequest& request) {
    StatusOr<InferenceResponse> r = model_->Echo(request);
    r->timing.queue_ns = 1'000;
    r->timing.compute_input_ns = 2'000;
    r->timing.compute_infer_ns = 30'000;
    return r;
  };
  grpc::ClientContext ok_context;
  ok_context.AddMetadata("x-request-id", "grpc-log-1");
  const inference::ModelInferRequest request = EchoRequest(5);
  inference::ModelInferResponse resp;
  ASSERT_TRUE(stub_->ModelInfer(&ok_context, request, &resp).ok());
  const size_t response_size = resp.ByteSizeLong();
  grpc::ClientContext bad_context;
  inference::ModelInferRequest unknown = EchoRequest(1);
  unknown.set_model_name("nope");
  EXPECT_FALSE(stub_->ModelInfer(&bad_context, unknown, &resp).ok());

  ASSERT_EQ(access_log.records().size(), 2u);
  const RecordingAccessLog::Copy a = access_log.records()[0];
  EXPECT_EQ(a.request_id, "grpc-log-1");
  EXPECT_EQ(a.protocol, "grpc");
  EXPECT_EQ(a.method, "ModelInfer");
  EXPECT_EQ(a.target, "/inference.GRPCInferenceService/ModelInfer");
  EXPECT_EQ(a.status, 0);  // gRPC OK
  EXPECT_EQ(a.model, "echo");
  EXPECT_EQ(a.version, 1);
  EXPECT_EQ(a.inputs, R"([{"name":"INPUT0","datatype":"INT32","shape":[1,4]}])");
  EXPECT_EQ(a.request_bytes, request.ByteSizeLong());
  EXPECT_EQ(a.response_bytes, response_size);
  EXPECT_GT(a.response_bytes, 0u);
  EXPECT_EQ(a.timing.compute_infer_ns, 30'000u);
  EXPECT_GT(a.total_ns, 0u);
  const RecordingAccessLog::Copy b = access_log.records()[1];
  EXPECT_EQ(b.status, static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_NE(b.error.find("nope"), std::string::npos) << b.error;
  EXPECT_EQ(b.request_id.size(), 15u);  // generated
  EXPECT_EQ(b.total_ns, 0u);
}

TEST_F(GrpcServerTest, ModelInferErrorsMapToGrpcCodes) {
  struct Row {
    Status status;
    grpc::StatusCode code;
  };
  const Row rows[] = {
      {InvalidArgument("bad"), grpc::StatusCode::INVALID_ARGUMENT},
      {ResourceExhausted("queue full; retry after 3 s"), grpc::StatusCode::RESOURCE_EXHAUSTED},
      {Unavailable("stopping"), grpc::StatusCode::UNAVAILABLE},
      {DeadlineExceeded("late"), grpc::StatusCode::DEADLINE_EXCEEDED},
      {Cancelled("gone"), grpc::StatusCode::CANCELLED},
      {Internal("bug"), grpc::StatusCode::INTERNAL},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.status.ToString());
    model_->infer = [&](const InferenceRequest&) -> StatusOr<InferenceResponse> {
      return r.status;
    };
    grpc::ClientContext context;
    inference::ModelInferResponse resp;
    grpc::Status s = stub_->ModelInfer(&context, EchoRequest(1), &resp);
    EXPECT_EQ(s.error_code(), r.code);
    EXPECT_EQ(s.error_message(), r.status.message());
    if (r.code == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      auto it = context.GetServerTrailingMetadata().find("retry-after");
      ASSERT_NE(it, context.GetServerTrailingMetadata().end());
      EXPECT_EQ(std::string(it->second.data(), it->second.size()), "3");
    }
  }
  model_->infer = nullptr;
  grpc::ClientContext context;
  inference::ModelInferRequest unknown = EchoRequest(1);
  unknown.set_model_name("nope");
  inference::ModelInferResponse resp;
  EXPECT_EQ(stub_->ModelInfer(&context, unknown, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  // Counted for the metrics as over REST: an unknown model under no model, a request that does
  // not decode under its version.
  EXPECT_EQ(models_.unrouted_failures, std::vector<StatusCode>{StatusCode::kNotFound});
  model_->recorded_failures.clear();
  grpc::ClientContext context2;
  inference::ModelInferRequest short_raw = EchoRequest(1);
  short_raw.mutable_raw_input_contents(0)->resize(3);
  EXPECT_EQ(stub_->ModelInfer(&context2, short_raw, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(model_->recorded_failures, std::vector<StatusCode>{StatusCode::kInvalidArgument});
  // A version that is not a number is unrouted; an x-client-id over the limit is counted nowhere.
  models_.unrouted_failures.clear();
  model_->recorded_failures.clear();
  grpc::ClientContext context3;
  inference::ModelInferRequest bad_version = EchoRequest(1);
  bad_version.set_model_version("one");
  EXPECT_EQ(stub_->ModelInfer(&context3, bad_version, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(models_.unrouted_failures, std::vector<StatusCode>{StatusCode::kInvalidArgument});
  grpc::ClientContext context4;
  context4.AddMetadata("x-client-id", std::string(kserve::kMaxClientIdBytes + 1, 'c'));
  grpc::Status long_id = stub_->ModelInfer(&context4, EchoRequest(1), &resp);
  EXPECT_EQ(long_id.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(long_id.error_message().find("x-client-id is longer than"), std::string::npos);
  EXPECT_EQ(models_.unrouted_failures.size(), 1u);
  EXPECT_TRUE(model_->recorded_failures.empty());
}

TEST_F(GrpcServerTest, MessagesOverTheLimitAreRefused) {
  GrpcServer::Options options;
  options.max_receive_message_bytes = 1024;
  StartServer(options);
  inference::ModelInferRequest big = EchoRequest(1);
  big.mutable_inputs(0)->set_shape(1, 1024);
  big.set_raw_input_contents(0, std::string(4096, '\0'));
  grpc::ClientContext context;
  inference::ModelInferResponse resp;
  const grpc::Status refused = stub_->ModelInfer(&context, big, &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // In gRPC's words and with the limit the server was given, as a stream's message over it is
  // told (not the REST refusal, naming "Request JSON" and the HTTP layer's limit, 5 bytes more).
  EXPECT_EQ(refused.error_message(), "received message larger than max (1024 bytes)");
  grpc::ClientContext again;
  EXPECT_TRUE(stub_->ModelInfer(&again, EchoRequest(1), &resp).ok());
}

// The transport's refusals become a grpc-status for gRPC's clients (HTTP/2); an HTTP/1.1 client
// of this port gets its HTTP status and a JSON error it can read, not a grpc-status under a 200.
TEST_F(GrpcServerTest, AnHttp11RequestTheTransportRefusesGetsItsHttpStatus) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string bad =
      "POST /inference.GRPCInferenceService/ModelInfer HTTP/1.1\r\nHost: t\r\n"
      "Content-Length: twelve\r\n\r\n";
  ASSERT_EQ(::send(fd, bad.data(), bad.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bad.size()));
  std::string answer;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) answer.append(buf, n);
  ::close(fd);
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 400")) << answer;
  EXPECT_NE(answer.find("{\"error\":"), std::string::npos) << answer;
  EXPECT_EQ(answer.find("grpc-status"), std::string::npos) << answer;
}

TEST_F(GrpcServerTest, StreamAnswersEveryRequestAndCarriesErrorsInBand) {
  grpc::ClientContext context;
  auto stream = stub_->ModelStreamInfer(&context);
  constexpr int kRequests = 200;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(stream->Write(EchoRequest(i)));
    if (i == 100) {
      inference::ModelInferRequest bad = EchoRequest(i);
      bad.set_id("bad");
      bad.set_model_name("nope");
      ASSERT_TRUE(stream->Write(bad));
    }
  }
  stream->WritesDone();
  inference::ModelStreamInferResponse r;
  int good = 0, errors = 0;
  while (stream->Read(&r)) {
    if (!r.error_message().empty()) {
      ++errors;
      EXPECT_EQ(r.infer_response().id(), "bad");
      EXPECT_NE(r.error_message().find("unknown model"), std::string::npos);
      continue;
    }
    const int i = std::stoi(r.infer_response().id().substr(3));
    int32_t first;
    std::memcpy(&first, r.infer_response().raw_output_contents(0).data(), 4);
    EXPECT_EQ(first, i);
    ++good;
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(good, kRequests);
  EXPECT_EQ(errors, 1);
}

TEST_F(GrpcServerTest, BusyPortIsAnError) {
  GrpcServer::Options options;
  options.address = "127.0.0.1";
  options.port = server_->port();
  auto second = GrpcServer::Create(options, &models_);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)->Start().code(), StatusCode::kUnavailable);
}

TEST(GrpcServerCreateTest, TlsOptionsAreChecked) {
  testing::FakeModelManager models;
  GrpcServer::Options key_only;
  key_only.tls_key_file = "/nonexistent/key.pem";
  EXPECT_EQ(GrpcServer::Create(key_only, &models).status().code(), StatusCode::kInvalidArgument);
  GrpcServer::Options ca_only;
  ca_only.tls_client_ca_file = "/nonexistent/ca.pem";
  EXPECT_EQ(GrpcServer::Create(ca_only, &models).status().code(), StatusCode::kInvalidArgument);
  GrpcServer::Options unreadable;
  unreadable.tls_cert_file = "/nonexistent/cert.pem";
  unreadable.tls_key_file = "/nonexistent/key.pem";
  EXPECT_EQ(GrpcServer::Create(unreadable, &models).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace harrier::grpc_frontend
