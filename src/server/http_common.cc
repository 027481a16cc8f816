#include "server/http_common.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <mutex>
#include <optional>
#include <utility>

#include "core/json_writer.h"
#include "core/request_id.h"
#include "core/route_answer.h"
#include "server/io_thread.h"

namespace harrier::server_internal {

const std::shared_ptr<const std::string>& EmptyBody() {
  static const std::shared_ptr<const std::string> empty = [] {
    auto s = std::make_shared<std::string>();
    s->reserve(kBodyPadding);
    return std::shared_ptr<const std::string>(std::move(s));
  }();
  return empty;
}

HttpResponse JsonErrorResponse(int status, std::string_view message,
                               std::string_view content_type_name) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back(std::string(content_type_name), "application/json");
  r.body = "{\"error\":";
  AppendJsonString(&r.body, message);
  r.body += "}";
  return r;
}

HttpResponse TransportErrorResponse(int status, std::string_view message,
                                    std::string_view content_type_name, const HttpRequest& request,
                                    uint64_t request_bytes, AccessLog* access_log,
                                    HttpHandler* handler) {
  std::optional<HttpResponse> shaped;
  if (handler != nullptr) shaped = handler->TransportError(status, message, request, {});
  HttpResponse r =
      shaped ? std::move(*shaped) : JsonErrorResponse(status, message, content_type_name);
  // Every REST response names its request (docs/logging.md), these too: an error path, so the
  // id's cost does not matter, and a client can match a refusal to the log line.
  std::string request_id =
      ResolveRequestId(request.Header("x-request-id"), RequestIdGenerator::Process());
  WriteRouteAccessLine(access_log, request, request_id, status, request_bytes, r.body.size(),
                       message);
  r.headers.emplace_back("X-Request-Id", std::move(request_id));
  return r;
}

HttpResponse IncomingBodiesRefusal(const IncomingBodies& budget, std::string_view content_type_name,
                                   const HttpRequest& request, uint64_t request_bytes,
                                   AccessLog* access_log, HttpHandler* handler) {
  HttpResponse r = TransportErrorResponse(
      503,
      "the server holds its limit of " + std::to_string(budget.limit()) +
          " bytes of request bodies still arriving, on all connections together "
          "(--max-incoming-body-bytes); retry after 1 s",
      content_type_name, request, request_bytes, access_log, handler);
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

void LogIncomingRefusal(ServerShared& shared) {
  uint64_t events = 0;
  {
    std::lock_guard lock(shared.incoming_log_mu);
    events = shared.incoming_refusals.Event(std::chrono::steady_clock::now());
  }
  if (events == 0) return;
  const IncomingBodies& budget = *shared.options.incoming_bodies;
  spdlog::warn(
      "{}: {} request(s) refused (503, or a gRPC stream reset): request bodies still arriving "
      "hold the server's limit of {} bytes (--max-incoming-body-bytes; {} held now)",
      shared.options.name, events, budget.limit(), budget.held());
}

void ReportSent(std::function<void(bool, std::chrono::steady_clock::time_point)>* on_sent,
                bool sent, std::chrono::steady_clock::time_point at) {
  if (!*on_sent) return;
  auto callback = std::move(*on_sent);
  *on_sent = nullptr;  // a moved-from std::function is only "valid but unspecified"
  try {
    callback(sent, sent ? at : std::chrono::steady_clock::time_point{});
  } catch (const std::exception& e) {
    spdlog::error("http: a response's on_sent callback threw: {}", e.what());
  }
}

void ReportSent(HttpResponse* response, bool sent, std::chrono::steady_clock::time_point at) {
  ReportSent(&response->on_sent, sent, at);
}

}  // namespace harrier::server_internal
