// KServeHandler::Precheck: the early refusal a transport asks for before reading a body.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "protocol/kserve/kserve_handler.h"
#include "util/fake_model_manager.h"

namespace harrier::kserve {
namespace {

using ::harrier::testing::FakeModelManager;
using ::harrier::testing::FakeServableModel;

std::string HeaderOf(const HttpResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return std::string(v);
  return "";
}

class KServePrecheckTest : public ::testing::Test {
 protected:
  KServePrecheckTest() {
    simple_ = models_.AddReady("simple", 1);
    simple_v2_ = models_.AddReady("simple", 2);
    models_.AddState("broken", 1, ModelState::kUnavailable, "model.onnx: bad file");
    handler_ = std::make_unique<KServeHandler>(&models_, KServeHandler::Options{});
  }

  static HttpRequest Head(std::string method, std::string target,
                          std::vector<std::pair<std::string, std::string>> headers = {}) {
    HttpRequest head;
    head.method = std::move(method);
    head.target = std::move(target);
    head.headers = std::move(headers);
    return head;  // no body, no cancellation: what a transport has before the body
  }

  HttpResponse Handle(HttpRequest request) {
    request.body = std::make_shared<const std::string>(
        R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]}]})");
    std::optional<HttpResponse> response;
    handler_->Handle(std::move(request), [&](HttpResponse r) { response = std::move(r); });
    return response.value_or(HttpResponse{});
  }

  FakeModelManager models_;
  std::shared_ptr<FakeServableModel> simple_, simple_v2_;
  std::unique_ptr<KServeHandler> handler_;
};

const Status kOverloaded = ResourceExhausted(
    "model 'simple' is overloaded: predicted queue delay 30 ms over its 10 ms target; retry "
    "after 3 s");

// A refusal is the 429 that Handle() would answer for the same status, Retry-After included,
// counted as a failure of the version it was for.
TEST_F(KServePrecheckTest, RefusesWhatAdmissionRefusesWithTheSame429) {
  simple_v2_->admission = kOverloaded;
  std::optional<HttpResponse> early = handler_->Precheck(Head(
      "POST", "/v2/models/simple/infer", {{"x-client-id", "team-a"}, {"x-request-id", "req-1"}}));
  ASSERT_TRUE(early.has_value());
  EXPECT_EQ(HeaderOf(*early, "X-Request-Id"), "req-1");
  EXPECT_EQ(early->status, 429);
  EXPECT_EQ(HeaderOf(*early, "Retry-After"), "3");
  EXPECT_EQ(HeaderOf(*early, "Content-Type"), "application/json");
  EXPECT_NE(early->body.find("predicted queue delay 30 ms"), std::string::npos) << early->body;
  EXPECT_EQ(simple_v2_->admission_client, "team-a");
  EXPECT_EQ(simple_v2_->recorded_failures, std::vector<StatusCode>{StatusCode::kResourceExhausted});
  EXPECT_EQ(simple_->admission_checks, 0);  // the latest version was asked

  // What Infer answers when the model refuses with the same status.
  simple_v2_->infer = [](const InferenceRequest&) -> StatusOr<InferenceResponse> {
    return kOverloaded;
  };
  HttpResponse late = Handle(Head("POST", "/v2/models/simple/infer", {{"x-request-id", "req-1"}}));
  EXPECT_EQ(late.status, early->status);
  EXPECT_EQ(late.headers, early->headers);
  EXPECT_EQ(late.body, early->body);
}

TEST_F(KServePrecheckTest, AskedVersionAndFirstClientId) {
  simple_->admission = kOverloaded;
  EXPECT_FALSE(handler_->Precheck(Head("POST", "/v2/models/simple/infer")).has_value());
  auto early = handler_->Precheck(Head("POST", "/v2/models/simple/versions/1/infer?x=1",
                                       {{"x-client-id", "a"}, {"x-client-id", "b"}}));
  ASSERT_TRUE(early.has_value());
  EXPECT_EQ(early->status, 429);
  EXPECT_EQ(simple_->admission_client, "a");
  // No X-Client-Id: the anonymous client (empty).
  handler_->Precheck(Head("POST", "/v2/models/simple/versions/1/infer"));
  EXPECT_EQ(simple_->admission_client, "");
}

// Everything but an admission refusal of an inference request is left to Handle().
TEST_F(KServePrecheckTest, NoOpinionOnAnythingElse) {
  simple_->admission = kOverloaded;
  simple_v2_->admission = kOverloaded;
  const HttpRequest heads[] = {
      Head("GET", "/v2/models/simple/infer"),  // wrong method: Handle's 405
      Head("GET", "/v2/models/simple"),        // metadata
      Head("GET", "/v2/health/ready"),
      Head("POST", "/v2/repository/index"),                // another POST route
      Head("POST", "/v2/models/simple/versions/0/infer"),  // bad version: Handle's 400
      Head("POST", "/v2/models/simple/versions/9/infer"),  // unknown version
      Head("POST", "/v2/models/nope/infer"),               // unknown model
      Head("POST", "/v2/models/broken/infer"),             // not ready
      Head("POST", "/v2/models/simple/infer/extra"),       // unknown path
      Head("POST", "/v3/models/simple/infer"),
  };
  for (const HttpRequest& head : heads) {
    SCOPED_TRACE(head.method + " " + head.target);
    EXPECT_FALSE(handler_->Precheck(head).has_value());
  }
  EXPECT_EQ(simple_->admission_checks + simple_v2_->admission_checks, 0);
  // Admission says yes, or answers something else than a refusal: no opinion either.
  simple_v2_->admission = Status::Ok();
  EXPECT_FALSE(handler_->Precheck(Head("POST", "/v2/models/simple/infer")).has_value());
  simple_v2_->admission = Unavailable("shutting down");
  EXPECT_FALSE(handler_->Precheck(Head("POST", "/v2/models/simple/infer")).has_value());
  EXPECT_EQ(simple_v2_->admission_checks, 2);
  EXPECT_TRUE(simple_v2_->recorded_failures.empty());
}

// Percent-encoded model names route as they do in Handle().
TEST_F(KServePrecheckTest, PercentEncodedModelNames) {
  auto spaced = models_.AddReady("my model", 1);
  spaced->admission = kOverloaded;
  auto early = handler_->Precheck(Head("POST", "/v2/models/my%20model/infer"));
  ASSERT_TRUE(early.has_value());
  EXPECT_EQ(early->status, 429);
}

}  // namespace
}  // namespace harrier::kserve
