// Pieces the HTTP/1.1 and HTTP/2 connections share: request-body padding, the empty body,
// header-name comparison, the JSON error body the server writes itself and the access record of
// a request the server refuses itself.
//
// Thread safety: every function may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/http_text.h"  // IEquals, TrimOws: every user of this header reads fields
#include "harrier/access_log.h"
#include "harrier/http_message.h"
#include "server/incoming_bodies.h"

namespace harrier::server_internal {

struct ServerShared;

// simdjson reads up to SIMDJSON_PADDING bytes past the end of its input: every request body
// handed to a handler has this much spare capacity after its end.
inline constexpr std::size_t kBodyPadding = 64;

// How long a TLS connection the server ends on its own initiative (idle or header timeout,
// Stop, Connection: close, HTTP/2 GOAWAY) waits, after sending close_notify, for the client's
// close_notify or FIN before closing anyway (RFC 8446 §6.1 does not require the wait; a short
// one lets a prompt client close first). Capped by HttpServer::Options::linger_timeout. After
// an error response the wait is linger_timeout itself, since it also drains the request.
inline constexpr std::chrono::milliseconds kTlsCloseNotifyWait{500};

// One shared empty body (with kBodyPadding capacity) for requests that have none.
const std::shared_ptr<const std::string>& EmptyBody();

// A response with `status`, a JSON content type (`content_type_name` as the caller's
// protocol spells it) and the body {"error": message}.
HttpResponse JsonErrorResponse(int status, std::string_view message,
                               std::string_view content_type_name);

// The answer to a request the transport refuses itself (malformed, over a limit, timed out):
// JsonErrorResponse(status, message, content_type_name) plus `X-Request-Id`: the request's own
// when it was read and is acceptable, else a generated one (core/request_id.h, as the handler
// does). When `access_log` is not null, also writes the request's record (protocol "http") with
// the same id: `request` holds what was parsed of the request so far (method, target and
// headers are empty when its request line never parsed), `request_bytes` how much of its body
// was read. Not for the handler's answers (Precheck's, Handle's): the handler logs those.
// A non-null `handler` may shape the answer instead of the JSON body
// (HttpHandler::TransportError: gRPC's grpc-status); the request id and the record stay.
HttpResponse TransportErrorResponse(int status, std::string_view message,
                                    std::string_view content_type_name, const HttpRequest& request,
                                    uint64_t request_bytes, AccessLog* access_log,
                                    HttpHandler* handler = nullptr);

// The answer to a request whose body the server-wide budget refused (IncomingBodies): a
// TransportErrorResponse 503 that says why, with `Retry-After: 1`.
HttpResponse IncomingBodiesRefusal(const IncomingBodies& budget, std::string_view content_type_name,
                                   const HttpRequest& request, uint64_t request_bytes,
                                   AccessLog* access_log, HttpHandler* handler);
// Logs a refusal for the budget, at most once per 10 s per server (a warning: the operator
// raises --max-incoming-body-bytes, or looks for the client that holds it).
void LogIncomingRefusal(ServerShared& shared);

// Calls `response->on_sent(sent, at)` if it is set, and empties it first, so a second call is a
// no-op (each response reports once). No allocation: the function is moved, not copied. A
// throwing callback is logged and swallowed, since it runs on an I/O thread. `at` is ignored
// (zero) when `sent` is false.
void ReportSent(HttpResponse* response, bool sent, std::chrono::steady_clock::time_point at);
// The same for a callback already taken out of its response.
void ReportSent(std::function<void(bool, std::chrono::steady_clock::time_point)>* on_sent,
                bool sent, std::chrono::steady_clock::time_point at);

}  // namespace harrier::server_internal
