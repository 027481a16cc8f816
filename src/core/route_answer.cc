#include "core/route_answer.h"

#include <simdjson.h>

#include <utility>

namespace harrier {

std::string ErrorMessageOf(const HttpResponse& response) {
  if (response.status < 400) return {};
  simdjson::dom::parser parser;
  simdjson::dom::element body;
  if (parser.parse(simdjson::padded_string(response.body)).get(body)) return response.body;
  std::string_view message;
  if (!body["error"].get_string().get(message)) return std::string(message);  // KServe's
  if (!body["error"]["message"].get_string().get(message)) return std::string(message);
  return response.body;
}

void WriteRouteAccessLine(AccessLog* access_log, const HttpRequest& request,
                          std::string_view request_id, int status, uint64_t request_bytes,
                          uint64_t response_bytes, std::string_view error) {
  if (access_log == nullptr) return;
  AccessRecord record;
  record.request_id = request_id;
  record.protocol = "http";
  record.http_version = request.version;
  record.tls_version = request.tls_version;
  record.method = request.method;
  record.target = request.target;
  record.status = status;
  record.error = error;
  record.key_id = request.auth_key_id;
  record.request_bytes = request_bytes;
  record.response_bytes = response_bytes;
  access_log->Write(record);
}

void AnswerRoute(AccessLog* access_log, const HttpRequest& request, std::string_view request_id,
                 HttpResponse response, const HttpResponder& respond) {
  response.headers.emplace_back(kRequestIdHeader, request_id);
  if (access_log != nullptr) {
    // A HEAD answer's body is never sent (the transport drops it): no bytes (probe 42).
    WriteRouteAccessLine(
        access_log, request, request_id, response.status, request.body ? request.body->size() : 0,
        request.method == "HEAD" ? 0 : response.body.size(), ErrorMessageOf(response));
  }
  respond(std::move(response));
}

}  // namespace harrier
