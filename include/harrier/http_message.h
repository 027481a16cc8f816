// Transport-independent HTTP messages and the handler interface that every front end
// (HTTP/1.1 and HTTP/2) drives. Handlers never see sockets.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harrier/cancellation.h"
#include "harrier/http_headers.h"

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
    case HttpVersion::kHttp11: return "HTTP/1.1";
    case HttpVersion::kHttp2: return "HTTP/2";
    case HttpVersion::kUnknown: break;
  }
  return {};
}

// Access control for each message of a request served as a stream of messages (gRPC's
// ModelStreamInfer). A check of the stream's head alone would let its messages go on after the
// key was revoked or lost the scope, and past the key's rate limit. Set by access control
// (src/auth/AuthHandler::OpenStream); the front end calls AuthorizeNext once per message, in
// order, on the stream's thread, before it serves it.
class MessageAuthorizer {
 public:
  struct Refusal {
    int http_status = 0;  // 0: allowed; else 401, 403 or 429, as a request would be refused
    std::string message;
  };
  virtual ~MessageAuthorizer() = default;
  virtual Refusal AuthorizeNext() = 0;
};

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
  // Set by the transport: the connection's TLS version as OpenSSL names it ("TLSv1.2",
  // "TLSv1.3"; a static string, valid for the process's life), empty in clear text.
  std::string_view tls_version;
  // Set by the transport: no other connection on this request's I/O thread sent a request in
  // the last HttpServer::Options::sole_requester_window, and (HTTP/2) no other stream of this
  // connection is open. Work run on the calling thread then holds up no other client; a front
  // end uses it to choose inline execution (docs/scheduling.md). False when the transport
  // does not say.
  bool sole_requester = false;
  // Set by access control in front of the handlers (src/auth/AuthHandler): the id of the API
  // key the request presented (never the key), for access logs and traces. Empty without keys.
  std::string auth_key_id;
  // Set by access control on a request served as a stream (ServesAsStream): checks each of its
  // messages again. Null without keys.
  std::shared_ptr<MessageAuthorizer> message_authorizer;

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

// Whether a route that serves GET serves `method`: GET, and HEAD, which RFC 9110 §9.3.2 asks of
// every GET resource (the transports send a HEAD response's head only: docs/server.md). A handler
// that refuses other methods answers 405 with `Allow: GET, HEAD`.
inline bool IsGetOrHead(std::string_view method) {
  return method == "GET" || method == "HEAD";
}

class ResponseStream;  // harrier/response_stream.h

struct HttpResponse {
  int status = 200;
  // Content-Length is added by the server. Names and values are copied in (harrier/http_headers.h:
  // the usual handful costs no allocation).
  HttpHeaders headers;
  std::string body;
  // HTTP/2 only: fields sent after the body in a trailing HEADERS frame (gRPC's grpc-status).
  // When set, no content-length is sent. HTTP/1.1 drops them (it writes no trailers).
  std::vector<std::pair<std::string, std::string>> trailers;
  // Called by the transport once, on the connection's thread, when the response's last byte has
  // been handed to the kernel (`sent` true, with the time) or when it never will be (the
  // connection or stream closed first; `sent` false, time zero). Empty: nobody asked (and no
  // cost). Not called for a response whose responder runs after the server is destroyed. Used
  // by tracing for the send span.
  std::function<void(bool sent, std::chrono::steady_clock::time_point at)> on_sent;
  // Set to send the body in parts as they are produced (harrier/response_stream.h): the head
  // goes out at once without a length, `body` is ignored, and each part written to the stream
  // follows as it comes (HTTP/1.1: chunked; HTTP/1.0: until the close; HTTP/2: DATA frames)
  // until Finish(). on_sent then reports the end of the body. A HEAD request gets the head and
  // the stream is abandoned.
  std::shared_ptr<ResponseStream> stream;
};

// Called exactly once per request, from any thread; the server takes it back to the
// connection's own thread. The response is taken by rvalue reference: a responder that wraps
// another passes it on without a copy or a move of its own (a response is a few hundred bytes
// with its inline headers; by value, each layer moved it once more: issue 10).
using HttpResponder = std::function<void(HttpResponse&&)>;

// The transport's side of a streamed response (HttpHandler::OpenStream). Every method may be
// called from any thread; the work is posted to the connection's thread. Calls after the stream
// is gone (reset, connection closed) are dropped, with `on_written(false)`.
class HttpStreamWriter {
 public:
  virtual ~HttpStreamWriter() = default;
  // Queues `bytes` as the next part of the response body. `on_written` (may be empty) is called
  // on the connection's thread once, with true when the part's last byte is handed to the
  // kernel, false when it never will be.
  virtual void Write(std::string bytes, std::function<void(bool written)> on_written) = 0;
  // Ends the response after the parts queued: the trailers close the stream. Once only.
  virtual void Finish(std::vector<std::pair<std::string, std::string>> trailers) = 0;
  // The handler has dealt with `bytes` more of the request body: the flow-control window opens
  // by that much. Body bytes not reported here hold the client back once its window is used.
  virtual void Consumed(std::size_t bytes) = 0;
};

// The handler's side of a streamed request (HttpHandler::OpenStream). Called only on the
// connection's thread, never after OnCancel or once the stream is finished and closed.
class HttpStreamHandler {
 public:
  virtual ~HttpStreamHandler() = default;
  // The next bytes of the request body, as they arrive (valid during the call only).
  virtual void OnBody(std::string_view bytes) = 0;
  // The client has sent all of its body (END_STREAM).
  virtual void OnBodyEnd() = 0;
  // The stream ended before the handler finished it (client reset, connection lost): nothing
  // more will be sent. Called at most once, and last.
  virtual void OnCancel() = 0;
  // Whether part of a message the handler frames in the body has arrived and the rest has not,
  // while the handler takes bytes (not holding the client back): the transport then holds the
  // stream to its body timeout, as it holds a request body, and resets the stream when the rest
  // does not come (probe 64: a half-sent gRPC message was held, silent, for good). Between
  // messages a stream may be quiet as long as it likes. Default: never.
  virtual bool InsideMessage() const { return false; }
  // Bytes of such an unfinished message the handler holds: charged, after each OnBody, to the
  // server-wide budget of request bodies still arriving (HttpServer::Options::incoming_bodies);
  // past it the stream is reset (ENHANCE_YOUR_CALM, which gRPC clients read as
  // RESOURCE_EXHAUSTED). Default: none.
  virtual std::size_t PartialMessageBytes() const { return 0; }
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Must not block: long work is handed to other threads and answered through `respond`.
  // `request` is the transport's, lent for the call: a handler moves from it what it keeps past
  // the call (a handler in front of another passes it on without a move of its own; a request is
  // a few hundred bytes). The transport reuses it afterwards.
  virtual void Handle(HttpRequest&& request, HttpResponder respond) = 0;

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

  // HTTP/2 only, after Precheck: whether `head` is served as a stream (OpenStream below). Must be
  // cheap: it is asked of every HTTP/2 request, and OpenStream only of those it says yes to.
  virtual bool ServesAsStream(const HttpRequest& head) const {
    (void)head;
    return false;
  }
  // After ServesAsStream said yes: a handler that serves `head` as a stream (its body read and its
  // response written in parts, as gRPC's streaming calls need) returns its stream handler and
  // fills `response_head` (status and headers, sent at once; its body is ignored); `writer`
  // answers. Null (the default): the request is read whole and given to Handle(). `head.body`
  // is null and `head.cancellation` is not set: OnCancel says the stream is gone.
  virtual std::shared_ptr<HttpStreamHandler> OpenStream(const HttpRequest& head,
                                                        std::shared_ptr<HttpStreamWriter> writer,
                                                        HttpResponse* response_head) {
    (void)head;
    (void)writer;
    (void)response_head;
    return nullptr;
  }

  // How the refusals made in front of the handler look to its clients: the transport's (400,
  // 408, 413, 431, when a request breaks a limit before the handler sees it) and the access
  // check's (401, 403, 429). gRPC answers them with a grpc-status, the OpenAI API (a target
  // under /v1/) with its own error object. `request` is what was parsed of the request (its
  // target is empty when the request line never parsed); `code` is a machine-readable reason
  // ("invalid_key"), empty when there is none. Return nullopt (the default) for the server's
  // JSON error. Must be cheap; any thread.
  virtual std::optional<HttpResponse> TransportError(int status, std::string_view message,
                                                     const HttpRequest& request,
                                                     std::string_view code) {
    (void)status;
    (void)message;
    (void)request;
    (void)code;
    return std::nullopt;
  }
};

}  // namespace harrier
