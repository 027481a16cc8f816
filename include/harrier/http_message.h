// Transport-independent HTTP messages and the handler interface that every front end
// (HTTP/1.1 today, HTTP/2 next) drives. Handlers never see sockets.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harrier/cancellation.h"

namespace harrier {

// The wire protocol a request arrived on, set by the transport. An enum rather than a string:
// it costs one byte per request, and the name is a constant (HttpVersionName) for whoever labels
// spans, logs or metrics with it. TLS is not part of it (h2 and h2c are both kHttp2).
enum class HttpVersion : unsigned char {
  kUnknown,  // the transport did not say (tests, synthetic requests)
  kHttp11,   // HTTP/1.1 (and HTTP/1.0), in clear or over TLS
  kHttp2,    // HTTP/2: h2c (prior knowledge or Upgrade) or h2 over TLS
};

// "HTTP/1.1", "HTTP/2", or "" for kUnknown: a static string, never allocated.
constexpr std::string_view HttpVersionName(HttpVersion version) {
  switch (version) {
    case HttpVersion::kHttp11:
      return "HTTP/1.1";
    case HttpVersion::kHttp2:
      return "HTTP/2";
    case HttpVersion::kUnknown:
      break;
  }
  return {};
}

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query as sent: "/v2/models/simple/infer?x=1"
  // Header names lower-cased; values as sent.
  std::vector<std::pair<std::string, std::string>> headers;
  // The whole body, in a shared heap string so that decoded tensors can borrow from it.
  std::shared_ptr<const std::string> body;
  // Cancelled by the server when the client disconnects before the response is sent; may be
  // null (the transport cannot tell).
  std::shared_ptr<CancellationToken> cancellation;
  // Set by the transport (steady clock): when the request line and headers were in, and when the
  // whole body was. Zero when the transport does not say.
  std::chrono::steady_clock::time_point received_at{};
  std::chrono::steady_clock::time_point body_received_at{};
  // Set by the transport: which protocol carried the request (also in Precheck's `head`).
  HttpVersion version = HttpVersion::kUnknown;

  // The first value of header `lower_case_name`, or empty.
  std::string_view Header(std::string_view lower_case_name) const {
    for (const auto& [k, v] : headers)
      if (k == lower_case_name) return v;
    return {};
  }
  bool HasHeader(std::string_view lower_case_name) const {
    for (const auto& [k, v] : headers)
      if (k == lower_case_name) return true;
    return false;
  }
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // Content-Length is added by the server
  std::string body;
  // Called by the transport once, on the connection's thread, when the response's last byte has
  // been handed to the kernel (`sent` true, with the time) or when it never will be (the
  // connection or stream closed first; `sent` false, time zero). Empty: nobody asked (and no
  // cost). Not called for a response whose responder runs after the server is destroyed. Used
  // by tracing for the send span.
  std::function<void(bool sent, std::chrono::steady_clock::time_point at)> on_sent;
};

// Called exactly once per request, from any thread; the server takes it back to the
// connection's own thread.
using HttpResponder = std::function<void(HttpResponse)>;

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Must not block: long work is handed to other threads and answered through `respond`.
  virtual void Handle(HttpRequest request, HttpResponder respond) = 0;

  // An early look at a request from its request line and headers alone (`head.body` is null,
  // `head.cancellation` too), made by the transport before it reads the body. A response
  // answers the request there and then: the transport discards the body unread (HTTP/1.1
  // reads past it or closes; HTTP/2 resets the stream's remaining data) and never calls
  // Handle(). Used to refuse work the server would refuse anyway (admission control) without
  // paying for a large upload and its decoding. Must be cheap and must not block. Default: no
  // opinion.
  virtual std::optional<HttpResponse> Precheck(const HttpRequest& head) {
    (void)head;
    return std::nullopt;
  }
};

}  // namespace harrier
