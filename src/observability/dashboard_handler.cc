#include "observability/dashboard_handler.h"

#include <string>
#include <string_view>
#include <utility>

#include "core/request_id.h"
#include "core/route_answer.h"
#include "observability/dashboard_page.h"

namespace harrier {
namespace {

constexpr std::string_view kSummaryPath = "/v2/dashboard/summary";

// What a browser may do with the page (probe 61: it had no such header): run its own inline
// script and styles and fetch from this server only, post no form, be framed by no other page
// (clickjacking), send no Referer; and no type sniffing, for the page and its JSON.
constexpr std::string_view kPagePolicy =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

HttpResponse Body(std::string_view content_type, std::string body, bool page) {
  HttpResponse r;
  r.headers.emplace_back("Content-Type", std::string(content_type));
  r.headers.emplace_back("Cache-Control", "no-store");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  if (page) {
    r.headers.emplace_back("Content-Security-Policy", std::string(kPagePolicy));
    r.headers.emplace_back("X-Frame-Options", "DENY");
    r.headers.emplace_back("Referrer-Policy", "no-referrer");
  }
  r.body = std::move(body);
  return r;
}

}  // namespace

DashboardHandler::DashboardHandler(Source source, HttpHandler* next, AccessLog* access_log)
    : source_(std::move(source)), next_(next), access_log_(access_log) {}

std::string DashboardHandler::SummaryJson() const {
  return DashboardSummaryJson(source_(), HistogramBuckets::Latency().upper_bounds);
}

std::optional<HttpResponse> DashboardHandler::Precheck(const HttpRequest& head) {
  return next_->Precheck(head);
}

std::optional<HttpResponse> DashboardHandler::TransportError(int status, std::string_view message,
                                                             const HttpRequest& request,
                                                             std::string_view code) {
  return next_->TransportError(status, message, request, code);
}

void DashboardHandler::Handle(HttpRequest&& request, HttpResponder respond) {
  std::string_view path = request.target;
  path = path.substr(0, path.find('?'));
  const bool page = path == "/" || path == "/dashboard";
  if (!page && path != kSummaryPath) return next_->Handle(std::move(request), std::move(respond));
  const std::string request_id =
      ResolveRequestId(request.Header("x-request-id"), RequestIdGenerator::Process());
  auto answer = [&](HttpResponse r) {
    AnswerRoute(access_log_, request, request_id, std::move(r), respond);
  };
  if (!IsGetOrHead(request.method)) {
    HttpResponse r;
    r.status = 405;
    r.headers.emplace_back("Content-Type", "application/json");
    r.headers.emplace_back("Allow", "GET, HEAD");
    r.body = "{\"error\":\"use GET on this path\"}";
    return answer(std::move(r));
  }
  if (page) return answer(Body("text/html; charset=utf-8", std::string(DashboardPageHtml()), true));
  answer(Body("application/json", SummaryJson(), false));
}

}  // namespace harrier
