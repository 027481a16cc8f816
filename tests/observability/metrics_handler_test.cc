#include "observability/metrics_handler.h"

#include <gtest/gtest.h>

namespace harrier {
namespace {

HttpResponse Call(MetricsHandler& handler, std::string method, std::string target,
                  std::vector<std::pair<std::string, std::string>> headers = {}) {
  HttpRequest request;
  request.method = std::move(method);
  request.target = std::move(target);
  request.headers = std::move(headers);
  HttpResponse response;
  bool called = false;
  handler.Handle(std::move(request), [&](HttpResponse r) {
    response = std::move(r);
    called = true;
  });
  EXPECT_TRUE(called);
  return response;
}

std::string_view HeaderOf(const HttpResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return {};
}

std::string_view ContentType(const HttpResponse& r) {
  return HeaderOf(r, "Content-Type");
}

// A scraper that asks for a coding gets the scrape in it, through the encoder main.cc gives
// (zlib's); one that does not, or when the encoder declines, the text as it is.
TEST(MetricsHandlerTest, AScrapeIsEncodedWhenTheScraperAsksAndTheEncoderCan) {
  std::vector<std::string> asked;
  MetricsHandler handler(
      {[](TextExposition* e) {
        e->Declare("a", TextExposition::Type::kGauge, "A");
        e->Add("a", {}, uint64_t{1});
      }},
      [&](std::string_view accept,
          std::string_view body) -> std::optional<std::pair<std::string, std::string>> {
        asked.emplace_back(accept);
        if (accept != "gzip") return std::nullopt;
        return std::make_pair(std::string("gzip"), "z(" + std::string(body) + ")");
      });
  const std::string text = "# HELP a A\n# TYPE a gauge\na 1\n";
  HttpResponse gz = Call(handler, "GET", "/metrics", {{"accept-encoding", "gzip"}});
  EXPECT_EQ(HeaderOf(gz, "Content-Encoding"), "gzip");
  EXPECT_EQ(HeaderOf(gz, "Vary"), "Accept-Encoding");
  EXPECT_EQ(gz.body, "z(" + text + ")");
  HttpResponse other = Call(handler, "GET", "/metrics", {{"accept-encoding", "br"}});
  EXPECT_EQ(HeaderOf(other, "Content-Encoding"), "");
  EXPECT_EQ(other.body, text);
  HttpResponse none = Call(handler, "GET", "/metrics");
  EXPECT_EQ(none.body, text);
  EXPECT_EQ(asked, (std::vector<std::string>{"gzip", "br"}));  // not asked without the header
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
