// The REST server's connection figures as Prometheus families: how many are open against the
// limit (--max-connections), how many were refused for it, and how many accept() calls failed
// (file descriptors exhausted); and each TLS port's handshakes. main.cc reads them from the
// HttpServer at scrape time; nothing is recorded on the request path.
//
// Thread safety: stateless; call from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "observability/text_exposition.h"

namespace harrier {

struct ConnectionSample {
  int64_t open = 0;             // connections open now (HTTP/1.1, HTTP/2, TLS handshakes)
  uint64_t max = 0;             // the limit in force
  uint64_t refused = 0;         // closed at accept because the limit was reached, so far
  uint64_t failed_accepts = 0;  // accept() calls that failed, so far
};

// The server-wide budget of request bodies still arriving (--max-incoming-body-bytes).
struct IncomingBodySample {
  uint64_t held = 0;     // bytes held now
  uint64_t limit = 0;    // the budget
  uint64_t refused = 0;  // requests refused for it, so far
};

// harrier_incoming_body_bytes, harrier_incoming_body_limit_bytes,
// harrier_incoming_body_refusals_total.
void AppendIncomingBodyMetrics(const IncomingBodySample& sample, TextExposition* out);

// harrier_http_connections, harrier_http_max_connections,
// harrier_http_refused_connections_total, harrier_http_failed_accepts_total.
void AppendConnectionMetrics(const ConnectionSample& sample, TextExposition* out);

// harrier_metrics_refused_connections_total: connections the metrics port closed at once, for
// its limit of 64 or of 8 per client address.
void AppendMetricsPortRefusals(uint64_t refused, TextExposition* out);

// One port's TLS handshakes so far (HttpServer::tls_handshakes()).
struct TlsHandshakeSample {
  std::string_view port;  // the label: "http" (REST), "grpc", "metrics"
  uint64_t tls12 = 0;     // finished as TLS 1.2
  uint64_t tls13 = 0;     // finished as TLS 1.3
  uint64_t resumed = 0;   // of those, resumed sessions
  uint64_t failed = 0;    // failed after the client began
  uint64_t timed_out = 0;
};

// harrier_tls_handshakes_total{port,version}, harrier_tls_resumed_handshakes_total{port},
// harrier_tls_handshake_failures_total{port,reason}: one series set per sample (each port with
// TLS on); nothing without samples.
void AppendTlsMetrics(std::span<const TlsHandshakeSample> samples, TextExposition* out);

}  // namespace harrier
