// KServeHandler with a Tracer: which inference requests are traced, what their record holds, the
// traceresponse header, and that the record reaches the tracer once the transport reports the send.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "protocol/kserve/kserve_handler.h"
#include "util/fake_model_manager.h"
#include "util/fake_tracer.h"

namespace harrier::kserve {
namespace {

using ::harrier::testing::FakeModelManager;
using ::harrier::testing::FakeServableModel;
using ::harrier::testing::FakeTracer;
using Headers = std::vector<std::pair<std::string, std::string>>;
using TimePoint = std::chrono::steady_clock::time_point;

std::string HeaderOf(const HttpResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return std::string(v);
  return "";
}

constexpr const char* kJsonInfer =
    R"({"id":"r1","inputs":[{"name":"INPUT0","shape":[1,2],"datatype":"FP32","data":[1,2]}]})";
constexpr const char* kParentTrace = "0af7651916cd43dd8448eb211c80319c";
constexpr const char* kParentSpan = "b7ad6b7169203331";
const std::string kSampledParent = std::string("00-") + kParentTrace + "-" + kParentSpan + "-01";

class KServeTracingTest : public ::testing::Test {
 protected:
  KServeTracingTest() {
    simple_ = models_.AddReady("simple", 3);
    // As the scheduler would report it: the batch and its run happen inside Infer().
    peers_ = std::make_shared<const std::vector<SpanContext>>(2);
    simple_->infer = [this](const InferenceRequest& request) {
      StatusOr<InferenceResponse> r = simple_->Echo(request);
      r->timing.batch_start = std::chrono::steady_clock::now();
      r->timing.infer_start = std::chrono::steady_clock::now();
      r->timing.infer_end = std::chrono::steady_clock::now();
      r->timing.batch_size = 4;
      r->timing.batch_requests = 2;
      r->timing.batch_peers = peers_;
      return r;
    };
    Recreate(&tracer_);
  }

  void Recreate(Tracer* tracer) {
    KServeHandler::Options options;
    options.tracer = tracer;
    handler_ = std::make_unique<KServeHandler>(&models_, options);
  }

  // Handles the request as a transport would: stamps its receipt, and reports the send (at
  // `sent_at`) when `send` is set, as the transport does once the last byte is out.
  HttpResponse Call(std::string target, std::string body, Headers headers = {}, bool send = true) {
    HttpRequest request;
    request.method = "POST";
    request.target = std::move(target);
    request.headers = std::move(headers);
    request.body = std::make_shared<const std::string>(std::move(body));
    request.version = HttpVersion::kHttp2;
    request.received_at = std::chrono::steady_clock::now();
    request.body_received_at = std::chrono::steady_clock::now();
    received_at_ = request.received_at;
    std::optional<HttpResponse> response;
    handler_->Handle(std::move(request), [&](HttpResponse r) { response = std::move(r); });
    EXPECT_TRUE(response.has_value());
    if (send && response && response->on_sent) {
      sent_at_ = std::chrono::steady_clock::now();
      response->on_sent(true, sent_at_);
    }
    return response.value_or(HttpResponse{});
  }

  FakeModelManager models_;
  std::shared_ptr<FakeServableModel> simple_;
  std::shared_ptr<const std::vector<SpanContext>> peers_;
  FakeTracer tracer_;
  std::unique_ptr<KServeHandler> handler_;
  TimePoint received_at_, sent_at_;
};

TEST_F(KServeTracingTest, ATracedRequestGivesOneRecordWithEveryStageInOrder) {
  const HttpResponse response = Call(
      "/v2/models/simple/infer", kJsonInfer,
      {{"traceparent", kSampledParent}, {"tracestate", "vendor=x"}, {"x-request-id", "req-1"}});
  ASSERT_EQ(response.status, 200) << response.body;
  const std::vector<RequestTrace> records = tracer_.records();
  ASSERT_EQ(records.size(), 1u);
  const RequestTrace& t = records[0];

  EXPECT_EQ(FormatTraceparent(t.parent), kSampledParent);
  EXPECT_EQ(t.tracestate, "vendor=x");
  EXPECT_EQ(t.server.trace_id, t.parent.trace_id);
  EXPECT_TRUE(t.server.valid());
  EXPECT_NE(t.server.span_id, t.parent.span_id);
  // The model saw the server span, for the batch's links.
  ASSERT_NE(simple_->last_request, nullptr);
  EXPECT_EQ(FormatTraceparent(simple_->last_request->trace), FormatTraceparent(t.server));
  EXPECT_EQ(HeaderOf(response, "traceresponse"), FormatTraceparent(t.server));

  EXPECT_EQ(t.name, "POST /v2/models/{model}/infer");
  EXPECT_EQ(t.protocol, "http");
  EXPECT_EQ(t.transport, "HTTP/2");
  EXPECT_EQ(t.target, "/v2/models/simple/infer");
  EXPECT_EQ(t.request_id, "req-1");
  EXPECT_EQ(t.model, "simple");
  EXPECT_EQ(t.model_version, 3);
  EXPECT_EQ(t.status, 200);
  EXPECT_EQ(t.error, "");
  EXPECT_EQ(t.request_bytes, std::string(kJsonInfer).size());
  EXPECT_EQ(t.response_bytes, response.body.size());
  EXPECT_EQ(t.batch_size, 4);
  EXPECT_EQ(t.batch_requests, 2u);
  EXPECT_EQ(t.batch_peers, peers_);

  EXPECT_EQ(t.received, received_at_);
  EXPECT_EQ(t.sent, sent_at_);
  const std::vector<std::pair<const char*, TimePoint>> stages = {{"received", t.received},
                                                                 {"body_received", t.body_received},
                                                                 {"decoded", t.decoded},
                                                                 {"batch_start", t.batch_start},
                                                                 {"infer_start", t.infer_start},
                                                                 {"infer_end", t.infer_end},
                                                                 {"batch_end", t.batch_end},
                                                                 {"encoded", t.encoded},
                                                                 {"sent", t.sent}};
  for (size_t i = 0; i < stages.size(); ++i) {
    EXPECT_NE(stages[i].second, TimePoint{}) << stages[i].first;
    if (i > 0) {
      EXPECT_LE(stages[i - 1].second, stages[i].second) << stages[i].first;
    }
  }
}

TEST_F(KServeTracingTest, TheRecordLeavesOnlyOnceTheTransportReportsTheSend) {
  const HttpResponse response =
      Call("/v2/models/simple/infer", kJsonInfer, {{"traceparent", kSampledParent}},
           /*send=*/false);
  ASSERT_TRUE(response.on_sent);
  EXPECT_TRUE(tracer_.records().empty());
  response.on_sent(false, std::chrono::steady_clock::now());  // the connection closed first
  const std::vector<RequestTrace> records = tracer_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].sent, TimePoint{});
  EXPECT_NE(records[0].encoded, TimePoint{});
}

TEST_F(KServeTracingTest, AResponseDroppedUnreportedStillSubmitsItsRecord) {
  {
    HttpResponse response =
        Call("/v2/models/simple/infer", kJsonInfer, {{"traceparent", kSampledParent}},
             /*send=*/false);
    EXPECT_TRUE(tracer_.records().empty());
  }
  const std::vector<RequestTrace> records = tracer_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].sent, TimePoint{});
}

TEST_F(KServeTracingTest, AVersionedRouteNamesItsVersion) {
  ASSERT_EQ(Call("/v2/models/simple/versions/3/infer", kJsonInfer).status, 200);
  const std::vector<RequestTrace> records = tracer_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].name, "POST /v2/models/{model}/versions/{version}/infer");
  EXPECT_EQ(records[0].model, "simple");
  EXPECT_EQ(records[0].model_version, 3);
}

TEST_F(KServeTracingTest, AnInvalidTraceparentStartsANewTraceWithoutItsTracestate) {
  const HttpResponse response =
      Call("/v2/models/simple/infer", kJsonInfer,
           {{"traceparent", "00-not-a-trace-01"}, {"tracestate", "vendor=x"}});
  ASSERT_EQ(response.status, 200);
  const std::vector<RequestTrace> records = tracer_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].parent.valid());
  EXPECT_EQ(records[0].tracestate, "");
  EXPECT_TRUE(records[0].server.valid());
  EXPECT_EQ(HeaderOf(response, "traceresponse"), FormatTraceparent(records[0].server));
}

TEST_F(KServeTracingTest, AnInvalidTracestateIsDroppedAndTheParentKept) {
  ASSERT_EQ(Call("/v2/models/simple/infer", kJsonInfer,
                 {{"traceparent", kSampledParent}, {"tracestate", std::string(600, 'a')}})
                .status,
            200);
  const std::vector<RequestTrace> records = tracer_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(records[0].parent.valid());
  EXPECT_EQ(records[0].tracestate, "");
}

TEST_F(KServeTracingTest, AnUnsampledParentIsNotTraced) {
  const HttpResponse response =
      Call("/v2/models/simple/infer", kJsonInfer,
           {{"traceparent", std::string("00-") + kParentTrace + "-" + kParentSpan + "-00"}});
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(tracer_.starts(), 1);
  EXPECT_TRUE(tracer_.records().empty());
  EXPECT_EQ(HeaderOf(response, "traceresponse"), "");
  EXPECT_FALSE(response.on_sent);
  EXPECT_FALSE(simple_->last_request->trace.valid());
}

TEST_F(KServeTracingTest, UntracedRequestsHaveNoRecordNoHeaderAndNoSendCallback) {
  tracer_.sample = false;
  HttpResponse response = Call("/v2/models/simple/infer", kJsonInfer);
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(tracer_.starts(), 1);
  EXPECT_EQ(HeaderOf(response, "traceresponse"), "");
  EXPECT_FALSE(response.on_sent);

  Recreate(nullptr);  // tracing off
  response = Call("/v2/models/simple/infer", kJsonInfer, {{"traceparent", kSampledParent}});
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(tracer_.starts(), 1);
  EXPECT_EQ(HeaderOf(response, "traceresponse"), "");
  EXPECT_FALSE(response.on_sent);
  EXPECT_TRUE(tracer_.records().empty());
}

TEST_F(KServeTracingTest, OnlyInferenceIsTraced) {
  HttpRequest request;
  request.method = "GET";
  request.target = "/v2/health/live";
  request.headers = {{"traceparent", kSampledParent}};
  std::optional<HttpResponse> response;
  handler_->Handle(std::move(request), [&](HttpResponse r) { response = std::move(r); });
  ASSERT_TRUE(response);
  EXPECT_EQ(tracer_.starts(), 0);
  EXPECT_FALSE(response->on_sent);
}

TEST_F(KServeTracingTest, ARequestRefusedBeforeTheModelIsTracedWithTheStagesItReached) {
  const HttpResponse response =
      Call("/v2/models/simple/infer", "{bad json", {{"traceparent", kSampledParent}});
  EXPECT_EQ(response.status, 400);
  EXPECT_EQ(simple_->infer_calls, 0);
  const std::vector<RequestTrace> records = tracer_.records();
  ASSERT_EQ(records.size(), 1u);
  const RequestTrace& t = records[0];
  EXPECT_EQ(t.status, 400);
  EXPECT_NE(t.error, "");
  EXPECT_EQ(t.model, "simple");
  EXPECT_EQ(t.response_bytes, response.body.size());
  EXPECT_EQ(HeaderOf(response, "traceresponse"), FormatTraceparent(t.server));
  EXPECT_LE(t.body_received, t.decoded);
  EXPECT_LE(t.decoded, t.encoded);
  EXPECT_LE(t.encoded, t.sent);
  EXPECT_NE(t.sent, TimePoint{});
  // Never queued, batched or run.
  EXPECT_EQ(t.batch_start, TimePoint{});
  EXPECT_EQ(t.infer_start, TimePoint{});
  EXPECT_EQ(t.batch_end, TimePoint{});
  EXPECT_EQ(t.batch_peers, nullptr);
}

TEST_F(KServeTracingTest, AnUnknownModelIsTraced) {
  const HttpResponse response =
      Call("/v2/models/nope/infer", kJsonInfer, {{"traceparent", kSampledParent}});
  EXPECT_EQ(response.status, 404);
  const std::vector<RequestTrace> records = tracer_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, 404);
  EXPECT_EQ(records[0].model, "nope");
  EXPECT_EQ(records[0].model_version, 0);
}

TEST_F(KServeTracingTest, ARequestTheModelRefusesIsTracedWithoutItsBatch) {
  simple_->infer = [](const InferenceRequest&) -> StatusOr<InferenceResponse> {
    return ResourceExhausted("the queue is full");
  };
  const HttpResponse response =
      Call("/v2/models/simple/infer", kJsonInfer, {{"traceparent", kSampledParent}});
  EXPECT_EQ(response.status, 429);
  const std::vector<RequestTrace> records = tracer_.records();
  ASSERT_EQ(records.size(), 1u);
  const RequestTrace& t = records[0];
  EXPECT_EQ(t.status, 429);
  EXPECT_NE(t.error.find("the queue is full"), std::string::npos) << t.error;
  EXPECT_NE(t.decoded, TimePoint{});
  EXPECT_EQ(t.batch_start, TimePoint{});
  EXPECT_NE(t.encoded, TimePoint{});
  EXPECT_NE(t.sent, TimePoint{});
}

TEST_F(KServeTracingTest, WithoutTransportTimesTheHandlerEntryStandsForReceipt) {
  HttpRequest request;
  request.method = "POST";
  request.target = "/v2/models/simple/infer";
  request.body = std::make_shared<const std::string>(kJsonInfer);
  const TimePoint before = std::chrono::steady_clock::now();
  std::optional<HttpResponse> response;
  handler_->Handle(std::move(request), [&](HttpResponse r) { response = std::move(r); });
  ASSERT_TRUE(response && response->on_sent);
  response->on_sent(true, std::chrono::steady_clock::now());
  const std::vector<RequestTrace> records = tracer_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_GE(records[0].received, before);
  EXPECT_EQ(records[0].received, records[0].body_received);
  EXPECT_EQ(records[0].transport, "HTTP");  // the transport did not say which
}

}  // namespace
}  // namespace harrier::kserve
