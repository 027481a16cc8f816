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

}  // namespace harrier
