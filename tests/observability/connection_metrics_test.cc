#include "observability/connection_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace harrier {
namespace {

using ::testing::HasSubstr;

TEST(ConnectionMetricsTest, Exposition) {
  ConnectionSample s;
  s.open = 12;
  s.max = 896;
  s.refused = 3;
  s.failed_accepts = 41;
  TextExposition e;
  AppendConnectionMetrics(s, &e);
  const std::string text = e.Text();
  EXPECT_THAT(text,
              HasSubstr("# TYPE harrier_http_connections gauge\nharrier_http_connections 12\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE harrier_http_max_connections gauge\n"
                              "harrier_http_max_connections 896\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE harrier_http_refused_connections_total counter\n"
                              "harrier_http_refused_connections_total 3\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE harrier_http_failed_accepts_total counter\n"
                              "harrier_http_failed_accepts_total 41\n"));
}

}  // namespace
}  // namespace harrier
