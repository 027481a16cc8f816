#include "observability/dashboard_handler.h"

#include <gtest/gtest.h>

#include <string>

#include "observability/dashboard_page.h"
#include "util/recording_access_log.h"

namespace harrier {
namespace {

// The handler behind the dashboard: records what reached it.
class RecordingHandler : public HttpHandler {
 public:
  void Handle(HttpRequest&& request, HttpResponder respond) override {
    targets.push_back(request.target);
    HttpResponse r;
    r.status = 299;
    respond(std::move(r));
  }
  std::optional<HttpResponse> Precheck(const HttpRequest& head) override {
    ++prechecks;
    if (head.target == "/refuse") {
      HttpResponse r;
      r.status = 429;
      return r;
    }
    return std::nullopt;
  }
  std::vector<std::string> targets;
  int prechecks = 0;
};

HttpResponse Call(HttpHandler& handler, std::string method, std::string target) {
  HttpRequest request;
  request.method = std::move(method);
  request.target = std::move(target);
  HttpResponse response;
  bool called = false;
  handler.Handle(std::move(request), [&](HttpResponse r) {
    response = std::move(r);
    called = true;
  });
  EXPECT_TRUE(called);
  return response;
}

std::string_view Header(const HttpResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return {};
}

struct Fixture {
  int reads = 0;
  RecordingHandler next;
  testing::RecordingAccessLog log;
  DashboardHandler handler{[this] {
                             ++reads;
                             DashboardVersion v;
                             v.state = {"simple", 1, ModelState::kReady, ""};
                             return std::vector<DashboardVersion>{v};
                           },
                           &next, &log};
};

TEST(DashboardHandlerTest, ServesThePageAtRootAndDashboard) {
  Fixture f;
  for (const char* target : {"/", "/dashboard", "/dashboard?x=1"}) {
    HttpResponse r = Call(f.handler, "GET", target);
    EXPECT_EQ(r.status, 200) << target;
    EXPECT_EQ(Header(r, "Content-Type"), "text/html; charset=utf-8");
    EXPECT_EQ(r.body, DashboardPageHtml());
  }
  EXPECT_EQ(f.reads, 0);  // the page itself reads nothing
  EXPECT_TRUE(f.next.targets.empty());
}

TEST(DashboardHandlerTest, PageIsSelfContained) {
  const std::string_view page = DashboardPageHtml();
  EXPECT_NE(page.find("/v2/dashboard/summary"), std::string_view::npos);
  for (std::string_view external : {"http://", "https://", "src=", "<link"})
    EXPECT_EQ(page.find(external), std::string_view::npos) << external;
}

TEST(DashboardHandlerTest, SummaryReadsTheSourceEachTime) {
  Fixture f;
  HttpResponse r = Call(f.handler, "GET", "/v2/dashboard/summary");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Header(r, "Content-Type"), "application/json");
  EXPECT_NE(r.body.find("\"name\":\"simple\""), std::string::npos);
  EXPECT_NE(r.body.find("\"state\":\"READY\""), std::string::npos);
  Call(f.handler, "GET", "/v2/dashboard/summary");
  EXPECT_EQ(f.reads, 2);
}

TEST(DashboardHandlerTest, OtherMethodsAreRefused) {
  Fixture f;
  HttpResponse r = Call(f.handler, "POST", "/v2/dashboard/summary");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(Header(r, "Allow"), "GET, HEAD");
  EXPECT_EQ(Call(f.handler, "DELETE", "/").status, 405);
  EXPECT_EQ(Call(f.handler, "HEAD", "/").status, 200);  // as GET; the transport drops the body
  EXPECT_TRUE(f.next.targets.empty());
}

TEST(DashboardHandlerTest, EverythingElseGoesToTheNextHandler) {
  Fixture f;
  EXPECT_EQ(Call(f.handler, "POST", "/v2/models/simple/infer").status, 299);
  EXPECT_EQ(Call(f.handler, "GET", "/v2/dashboard").status, 299);
  EXPECT_EQ(Call(f.handler, "GET", "/dashboardx").status, 299);
  EXPECT_EQ(f.next.targets,
            (std::vector<std::string>{"/v2/models/simple/infer", "/v2/dashboard", "/dashboardx"}));
  HttpRequest head;
  head.method = "POST";
  head.target = "/refuse";
  ASSERT_TRUE(f.handler.Precheck(head).has_value());
  head.target = "/v2/models/simple/infer";
  EXPECT_FALSE(f.handler.Precheck(head).has_value());
  EXPECT_EQ(f.next.prechecks, 2);
  EXPECT_EQ(f.reads, 0);
}

// Its own answers have an X-Request-Id and one access line each (probe 41: none had a line);
// what it passes on is the next handler's to log.
TEST(DashboardHandlerTest, EachOfItsAnswersHasOneAccessLine) {
  Fixture f;
  HttpResponse page = Call(f.handler, "GET", "/dashboard");
  EXPECT_FALSE(Header(page, "X-Request-Id").empty());
  Call(f.handler, "GET", "/v2/dashboard/summary");
  Call(f.handler, "POST", "/dashboard");
  Call(f.handler, "GET", "/v2/models/simple");
  const auto lines = f.log.records();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].target, "/dashboard");
  EXPECT_EQ(lines[0].status, 200);
  EXPECT_EQ(lines[0].request_id, Header(page, "X-Request-Id"));
  EXPECT_EQ(lines[0].response_bytes, DashboardPageHtml().size());
  EXPECT_EQ(lines[1].target, "/v2/dashboard/summary");
  EXPECT_EQ(lines[2].method, "POST");
  EXPECT_EQ(lines[2].status, 405);
  EXPECT_EQ(lines[2].error, "use GET on this path");
}

}  // namespace
}  // namespace harrier
