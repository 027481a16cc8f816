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

// One series set per port with TLS on, by version and failure reason; nothing without TLS.
TEST(ConnectionMetricsTest, TlsHandshakesPerPort) {
  TextExposition none;
  AppendTlsMetrics({}, &none);
  EXPECT_EQ(none.Text(), "");
  const TlsHandshakeSample samples[] = {{"http", 5, 7, 2, 3, 1}, {"grpc", 0, 4, 0, 1, 0}};
  TextExposition e;
  AppendTlsMetrics(samples, &e);
  const std::string text = e.Text();
  EXPECT_THAT(text,
              HasSubstr("# TYPE harrier_tls_handshakes_total counter\n"
                        "harrier_tls_handshakes_total{port=\"http\",version=\"TLSv1.2\"} 5\n"
                        "harrier_tls_handshakes_total{port=\"http\",version=\"TLSv1.3\"} 7\n"
                        "harrier_tls_handshakes_total{port=\"grpc\",version=\"TLSv1.2\"} 0\n"
                        "harrier_tls_handshakes_total{port=\"grpc\",version=\"TLSv1.3\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("harrier_tls_resumed_handshakes_total{port=\"http\"} 2\n"));
  EXPECT_THAT(
      text, HasSubstr("harrier_tls_handshake_failures_total{port=\"http\",reason=\"error\"} 3\n"
                      "harrier_tls_handshake_failures_total{port=\"http\",reason=\"timeout\"} 1\n"
                      "harrier_tls_handshake_failures_total{port=\"grpc\",reason=\"error\"} 1\n"));
}

}  // namespace
}  // namespace harrier
