#include "observability/connection_metrics.h"

#include <algorithm>

namespace harrier {

void AppendConnectionMetrics(const ConnectionSample& sample, TextExposition* out) {
  using Type = TextExposition::Type;
  out->Declare("harrier_http_connections", Type::kGauge,
               "Connections open on the REST port(s): HTTP/1.1, HTTP/2 and TLS handshakes");
  out->Add("harrier_http_connections", {},
           static_cast<uint64_t>(std::max<int64_t>(0, sample.open)));
  out->Declare("harrier_http_max_connections", Type::kGauge,
               "Most connections the REST port(s) keep open at once (--max-connections)");
  out->Add("harrier_http_max_connections", {}, sample.max);
  out->Declare("harrier_http_refused_connections_total", Type::kCounter,
               "Connections closed as soon as they were accepted because the limit was reached");
  out->Add("harrier_http_refused_connections_total", {}, sample.refused);
  out->Declare("harrier_http_failed_accepts_total", Type::kCounter,
               "accept() calls that failed, e.g. with no file descriptor left (EMFILE)");
  out->Add("harrier_http_failed_accepts_total", {}, sample.failed_accepts);
}

void AppendIncomingBodyMetrics(const IncomingBodySample& sample, TextExposition* out) {
  using Type = TextExposition::Type;
  out->Declare("harrier_incoming_body_bytes", Type::kGauge,
               "Bytes of request bodies still arriving, REST and gRPC ports together");
  out->Add("harrier_incoming_body_bytes", {}, sample.held);
  out->Declare("harrier_incoming_body_limit_bytes", Type::kGauge,
               "The most bytes of request bodies still arriving the server holds at once "
               "(--max-incoming-body-bytes)");
  out->Add("harrier_incoming_body_limit_bytes", {}, sample.limit);
  out->Declare("harrier_incoming_body_refusals_total", Type::kCounter,
               "Requests refused (503, or a gRPC stream reset) because their body would have "
               "passed that limit");
  out->Add("harrier_incoming_body_refusals_total", {}, sample.refused);
}

void AppendMetricsPortRefusals(uint64_t refused, TextExposition* out) {
  out->Declare("harrier_metrics_refused_connections_total", TextExposition::Type::kCounter,
               "Connections the metrics port closed as soon as they were accepted: its limit "
               "of 64, or of 8 from one client address, was reached");
  out->Add("harrier_metrics_refused_connections_total", {}, refused);
}

void AppendTlsMetrics(std::span<const TlsHandshakeSample> samples, TextExposition* out) {
  using Type = TextExposition::Type;
  if (samples.empty()) return;
  out->Declare("harrier_tls_handshakes_total", Type::kCounter,
               "TLS handshakes finished, by port and TLS version (resumed ones included)");
  out->Declare("harrier_tls_resumed_handshakes_total", Type::kCounter,
               "TLS handshakes that resumed a session from a ticket");
  out->Declare("harrier_tls_handshake_failures_total", Type::kCounter,
               "TLS handshakes that failed after the client began (error) or did not finish "
               "within the header timeout (timeout)");
  for (const TlsHandshakeSample& s : samples) {
    const std::string_view port = s.port;
    out->Add("harrier_tls_handshakes_total", {{"port", port}, {"version", "TLSv1.2"}}, s.tls12);
    out->Add("harrier_tls_handshakes_total", {{"port", port}, {"version", "TLSv1.3"}}, s.tls13);
    out->Add("harrier_tls_resumed_handshakes_total", {{"port", port}}, s.resumed);
    out->Add("harrier_tls_handshake_failures_total", {{"port", port}, {"reason", "error"}},
             s.failed);
    out->Add("harrier_tls_handshake_failures_total", {{"port", port}, {"reason", "timeout"}},
             s.timed_out);
  }
}

}  // namespace harrier
