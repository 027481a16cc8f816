#include "core/route_answer.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace harrier {
namespace {

class Lines : public AccessLog {
 public:
  void Write(const AccessRecord& r) override {
    lines.push_back({std::string(r.request_id), std::string(r.method), std::string(r.target),
                     r.status, std::string(r.error), std::string(r.key_id), r.request_bytes,
                     r.response_bytes});
  }
  struct Line {
    std::string request_id, method, target;
    int status;
    std::string error, key_id;
    uint64_t request_bytes, response_bytes;
  };
  std::vector<Line> lines;
};

HttpResponse Json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

TEST(RouteAnswerTest, ErrorMessageOfReadsKServesAndOpenAisErrorShapes) {
  EXPECT_EQ(ErrorMessageOf(Json(404, R"({"error":"no such model"})")), "no such model");
  EXPECT_EQ(ErrorMessageOf(Json(404, R"({"error":{"message":"no model 'x'","type":"t"}})")),
            "no model 'x'");
  EXPECT_EQ(ErrorMessageOf(Json(500, "not json")), "not json");
  EXPECT_EQ(ErrorMessageOf(Json(400, R"({"error":{"code":1}})")), R"({"error":{"code":1}})");
  EXPECT_EQ(ErrorMessageOf(Json(200, R"({"error":"ignored below 400"})")), "");
}

TEST(RouteAnswerTest, AnswerRouteGivesTheIdAndWritesOneLine) {
  Lines log;
  HttpRequest request;
  request.method = "GET";
  request.target = "/v2/models/m?x=1";
  request.auth_key_id = "ops";
  request.body = std::make_shared<const std::string>("abc");
  std::optional<HttpResponse> answered;
  AnswerRoute(&log, request, "id-1", Json(404, R"({"error":"gone"})"),
              [&](HttpResponse r) { answered = std::move(r); });
  ASSERT_TRUE(answered);
  ASSERT_EQ(answered->headers.size(), 1u);
  EXPECT_EQ(answered->headers[0].name, "X-Request-Id");
  EXPECT_EQ(answered->headers[0].value, "id-1");
  ASSERT_EQ(log.lines.size(), 1u);
  const Lines::Line& line = log.lines[0];
  EXPECT_EQ(line.request_id, "id-1");
  EXPECT_EQ(line.method, "GET");
  EXPECT_EQ(line.target, "/v2/models/m?x=1");
  EXPECT_EQ(line.status, 404);
  EXPECT_EQ(line.error, "gone");
  EXPECT_EQ(line.key_id, "ops");
  EXPECT_EQ(line.request_bytes, 3u);
  EXPECT_EQ(line.response_bytes, answered->body.size());

  // A HEAD answer's body is never sent.
  request.method = "HEAD";
  AnswerRoute(&log, request, "id-3", Json(200, "{\"a\":1}"), [](HttpResponse) {});
  ASSERT_EQ(log.lines.size(), 2u);
  EXPECT_EQ(log.lines[1].response_bytes, 0u);
  log.lines.pop_back();

  answered.reset();
  AnswerRoute(nullptr, request, "id-2", Json(200, "{}"),
              [&](HttpResponse r) { answered = std::move(r); });
  EXPECT_TRUE(answered);  // no log: answered all the same
  EXPECT_EQ(log.lines.size(), 1u);
}

}  // namespace
}  // namespace harrier
