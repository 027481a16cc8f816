#include "observability/metrics_handler.h"

#include <string>
#include <string_view>
#include <utility>

namespace harrier {
namespace {

HttpResponse Error(int status, std::string_view message) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  // The messages below are constants without characters that need JSON escaping.
  r.body = "{\"error\":\"" + std::string(message) + "\"}";
  return r;
}

}  // namespace

MetricsHandler::MetricsHandler(std::vector<Collector> collectors, Encoder encode)
    : collectors_(std::move(collectors)), encode_(std::move(encode)) {}

std::string MetricsHandler::Scrape() const {
  TextExposition exposition;
  for (const Collector& collect : collectors_) collect(&exposition);
  return exposition.Text();
}

void MetricsHandler::Handle(HttpRequest&& request, HttpResponder respond) {
  std::string_view path = request.target;
  path = path.substr(0, path.find('?'));
  if (path != "/metrics") return respond(Error(404, "unknown path: metrics are at /metrics"));
  if (!IsGetOrHead(request.method)) {
    HttpResponse r = Error(405, "use GET on /metrics");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return respond(std::move(r));
  }
  HttpResponse r;
  r.headers.emplace_back("Content-Type", std::string(TextExposition::kContentType));
  r.headers.emplace_back("Vary", "Accept-Encoding");
  r.body = Scrape();
  const std::string_view accept = request.Header("accept-encoding");
  if (encode_ && !accept.empty()) {
    if (auto encoded = encode_(accept, r.body)) {
      r.headers.emplace_back("Content-Encoding", std::move(encoded->first));
      r.body = std::move(encoded->second);
    }
  }
  respond(std::move(r));
}

}  // namespace harrier
