// MetricsHandler: the HttpHandler of the metrics port. GET /metrics answers the Prometheus text
// exposition (text_exposition.h) that its collectors build, fresh for every scrape; any other
// path is 404 and any other method on /metrics 405, with `{"error": "..."}` bodies like the
// rest of the server.
//
// Collectors are functions so that this handler knows nothing about models: main.cc passes the
// model manager's and the process's (see docs/metrics.md). The encoder likewise (zlib's, from
// the front ends' content codings), applied when a scraper's Accept-Encoding asks for it.
//
// Thread safety: Handle() from any thread; a collector must be callable from the metrics
// server's I/O thread and must not block for long (it holds up only other scrapes).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harrier/http_message.h"
#include "observability/text_exposition.h"

namespace harrier {

class MetricsHandler : public HttpHandler {
 public:
  using Collector = std::function<void(TextExposition*)>;
  // The scrape in the coding the request's Accept-Encoding asks for: its Content-Encoding and
  // the encoded body, or nullopt to answer it as it is. Prometheus asks for gzip on every
  // scrape, and the text is ~23 KB per model version (probe 32).
  using Encoder = std::function<std::optional<std::pair<std::string, std::string>>(
      std::string_view accept_encoding, std::string_view body)>;

  // `encode` may be empty: never encoded.
  explicit MetricsHandler(std::vector<Collector> collectors, Encoder encode = {});

  void Handle(HttpRequest&& request, HttpResponder respond) override;

  // The exposition every collector builds, in collector order.
  std::string Scrape() const;

 private:
  const std::vector<Collector> collectors_;  // constant after construction
  const Encoder encode_;
};

}  // namespace harrier
