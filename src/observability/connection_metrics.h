// The REST server's connection figures as Prometheus families: how many are open against the
// limit (--max-connections), how many were refused for it, and how many accept() calls failed
// (file descriptors exhausted). main.cc reads them from the HttpServer at scrape time; nothing
// is recorded on the request path.
//
// Thread safety: stateless; call from any thread.
#pragma once

#include <cstdint>

#include "observability/text_exposition.h"

namespace harrier {

struct ConnectionSample {
  int64_t open = 0;             // connections open now (HTTP/1.1, HTTP/2, TLS handshakes)
  uint64_t max = 0;             // the limit in force
  uint64_t refused = 0;         // closed at accept because the limit was reached, so far
  uint64_t failed_accepts = 0;  // accept() calls that failed, so far
};

// harrier_http_connections, harrier_http_max_connections,
// harrier_http_refused_connections_total, harrier_http_failed_accepts_total.
void AppendConnectionMetrics(const ConnectionSample& sample, TextExposition* out);

}  // namespace harrier
