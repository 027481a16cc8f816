// DashboardHandler: the status page (docs/dashboard.md) in front of another HttpHandler.
//
//   GET /, GET /dashboard        the page: one HTML document, inline CSS and JS, no external
//                                resources (dashboard_page.h)
//   GET /v2/dashboard/summary    its data: DashboardSummaryJson() of the versions `source`
//                                returns
// Any other request, and every Precheck(), goes to `next` untouched, so the inference path
// pays one path comparison and nothing else; the summary is built only when the page asks,
// on the I/O thread that received the request. Another method on these paths: 405 with Allow.
// Its own answers carry X-Request-Id and get their access line, as every route's do.
//
// Thread safety: Handle() and Precheck() from any thread; `source` must be callable from any
// I/O thread and must not block for long.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "harrier/access_log.h"
#include "harrier/http_message.h"
#include "observability/dashboard_summary.h"

namespace harrier {

class DashboardHandler : public HttpHandler {
 public:
  using Source = std::function<std::vector<DashboardVersion>()>;

  // `next` is not owned and must outlive the handler; so must `access_log` (null: no lines),
  // where each request this handler answers itself gets its line (core/route_answer.h).
  DashboardHandler(Source source, HttpHandler* next, AccessLog* access_log = nullptr);

  void Handle(HttpRequest&& request, HttpResponder respond) override;
  std::optional<HttpResponse> Precheck(const HttpRequest& head) override;
  std::optional<HttpResponse> TransportError(int status, std::string_view message,
                                             const HttpRequest& request,
                                             std::string_view code) override;

  // The body GET /v2/dashboard/summary answers.
  std::string SummaryJson() const;

 private:
  // Constant after construction.
  const Source source_;
  HttpHandler* const next_;
  AccessLog* const access_log_;
};

}  // namespace harrier
