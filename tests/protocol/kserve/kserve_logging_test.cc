// KServeHandler's request ids, Server-Timing, access log records and /v2/logging.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "core/request_id.h"
#include "observability/spdlog_log_control.h"
#include "protocol/kserve/kserve_handler.h"
#include "util/fake_model_manager.h"
#include "util/recording_access_log.h"

namespace harrier::kserve {
namespace {

using ::harrier::testing::FakeModelManager;
using ::harrier::testing::FakeServableModel;
using ::harrier::testing::RecordingAccessLog;
using ::testing::HasSubstr;

std::string HeaderOf(const HttpResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return std::string(v);
  return "";
}

int HeaderCount(const HttpResponse& r, std::string_view name) {
  int n = 0;
  for (const auto& [k, v] : r.headers) n += k == name;
  return n;
}

constexpr const char* kJsonInfer =
    R"({"id":"r1","inputs":[{"name":"INPUT0","shape":[1,2],"datatype":"FP32","data":[1,2]}]})";

class KServeLoggingTest : public ::testing::Test {
 protected:
  KServeLoggingTest() : log_control_("json", "") {
    simple_ = models_.AddReady("simple", 3);
    simple_->infer = [this](const InferenceRequest& request) {
      StatusOr<InferenceResponse> r = simple_->Echo(request);
      r->timing.queue_ns = 12'000;
      r->timing.compute_input_ns = 3'000;
      r->timing.compute_infer_ns = 1'250'000;
      return r;
    };
    Recreate(true, true);
    saved_level_ = spdlog::default_logger()->level();
  }
  ~KServeLoggingTest() override { spdlog::default_logger()->set_level(saved_level_); }

  void Recreate(bool with_access_log, bool with_log_control) {
    KServeHandler::Options options;
    options.access_log = with_access_log ? &access_log_ : nullptr;
    options.log_control = with_log_control ? &log_control_ : nullptr;
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
    handler_->Handle(std::move(request), [&](HttpResponse r) { response = std::move(r); });
    return response.value_or(HttpResponse{});
  }

  FakeModelManager models_;
  std::shared_ptr<FakeServableModel> simple_;
  RecordingAccessLog access_log_;
  SpdlogLogControl log_control_;
  std::unique_ptr<KServeHandler> handler_;
  spdlog::level::level_enum saved_level_;
};

const std::regex kGeneratedId("[0-9a-f]{6}-[0-9a-f]{8}");

TEST_F(KServeLoggingTest, RequestIdIsEchoedOnEveryKindOfResponse) {
  const std::vector<std::pair<std::string, std::string>> id = {{"x-request-id", "abc-123"}};
  for (const HttpResponse& r :
       {Call("POST", "/v2/models/simple/infer", kJsonInfer, id),
        Call("POST", "/v2/models/nope/infer", kJsonInfer, id),
        Call("POST", "/v2/models/simple/infer", "{bad", id), Call("GET", "/v2/health/live", "", id),
        Call("GET", "/v2/unknown", "", id), Call("PUT", "/v2/health/live", "", id)}) {
    EXPECT_EQ(HeaderCount(r, "X-Request-Id"), 1) << r.status;
    EXPECT_EQ(HeaderOf(r, "X-Request-Id"), "abc-123") << r.status;
  }
}

TEST_F(KServeLoggingTest, MissingOrUnacceptableRequestIdsAreReplaced) {
  const std::string none = HeaderOf(Call("GET", "/v2/health/live"), "X-Request-Id");
  EXPECT_TRUE(std::regex_match(none, kGeneratedId)) << none;
  const std::string spaced =
      HeaderOf(Call("POST", "/v2/models/simple/infer", kJsonInfer, {{"x-request-id", "a b"}}),
               "X-Request-Id");
  EXPECT_TRUE(std::regex_match(spaced, kGeneratedId)) << spaced;
  const std::string long_id =
      HeaderOf(Call("GET", "/v2/health/live", "",
                    {{"x-request-id", std::string(kMaxRequestIdBytes + 1, 'a')}}),
               "X-Request-Id");
  EXPECT_TRUE(std::regex_match(long_id, kGeneratedId)) << long_id;
  EXPECT_NE(none, spaced);
}

TEST_F(KServeLoggingTest, ServerTimingOnSuccessfulInferenceOnly) {
  HttpResponse ok = Call("POST", "/v2/models/simple/infer", kJsonInfer);
  ASSERT_EQ(ok.status, 200) << ok.body;
  const std::string timing = HeaderOf(ok, "Server-Timing");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(timing, m,
                               std::regex("queue;dur=0\\.012, input;dur=0\\.003, "
                                          "infer;dur=1\\.250, output;dur=(\\d+\\.\\d{3}), "
                                          "total;dur=(\\d+\\.\\d{3})")))
      << timing;
  EXPECT_EQ(HeaderOf(Call("POST", "/v2/models/simple/infer", "{bad"), "Server-Timing"), "");
  simple_->infer = [](const InferenceRequest&) -> StatusOr<InferenceResponse> {
    return ResourceExhausted("queue full");
  };
  HttpResponse refused = Call("POST", "/v2/models/simple/infer", kJsonInfer);
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(HeaderOf(refused, "Server-Timing"), "");
}

TEST_F(KServeLoggingTest, AccessRecordOfAnInference) {
  const std::string body = kJsonInfer;
  HttpResponse r = Call("POST", "/v2/models/simple/infer", body, {{"x-request-id", "client-1"}});
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(access_log_.records().size(), 1u);
  const RecordingAccessLog::Copy a = access_log_.records()[0];
  EXPECT_EQ(a.request_id, "client-1");
  EXPECT_EQ(a.protocol, "http");
  EXPECT_EQ(a.method, "POST");
  EXPECT_EQ(a.target, "/v2/models/simple/infer");
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.error, "");
  EXPECT_EQ(a.model, "simple");
  EXPECT_EQ(a.version, 3);
  EXPECT_EQ(a.inputs, R"([{"name":"INPUT0","datatype":"FP32","shape":[1,2]}])");
  EXPECT_EQ(a.request_bytes, body.size());
  EXPECT_EQ(a.response_bytes, r.body.size());
  EXPECT_EQ(a.timing.queue_ns, 12'000u);
  EXPECT_EQ(a.timing.compute_infer_ns, 1'250'000u);
  EXPECT_GT(a.total_ns, 0u);
  EXPECT_GE(a.total_ns, a.output_ns);
}

TEST_F(KServeLoggingTest, AccessRecordsOfErrorsCarryTheirCause) {
  Call("POST", "/v2/models/nope/infer", kJsonInfer);
  Call("POST", "/v2/models/simple/infer", "{bad");
  simple_->infer = [](const InferenceRequest&) -> StatusOr<InferenceResponse> {
    return DeadlineExceeded("the request timed out in the queue");
  };
  Call("POST", "/v2/models/simple/infer", kJsonInfer);
  ASSERT_EQ(access_log_.records().size(), 3u);
  EXPECT_EQ(access_log_.records()[0].status, 404);
  EXPECT_THAT(access_log_.records()[0].error, HasSubstr("unknown model 'nope'"));
  EXPECT_EQ(access_log_.records()[1].status, 400);
  EXPECT_EQ(access_log_.records()[1].model, "simple");
  EXPECT_EQ(access_log_.records()[1].version, 3);
  EXPECT_FALSE(access_log_.records()[1].error.empty());
  EXPECT_EQ(access_log_.records()[2].status, 504);
  EXPECT_EQ(access_log_.records()[2].error, "the request timed out in the queue");
  EXPECT_EQ(access_log_.records()[2].inputs,
            R"([{"name":"INPUT0","datatype":"FP32","shape":[1,2]}])");
  EXPECT_EQ(access_log_.records()[2].total_ns, 0u);  // no stage durations for a failure
}

TEST_F(KServeLoggingTest, NoAccessLogNoRecords) {
  Recreate(false, true);
  EXPECT_EQ(Call("POST", "/v2/models/simple/infer", kJsonInfer).status, 200);
  EXPECT_TRUE(access_log_.records().empty());
}

TEST_F(KServeLoggingTest, GetLogging) {
  spdlog::default_logger()->set_level(spdlog::level::info);
  HttpResponse r = Call("GET", "/v2/logging");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(HeaderOf(r, "Content-Type"), "application/json");
  EXPECT_EQ(r.body, R"({"log_file":"","log_info":true,"log_warning":true,"log_error":true,)"
                    R"("log_verbose_level":0,"log_format":"json"})");
}

TEST_F(KServeLoggingTest, PostLoggingChangesTheLevel) {
  spdlog::default_logger()->set_level(spdlog::level::info);
  HttpResponse r = Call("POST", "/v2/logging", R"({"log_verbose_level":1})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr(R"("log_verbose_level":1)"));
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::debug);
  r = Call("POST", "/v2/logging", R"({"log_verbose_level":0,"log_info":false})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::warn);
  EXPECT_THAT(Call("GET", "/v2/logging").body, HasSubstr(R"("log_info":false,"log_warning":true)"));
}

TEST_F(KServeLoggingTest, PostLoggingRejects) {
  spdlog::default_logger()->set_level(spdlog::level::info);
  for (const char* body : {"not json", R"({"log_colour":true})", R"({"log_info":"yes"})",
                           R"({"log_warning":false})",  // info on, warning off: no threshold
                           R"({"log_format":"text"})", R"({"log_file":"/tmp/x.log"})"}) {
    HttpResponse r = Call("POST", "/v2/logging", body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
  }
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::info);  // nothing changed
  HttpResponse put = Call("PUT", "/v2/logging", "{}");
  EXPECT_EQ(put.status, 405);
  EXPECT_EQ(HeaderOf(put, "Allow"), "GET, HEAD, POST");
}

TEST_F(KServeLoggingTest, LoggingWithoutAControlIs501) {
  Recreate(true, false);
  EXPECT_EQ(Call("GET", "/v2/logging").status, 501);
}

}  // namespace
}  // namespace harrier::kserve
