// MetricsHandler: the HttpHandler of the metrics port. GET /metrics answers the Prometheus text
// exposition (text_exposition.h) that its collectors build, fresh for every scrape; any other
// path is 404 and any other method on /metrics 405, with `{"error": "..."}` bodies like the
// rest of the server.
//
// Collectors are functions so that this handler knows nothing about models: main.cc passes the
// model manager's and the process's (see docs/metrics.md).
//
// Thread safety: Handle() from any thread; a collector must be callable from the metrics
// server's I/O thread and must not block for long (it holds up only other scrapes).
#pragma once

#include <functional>
#include <vector>

#include "harrier/http_message.h"
#include "observability/text_exposition.h"

namespace harrier {

class MetricsHandler : public HttpHandler {
 public:
  using Collector = std::function<void(TextExposition*)>;

  explicit MetricsHandler(std::vector<Collector> collectors);

  void Handle(HttpRequest&& request, HttpResponder respond) override;

  // The exposition every collector builds, in collector order.
  std::string Scrape() const;

 private:
  const std::vector<Collector> collectors_;  // constant after construction
};

}  // namespace harrier
