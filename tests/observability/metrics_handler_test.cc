#include "observability/metrics_handler.h"

#include <gtest/gtest.h>

namespace harrier {
namespace {

HttpResponse Call(MetricsHandler& handler, std::string method, std::string target) {
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

std::string_view ContentType(const HttpResponse& r) {
  for (const auto& [k, v] : r.headers)
    if (k == "Content-Type") return v;
  return {};
}

TEST(MetricsHandlerTest, GetMetricsRunsEveryCollectorInOrder) {
  int scrapes = 0;
  MetricsHandler handler({
      [&](TextExposition* e) {
        ++scrapes;
        e->Declare("a", TextExposition::Type::kGauge, "A");
        e->Add("a", {}, uint64_t{1});
      },
      [](TextExposition* e) {
        e->Declare("b", TextExposition::Type::kGauge, "B");
        e->Add("b", {}, uint64_t{2});
      },
  });
  HttpResponse r = Call(handler, "GET", "/metrics?name[]=x");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(ContentType(r), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r.body, "# HELP a A\n# TYPE a gauge\na 1\n# HELP b B\n# TYPE b gauge\nb 2\n");
  Call(handler, "GET", "/metrics");
  EXPECT_EQ(scrapes, 2);  // fresh for every scrape
}

TEST(MetricsHandlerTest, OtherPathsAndMethodsAreRefused) {
  MetricsHandler handler({});
  EXPECT_EQ(Call(handler, "GET", "/").status, 404);
  EXPECT_EQ(Call(handler, "GET", "/metricsx").status, 404);
  HttpResponse r = Call(handler, "POST", "/metrics");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.body, "{\"error\":\"use GET on /metrics\"}");
  EXPECT_EQ(Call(handler, "HEAD", "/metrics").status, 200);  // as GET
}

}  // namespace
}  // namespace harrier
