#include "protocol/kserve/kserve_handler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "util/fake_model_manager.h"
#include "util/shm_object.h"

namespace harrier::kserve {
namespace {

using ::harrier::testing::FakeModelManager;
using ::harrier::testing::FakeServableModel;
using ::testing::HasSubstr;

std::string HeaderOf(const HttpResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return std::string(v);
  return "";
}

class KServeHandlerTest : public ::testing::Test {
 protected:
  KServeHandlerTest() {
    simple_ = models_.AddReady("simple", 1);
    simple_v2_ = models_.AddReady("simple", 2, /*max_batch_size=*/4);
    models_.AddState("broken", 1, ModelState::kUnavailable, "model.onnx: bad file");
    models_.AddState("loading", 1, ModelState::kLoading);
    models_.AddReady("my model", 1);
    ModelMetadata md;
    md.platform = "onnxruntime_onnx";
    md.versions = {"1", "2"};
    md.inputs = {{"INPUT0", DataType::kFp32, {-1, 16}}};
    md.outputs = {{"OUTPUT0", DataType::kFp32, {-1, 16}}};
    models_.metadata["simple"] = md;
    ModelVersionStats s;
    s.inference_count = 5;
    s.execution_count = 4;
    s.last_inference_ms = 1700000000000;
    s.success = {5, 1000};
    s.queue = {5, 200};
    models_.stats[{"simple", 2}] = s;
    KServeHandler::Options options;
    options.server_version = "1.2.3";
    handler_ = std::make_unique<KServeHandler>(&models_, options);
  }

  HttpResponse Call(std::string method, std::string target, std::string body = "",
                    std::vector<std::pair<std::string, std::string>> headers = {}) {
    HttpRequest request;
    request.method = std::move(method);
    request.target = std::move(target);
    request.headers = std::move(headers);
    request.body = std::make_shared<const std::string>(std::move(body));
    std::optional<HttpResponse> response;
    int calls = 0;
    handler_->Handle(std::move(request), [&](HttpResponse r) {
      ++calls;
      response = std::move(r);
    });
    EXPECT_EQ(calls, 1);
    return response.value_or(HttpResponse{});
  }

  // Expects an error response: status, JSON {"error": ...} containing `fragment`.
  void ExpectError(const HttpResponse& r, int status, const std::string& fragment) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_EQ(HeaderOf(r, "Content-Type"), "application/json");
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    ASSERT_FALSE(parser.parse(simdjson::padded_string(r.body)).get(doc)) << r.body;
    std::string_view message;
    ASSERT_FALSE(doc["error"].get_string().get(message)) << r.body;
    EXPECT_THAT(std::string(message), HasSubstr(fragment));
  }

  FakeModelManager models_;
  std::shared_ptr<FakeServableModel> simple_, simple_v2_;
  std::unique_ptr<KServeHandler> handler_;
};

TEST_F(KServeHandlerTest, Health) {
  HttpResponse live = Call("GET", "/v2/health/live");
  EXPECT_EQ(live.status, 200);
  EXPECT_TRUE(live.body.empty());
  EXPECT_EQ(Call("GET", "/v2/health/ready").status, 200);
  models_.all_ready = false;
  ExpectError(Call("GET", "/v2/health/ready"), 503, "not ready");
}

// A shutdown's drain (docs/deployment.md): readiness turns 503 while liveness, metadata and
// inference are answered as before, so that load balancers stop sending before the listeners go.
TEST_F(KServeHandlerTest, ReadinessIs503WhileDrainingAndTheRestIsServed) {
  struct Draining : ServerReadiness {
    bool draining() const override { return on; }
    bool on = false;
  } readiness;
  KServeHandler::Options options;
  options.readiness = &readiness;
  handler_ = std::make_unique<KServeHandler>(&models_, options);
  EXPECT_EQ(Call("GET", "/v2/health/ready").status, 200);
  readiness.on = true;
  ExpectError(Call("GET", "/v2/health/ready"), 503, "shutting down");
  EXPECT_EQ(Call("GET", "/v2/health/live").status, 200);
  EXPECT_EQ(Call("GET", "/v2/models/simple/ready").status, 200);
  EXPECT_EQ(Call("GET", "/v2/models/simple").status, 200);
  HttpResponse infer =
      Call("POST", "/v2/models/simple/versions/1/infer",
           R"({"inputs":[{"name":"INPUT0","shape":[1,2],"datatype":"FP32","data":[1,2]}]})");
  EXPECT_EQ(infer.status, 200) << infer.body;
}

TEST_F(KServeHandlerTest, ServerMetadata) {
  HttpResponse r = Call("GET", "/v2");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(HeaderOf(r, "Content-Type"), "application/json");
  EXPECT_EQ(r.body, R"({"name":"harrier","version":"1.2.3","extensions":["binary_tensor_data",)"
                    R"("classification","model_configuration","statistics","model_repository",)"
                    R"js("model_repository(unload_dependents)"]})js");
}

TEST_F(KServeHandlerTest, ModelMetadata) {
  HttpResponse r = Call("GET", "/v2/models/simple");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"name":"simple","versions":["1","2"],"platform":"onnxruntime_onnx",)"
                    R"("inputs":[{"name":"INPUT0","datatype":"FP32","shape":[-1,16]}],)"
                    R"("outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[-1,16]}]})");
  EXPECT_EQ(Call("GET", "/v2/models/simple/versions/1").status, 200);
  ExpectError(Call("GET", "/v2/models/nope"), 404, "unknown model 'nope'");
  ExpectError(Call("GET", "/v2/models/simple/versions/9"), 404, "version 9");
  ExpectError(Call("GET", "/v2/models/broken"), 503, "model.onnx: bad file");
}

TEST_F(KServeHandlerTest, VersionsMustBePositiveIntegers) {
  for (const char* v : {"0", "-1", "abc", "1.5", "", "+1", "99999999999999999999"}) {
    ExpectError(Call("GET", std::string("/v2/models/simple/versions/") + v + "/ready"), 400,
                "must be a positive integer");
  }
}

TEST_F(KServeHandlerTest, ModelReady) {
  EXPECT_EQ(Call("GET", "/v2/models/simple/ready").status, 200);
  EXPECT_EQ(Call("GET", "/v2/models/simple/versions/2/ready").status, 200);
  ExpectError(Call("GET", "/v2/models/simple/versions/3/ready"), 404, "unknown model");
  ExpectError(Call("GET", "/v2/models/loading/ready"), 503, "not ready");
  ExpectError(Call("GET", "/v2/models/nope/ready"), 404, "unknown model");
}

TEST_F(KServeHandlerTest, PercentDecodedModelNamesAndQueriesIgnored) {
  EXPECT_EQ(Call("GET", "/v2/models/my%20model/ready").status, 200);
  EXPECT_EQ(Call("GET", "/v2/models/simple/ready?verbose=1").status, 200);
  ExpectError(Call("GET", "/v2/models/my%2/ready"), 400, "malformed percent-encoding");
  ExpectError(Call("GET", "/v2/models/my%zzmodel/ready"), 400, "malformed percent-encoding");
  // The version segment is decoded as the name is: one path, one answer, however it is spelt.
  EXPECT_EQ(Call("GET", "/v2/models/simpl%65/versions/%32/ready").status, 200);
  ExpectError(Call("GET", "/v2/models/simple/versions/%3/ready"), 400,
              "malformed percent-encoding");
  // A name that decodes to invalid UTF-8 still gets a valid JSON error.
  ExpectError(Call("GET", "/v2/models/a%FFb/ready"), 404, "unknown model 'a?b'");
}

TEST_F(KServeHandlerTest, ModelConfig) {
  simple_v2_->config_json = R"({"name":"simple","max_batch_size":4})";
  HttpResponse r = Call("GET", "/v2/models/simple/config");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(HeaderOf(r, "Content-Type"), "application/json");
  EXPECT_EQ(r.body, simple_v2_->config_json);
  EXPECT_EQ(Call("GET", "/v2/models/simple/versions/1/config").body, "{}");
  ExpectError(Call("GET", "/v2/models/nope/config"), 404, "unknown model");
}

TEST_F(KServeHandlerTest, Statistics) {
  HttpResponse one = Call("GET", "/v2/models/simple/versions/2/stats");
  EXPECT_EQ(one.status, 200);
  EXPECT_EQ(one.body,
            R"({"model_stats":[{"name":"simple","version":"2","last_inference":1700000000000,)"
            R"("inference_count":5,"execution_count":4,"inference_stats":{)"
            R"("success":{"count":5,"ns":1000},"fail":{"count":0,"ns":0},)"
            R"("queue":{"count":5,"ns":200},"compute_input":{"count":0,"ns":0},)"
            R"("compute_infer":{"count":0,"ns":0},"compute_output":{"count":0,"ns":0},)"
            R"("cache_hit":{"count":0,"ns":0},"cache_miss":{"count":0,"ns":0}},)"
            R"("batch_stats":[]}]})");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  HttpResponse all = Call("GET", "/v2/models/stats");
  ASSERT_FALSE(parser.parse(simdjson::padded_string(all.body)).get(doc));
  EXPECT_EQ(doc["model_stats"].get_array().size(), 3u);  // simple 1, simple 2, my model 1
  HttpResponse model = Call("GET", "/v2/models/simple/stats");
  ASSERT_FALSE(parser.parse(simdjson::padded_string(model.body)).get(doc));
  EXPECT_EQ(doc["model_stats"].get_array().size(), 2u);
  ExpectError(Call("GET", "/v2/models/nope/stats"), 404, "unknown model");
}

TEST_F(KServeHandlerTest, RepositoryIndex) {
  HttpResponse all = Call("POST", "/v2/repository/index");
  EXPECT_EQ(all.status, 200);
  EXPECT_EQ(
      all.body,
      R"([{"name":"broken","version":"1","state":"UNAVAILABLE","reason":"model.onnx: bad file"},)"
      R"({"name":"loading","version":"1","state":"LOADING"},)"
      R"({"name":"my model","version":"1","state":"READY"},)"
      R"({"name":"simple","version":"1","state":"READY"},)"
      R"({"name":"simple","version":"2","state":"READY"}])");
  HttpResponse ready = Call("POST", "/v2/repository/index", R"({"ready":true})");
  EXPECT_EQ(ready.status, 200);
  EXPECT_THAT(ready.body, ::testing::Not(HasSubstr("broken")));
  EXPECT_THAT(ready.body, HasSubstr("simple"));
  EXPECT_EQ(Call("POST", "/v2/repository/index", R"({"ready":false})").body, all.body);
  ExpectError(Call("POST", "/v2/repository/index", "{"), 400,
              "failed to parse the request JSON buffer");
  ExpectError(Call("POST", "/v2/repository/index", R"({"readdy":true})"), 400, "unknown field");
  ExpectError(Call("POST", "/v2/repository/index", R"({"ready":1})"), 400, "must be a bool");
}

// A manager without model control (the interface's default) answers 501; bad parameters are
// refused before the manager is asked.
TEST_F(KServeHandlerTest, LoadAndUnloadWithoutModelControlAndBadParameters) {
  ExpectError(Call("POST", "/v2/repository/models/simple/load"), 501, "not supported");
  ExpectError(Call("POST", "/v2/repository/models/simple/unload"), 501, "not supported");
  ExpectError(Call("POST", "/v2/repository/models/simple/load", "{"), 400,
              "failed to parse the request JSON buffer");
  ExpectError(Call("POST", "/v2/repository/models/simple/load", R"({"parameters":{"x":1}})"), 400,
              "unknown parameter 'x'");
  ExpectError(Call("POST", "/v2/repository/models/simple/load",
                   R"({"parameters":{"file:1/model.onnx":"AA=A"}})"),
              400, "is not base64");
  ExpectError(Call("POST", "/v2/repository/models/simple/load", R"({"parameters":{"config":7}})"),
              400, "parameters.config must be a string");
  ExpectError(Call("POST", "/v2/repository/models/simple/unload",
                   R"({"parameters":{"unload_dependents":"yes"}})"),
              400, "unload_dependents must be a bool");
  // The accepted forms reach the manager (which says it has no model control).
  ExpectError(Call("POST", "/v2/repository/models/simple/load",
                   R"({"parameters":{"config":"{\"max_batch_size\":4}"}})"),
              501, "not supported");
  ExpectError(Call("POST", "/v2/repository/models/simple/unload",
                   R"({"parameters":{"unload_dependents":true}})"),
              501, "not supported");
  ExpectError(Call("POST", "/v2/repository/models/simple/load",
                   R"({"parameters":{"config":"{}","file:1/model.onnx":"AAAA"}})"),
              501, "not supported");
}

TEST_F(KServeHandlerTest, UnknownPathsAndMethods) {
  for (const char* path :
       {"/", "/v1/models", "/v2/foo", "/v2/models", "/v2/models/simple/bogus", "/v2/health/alive",
        "/v2/models/simple/versions/1/ready/x", "/v2/repository/models/simple/reload", "v2"}) {
    ExpectError(Call("GET", path), 404, "unknown path");
  }
  HttpResponse r = Call("GET", "/v2/models/simple/infer");
  ExpectError(r, 405, "use POST");
  EXPECT_EQ(HeaderOf(r, "Allow"), "POST");
  // Every GET route serves HEAD as GET (RFC 9110 §9.1); the transport sends the head only.
  EXPECT_EQ(Call("HEAD", "/v2/health/live").status, 200);
  EXPECT_EQ(Call("HEAD", "/v2/health/ready").status, 200);
  HttpResponse head = Call("HEAD", "/v2/models/simple");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, Call("GET", "/v2/models/simple").body);
  EXPECT_EQ(Call("HEAD", "/v2/models/simple/traffic").status,
            Call("GET", "/v2/models/simple/traffic").status);
  HttpResponse del = Call("DELETE", "/v2");
  ExpectError(del, 405, "use GET, HEAD");
  EXPECT_EQ(HeaderOf(del, "Allow"), "GET, HEAD");
  ExpectError(Call("HEAD", "/v2/models/simple/infer"), 405, "use POST");
  // A route of several methods names them all, in the message as in Allow.
  HttpResponse traffic = Call("POST", "/v2/models/simple/traffic");
  ExpectError(traffic, 405, "use GET, HEAD, PUT, DELETE");
  EXPECT_EQ(HeaderOf(traffic, "Allow"), "GET, HEAD, PUT, DELETE");
  ExpectError(Call("PUT", "/v2/logging"), 405, "use GET, HEAD, POST");
}

// ---- inference -----------------------------------------------------------------------------

constexpr const char* kJsonInfer =
    R"({"id":"r1","inputs":[{"name":"INPUT0","shape":[1,2],"datatype":"FP32","data":[1,2]}]})";

TEST_F(KServeHandlerTest, InferJson) {
  HttpResponse r = Call("POST", "/v2/models/simple/versions/1/infer", kJsonInfer);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(HeaderOf(r, "Content-Type"), "application/json");
  EXPECT_EQ(HeaderOf(r, "Inference-Header-Content-Length"), "");
  EXPECT_EQ(r.body, R"({"model_name":"simple","model_version":"1","id":"r1","outputs":[)"
                    R"({"name":"INPUT0","datatype":"FP32","shape":[1,2],"data":[1,2]}]})");
  ASSERT_TRUE(simple_->last_request);
  EXPECT_EQ(simple_->last_request->model_name, "simple");
  EXPECT_EQ(simple_->last_request->model_version, 1);
  EXPECT_NE(simple_->last_request->received_at, std::chrono::steady_clock::time_point{});
}

TEST_F(KServeHandlerTest, LoadAndUnloadReachTheManagerWithTheConfigOverride) {
  models_.model_control = true;
  HttpResponse r = Call("POST", "/v2/repository/models/simple/load",
                        R"({"parameters":{"config":"{\"max_batch_size\":4}"}})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "");
  ASSERT_EQ(models_.loads.size(), 1u);
  EXPECT_EQ(models_.loads[0].first, "simple");
  EXPECT_EQ(models_.loads[0].second, std::optional<std::string>(R"({"max_batch_size":4})"));
  EXPECT_EQ(Call("POST", "/v2/repository/models/simple/unload").status, 200);
  ASSERT_EQ(models_.unloads.size(), 1u);
  // The action is the path's, whatever query follows it.
  EXPECT_EQ(Call("POST", "/v2/repository/models/simple/load?x=1").status, 200);
  EXPECT_EQ(models_.loads.size(), 2u);
  EXPECT_EQ(models_.unloads.size(), 1u);
  models_.control_status = NotFound("failed to load 'x', no version is available");
  ExpectError(Call("POST", "/v2/repository/models/x/load"), 404, "failed to load 'x'");
  EXPECT_EQ(Call("GET", "/v2/repository/models/x/load").status, 405);
}

// InferenceRequest::allow_inline follows the handler's InlinePolicy and, for the default
// kSoleRequester, the transport's HttpRequest::sole_requester: a request that is not its
// thread's sole requester may run inline only while its thread is the model's only submitter.
TEST_F(KServeHandlerTest, AllowInlineFollowsThePolicyAndTheTransport) {
  struct Case {
    InlinePolicy policy;
    bool sole_requester;
    InlineAllowance allow_inline;
  };
  for (const Case& c : {Case{InlinePolicy::kSoleRequester, true, InlineAllowance::kAlways},
                        Case{InlinePolicy::kSoleRequester, false, InlineAllowance::kUncontended},
                        Case{InlinePolicy::kAlways, false, InlineAllowance::kAlways},
                        Case{InlinePolicy::kNever, true, InlineAllowance::kNever}}) {
    KServeHandler::Options options;
    options.inline_execution = c.policy;
    KServeHandler handler(&models_, options);
    HttpRequest request;
    request.method = "POST";
    request.target = "/v2/models/simple/versions/1/infer";
    request.body = std::make_shared<const std::string>(kJsonInfer);
    request.sole_requester = c.sole_requester;
    int status = 0;
    handler.Handle(std::move(request), [&](HttpResponse r) { status = r.status; });
    EXPECT_EQ(status, 200);
    ASSERT_TRUE(simple_->last_request);
    EXPECT_EQ(simple_->last_request->allow_inline, c.allow_inline)
        << "policy " << static_cast<int>(c.policy) << ", sole " << c.sole_requester;
  }
}

TEST_F(KServeHandlerTest, InferWithoutVersionUsesTheLatest) {
  HttpResponse r = Call("POST", "/v2/models/simple/infer", kJsonInfer);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr(R"("model_version":"2")"));
  ASSERT_TRUE(simple_v2_->last_request);
  EXPECT_FALSE(simple_v2_->last_request->model_version.has_value());
}

std::string Raw(const void* p, size_t n) {
  return std::string(static_cast<const char*>(p), n);
}

TEST_F(KServeHandlerTest, InferBinaryInAndOut) {
  const std::string json =
      R"({"inputs":[{"name":"INPUT0","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}}],)"
      R"("parameters":{"binary_data_output":true}})";
  const float values[2] = {1.5f, -2};
  HttpResponse r = Call("POST", "/v2/models/simple/infer", json + Raw(values, 8),
                        {{"inference-header-content-length", std::to_string(json.size())}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(HeaderOf(r, "Content-Type"), "application/octet-stream");
  const size_t header = std::stoul(HeaderOf(r, "Inference-Header-Content-Length"));
  ASSERT_EQ(r.body.size(), header + 8);
  EXPECT_EQ(r.body.substr(0, header),
            R"({"model_name":"simple","model_version":"2","outputs":[{"name":"INPUT0",)"
            R"("datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]})");
  EXPECT_EQ(r.body.substr(header), Raw(values, 8));
}

TEST_F(KServeHandlerTest, InferHeaderLengthErrors) {
  const std::string body = kJsonInfer;
  ExpectError(
      Call("POST", "/v2/models/simple/infer", body, {{"inference-header-content-length", "abc"}}),
      400, "must be a non-negative integer");
  ExpectError(
      Call("POST", "/v2/models/simple/infer", body, {{"inference-header-content-length", "-5"}}),
      400, "must be a non-negative integer");
  ExpectError(Call("POST", "/v2/models/simple/infer", body,
                   {{"inference-header-content-length", std::to_string(body.size() + 1)}}),
              400, "but the body has only");
  ExpectError(Call("POST", "/v2/models/simple/infer", body,
                   {{"inference-header-content-length", std::to_string(body.size() - 3)}}),
              400, "invalid JSON");
  EXPECT_EQ(Call("POST", "/v2/models/simple/infer", body,
                 {{"inference-header-content-length", " " + std::to_string(body.size())}})
                .status,
            200);
  // Given twice: refused when the two differ (they would split the body two ways), served when
  // they agree.
  const std::string length = std::to_string(body.size());
  ExpectError(
      Call("POST", "/v2/models/simple/infer", body,
           {{"inference-header-content-length", length}, {"inference-header-content-length", "5"}}),
      400, "given more than once, with different values");
  EXPECT_EQ(Call("POST", "/v2/models/simple/infer", body,
                 {{"inference-header-content-length", length},
                  {"inference-header-content-length", length + " "}})
                .status,
            200);
}

TEST_F(KServeHandlerTest, InferErrors) {
  ExpectError(Call("POST", "/v2/models/nope/infer", kJsonInfer), 404, "unknown model");
  ExpectError(Call("POST", "/v2/models/broken/infer", kJsonInfer), 503, "not ready");
  ExpectError(Call("POST", "/v2/models/simple/infer", ""), 400, "no JSON header");
  ExpectError(Call("POST", "/v2/models/simple/infer", R"({"inputs":[{"name":"x"}]})"), 400,
              "input 'x'");
  ExpectError(
      Call("POST", "/v2/models/simple/infer",
           R"({"inputs":[{"name":"x","shape":[1000000000],"datatype":"FP32","data":[1]}]})"),
      413, "claims more than");
  simple_v2_->infer = [](const InferenceRequest&) -> StatusOr<InferenceResponse> {
    return ResourceExhausted("queue full");
  };
  ExpectError(Call("POST", "/v2/models/simple/infer", kJsonInfer), 429, "queue full");
  simple_v2_->infer = [](const InferenceRequest&) -> StatusOr<InferenceResponse> {
    return InvalidArgument("unexpected input 'INPUT0'");
  };
  ExpectError(Call("POST", "/v2/models/simple/infer", kJsonInfer), 400, "unexpected input");
}

TEST_F(KServeHandlerTest, TooManyRequestsCarriesRetryAfter) {
  simple_v2_->infer = [](const InferenceRequest&) -> StatusOr<InferenceResponse> {
    return ResourceExhausted("queue full");
  };
  HttpResponse r = Call("POST", "/v2/models/simple/infer", kJsonInfer);
  ExpectError(r, 429, "queue full");
  EXPECT_EQ(HeaderOf(r, "Retry-After"), "1");
  simple_v2_->infer = [](const InferenceRequest&) -> StatusOr<InferenceResponse> {
    return DeadlineExceeded("the request's deadline passed while it was queued");
  };
  r = Call("POST", "/v2/models/simple/infer", kJsonInfer);
  ExpectError(r, 504, "deadline passed");
  EXPECT_EQ(HeaderOf(r, "Retry-After"), "");
}

TEST_F(KServeHandlerTest, InferPassesSchedulingFieldsAndTheCancellationToken) {
  auto token = std::make_shared<CancellationToken>();
  HttpRequest request;
  request.method = "POST";
  request.target = "/v2/models/simple/infer";
  request.headers = {{"x-request-timeout-us", "250000"}, {"x-client-id", "tenant-a"}};
  request.body = std::make_shared<const std::string>(
      R"({"parameters":{"priority":2,"timeout":1000},)"
      R"("inputs":[{"name":"INPUT0","shape":[1],"datatype":"FP32","data":[1]}]})");
  request.cancellation = token;
  std::optional<HttpResponse> response;
  handler_->Handle(std::move(request), [&](HttpResponse r) { response = std::move(r); });
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200) << response->body;
  ASSERT_TRUE(simple_v2_->last_request);
  const InferenceRequest& got = *simple_v2_->last_request;
  EXPECT_EQ(got.cancellation, token);
  EXPECT_EQ(got.priority, 2u);
  EXPECT_EQ(got.timeout_us, 1000u);
  EXPECT_EQ(got.deadline - got.received_at, std::chrono::microseconds(250000));
  EXPECT_EQ(got.client_id, "tenant-a");
}

TEST_F(KServeHandlerTest, MalformedSchedulingFieldsAre400AndNeverReachTheModel) {
  const std::string priority_string =
      R"({"parameters":{"priority":"high"},)"
      R"("inputs":[{"name":"INPUT0","shape":[1],"datatype":"FP32","data":[1]}]})";
  ExpectError(Call("POST", "/v2/models/simple/infer", priority_string), 400, "'priority'");
  ExpectError(
      Call("POST", "/v2/models/simple/infer", kJsonInfer, {{"x-request-timeout-us", "soon"}}), 400,
      "X-Request-Timeout-Us");
  EXPECT_EQ(simple_v2_->infer_calls, 0);
}

TEST_F(KServeHandlerTest, InferNonUtf8BytesOutputAsJsonIsAnError) {
  const std::string bytes = std::string("\x01\x00\x00\x00\xff", 5);
  const std::string json =
      R"({"inputs":[{"name":"s","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":5}}]})";
  ExpectError(Call("POST", "/v2/models/simple/infer", json + bytes,
                   {{"inference-header-content-length", std::to_string(json.size())}}),
              400, "not valid UTF-8");
}

TEST_F(KServeHandlerTest, InferClassification) {
  simple_v2_->infer = [](const InferenceRequest& request) -> StatusOr<InferenceResponse> {
    auto data = std::make_shared<std::vector<float>>(std::vector<float>{0.1f, 0.6f, 0.3f});
    Tensor t;
    t.name = "OUTPUT0";
    t.dtype = DataType::kFp32;
    t.shape = {1, 3};
    t.data = reinterpret_cast<const std::byte*>(data->data());
    t.size_bytes = 12;
    t.owner = data;
    InferenceResponse r;
    r.model_name = "simple";
    r.model_version = 2;
    r.id = request.id;
    r.outputs.push_back(t);
    return r;
  };
  HttpResponse r =
      Call("POST", "/v2/models/simple/infer",
           R"({"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"FP32","data":[0]}],)"
           R"("outputs":[{"name":"OUTPUT0","parameters":{"classification":2}}]})");
  EXPECT_EQ(r.status, 200) << r.body;
  // simple v2 batches (max_batch_size 4): the first dimension is the batch.
  EXPECT_THAT(r.body, HasSubstr(R"({"name":"OUTPUT0","datatype":"BYTES","shape":[1,2],)"
                                R"("data":["0.600000:1","0.300000:2"]})"));
}

}  // namespace
}  // namespace harrier::kserve

namespace harrier::kserve {
namespace {

using ::harrier::testing::FakeModelManager;
using ::harrier::testing::FakeServableModel;
using ::testing::HasSubstr;

// Triton's system shared memory over REST: the endpoints and an inference through regions.
class KServeSharedMemoryTest : public ::testing::Test {
 protected:
  KServeSharedMemoryTest() {
    model_ = models_.AddReady("simple", 1);  // the fake answers its inputs as outputs
    KServeHandler::Options options;
    options.shared_memory = &registry_;
    handler_ = std::make_unique<KServeHandler>(&models_, options);
  }

  HttpResponse Call(std::string method, std::string target, std::string body = "") {
    HttpRequest request;
    request.method = std::move(method);
    request.target = std::move(target);
    request.body = std::make_shared<const std::string>(std::move(body));
    std::optional<HttpResponse> response;
    handler_->Handle(std::move(request), [&](HttpResponse r) { response = std::move(r); });
    return response.value_or(HttpResponse{});
  }

  static std::string Register(const std::string& key, int offset, int size) {
    return R"({"key":")" + key + R"(","offset":)" + std::to_string(offset) + R"(,"byte_size":)" +
           std::to_string(size) + "}";
  }

  FakeModelManager models_;
  std::shared_ptr<FakeServableModel> model_;
  SharedMemoryRegistry registry_;
  std::unique_ptr<KServeHandler> handler_;
};

TEST_F(KServeSharedMemoryTest, RegisterStatusUnregister) {
  testing::ShmObject object(256);
  EXPECT_EQ(Call("GET", "/v2/systemsharedmemory/status").body, "[]");
  HttpResponse r =
      Call("POST", "/v2/systemsharedmemory/region/in/register", Register(object.key(), 16, 128));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.body.empty());
  const std::string entry =
      R"({"name":"in","key":")" + object.key() + R"(","offset":16,"byte_size":128})";
  EXPECT_EQ(Call("GET", "/v2/systemsharedmemory/status").body, "[" + entry + "]");
  EXPECT_EQ(Call("GET", "/v2/systemsharedmemory/region/in/status").body, "[" + entry + "]");

  // Refusals: 400, Triton's words, nothing changes.
  r = Call("POST", "/v2/systemsharedmemory/region/in/register", Register(object.key(), 0, 8));
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("shared memory region 'in' already in manager"));
  r = Call("POST", "/v2/systemsharedmemory/region/x/register", Register(object.key(), 200, 57));
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("failed to register shared memory region 'x': invalid args"));
  r = Call("POST", "/v2/systemsharedmemory/region/x/register", R"({"key":"/k","byte_size":-1})");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("'byte_size' must be an integer >= 0"));
  r = Call("POST", "/v2/systemsharedmemory/region/x/register", R"({"key":"/k","size":1})");
  EXPECT_THAT(r.body, HasSubstr("unknown field 'size'"));
  // A field given twice (probe 62: the last one won, where a proxy may read the first).
  r = Call("POST", "/v2/systemsharedmemory/region/x/register",
           "{\"key\":\"" + object.key() + "\",\"key\":\"/other\",\"byte_size\":8}");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("field 'key' given twice"));
  r = Call("GET", "/v2/systemsharedmemory/region/x/status");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("Unable to find system shared memory region: 'x'"));
  EXPECT_EQ(registry_.size(), 1u);

  EXPECT_EQ(Call("GET", "/v2/systemsharedmemory/register").status, 404);
  EXPECT_EQ(Call("GET", "/v2/systemsharedmemory/region/in/register").status, 405);
  EXPECT_EQ(Call("POST", "/v2/systemsharedmemory/region/in/unregister").status, 200);
  EXPECT_EQ(Call("POST", "/v2/systemsharedmemory/region/in/unregister").status, 200);  // no-op
  EXPECT_EQ(registry_.size(), 0u);
  Call("POST", "/v2/systemsharedmemory/region/a/register", Register(object.key(), 0, 8));
  Call("POST", "/v2/systemsharedmemory/region/b/register", Register(object.key(), 8, 8));
  EXPECT_EQ(registry_.size(), 2u);
  EXPECT_EQ(Call("POST", "/v2/systemsharedmemory/unregister").status, 200);
  EXPECT_EQ(registry_.size(), 0u);
}

TEST_F(KServeSharedMemoryTest, CudaSharedMemoryIsNotSupported) {
  HttpResponse r = Call("POST", "/v2/cudasharedmemory/region/g/register",
                        R"({"raw_handle":{"b64":""},"device_id":0,"byte_size":8})");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("CUDA shared memory is not supported on this server (no GPU)"));
  // A body that is not JSON is said first, as Triton does.
  r = Call("POST", "/v2/cudasharedmemory/region/g/register", "AAAA");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("failed to parse the request JSON buffer"));
  EXPECT_EQ(Call("GET", "/v2/cudasharedmemory/status").body, "[]");
  r = Call("GET", "/v2/cudasharedmemory/region/g/status");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("Unable to find cuda shared memory region: 'g'"));
  // What Triton's system shared-memory examples call first.
  EXPECT_EQ(Call("POST", "/v2/cudasharedmemory/unregister").status, 200);
  EXPECT_EQ(Call("POST", "/v2/cudasharedmemory/region/g/unregister").status, 200);
}

TEST_F(KServeSharedMemoryTest, OffWithoutARegistry) {
  handler_ = std::make_unique<KServeHandler>(&models_, KServeHandler::Options{});
  for (auto [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/v2/systemsharedmemory/status"},
           {"POST", "/v2/systemsharedmemory/region/r/register"},
           {"POST", "/v2/systemsharedmemory/unregister"}}) {
    HttpResponse r = Call(method, target, R"({"key":"/k","byte_size":1})");
    EXPECT_EQ(r.status, 400) << target;
    EXPECT_THAT(r.body, HasSubstr("--allow-client-shm=true")) << target;
  }
  EXPECT_THAT(Call("GET", "/v2").body, ::testing::Not(HasSubstr("shared_memory")));
}

TEST_F(KServeSharedMemoryTest, InferReadsAndWritesRegions) {
  testing::ShmObject in(64), out(64);
  const int32_t values[4] = {1, 2, 3, 4};
  std::memcpy(in.data() + 16, values, 16);
  ASSERT_EQ(
      Call("POST", "/v2/systemsharedmemory/region/in/register", Register(in.key(), 0, 64)).status,
      200);
  ASSERT_EQ(
      Call("POST", "/v2/systemsharedmemory/region/out/register", Register(out.key(), 0, 64)).status,
      200);
  const std::string request =
      R"({"inputs":[{"name":"INPUT0","shape":[1,4],"datatype":"INT32","parameters":)"
      R"({"shared_memory_region":"in","shared_memory_offset":16,"shared_memory_byte_size":16}}],)"
      R"("outputs":[{"name":"INPUT0","parameters":{"shared_memory_region":"out",)"
      R"("shared_memory_offset":32,"shared_memory_byte_size":32}}]})";
  HttpResponse r = Call("POST", "/v2/models/simple/infer", request);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"model_name":"simple","model_version":"1","outputs":[)"
                    R"({"name":"INPUT0","datatype":"INT32","shape":[1,4]}]})");
  EXPECT_EQ(std::memcmp(out.data() + 32, values, 16), 0);

  // Unknown output region: 400 before the model runs.
  const int runs = model_->infer_calls;
  std::string bad = request;
  bad.replace(bad.find(R"("out")"), 5, R"("gone")");
  r = Call("POST", "/v2/models/simple/infer", bad);
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("Unable to find shared memory region: 'gone'"));
  EXPECT_EQ(model_->infer_calls, runs);

  // An output region too small: 400 with Triton's message.
  std::string small = request;
  small.replace(small.find(R"("shared_memory_byte_size":32)"), 28,
                R"("shared_memory_byte_size":8)");
  r = Call("POST", "/v2/models/simple/infer", small);
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("should be at least 16 bytes to hold the results"));
}

}  // namespace
}  // namespace harrier::kserve
