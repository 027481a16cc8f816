// GrpcHttpHandler: the KServe v2 gRPC service (package `inference`, GRPCInferenceService) as an
// HttpHandler, so that Harrier's own HTTP/2 server (src/server/, nghttp2) serves gRPC: each RPC
// is a POST to /inference.GRPCInferenceService/<Method> with `content-type: application/grpc`,
// its messages length-prefixed (protocol/grpc/grpc_wire.h), its status in trailers.
//
//   unary RPCs       read whole (HttpHandler::Handle), answered with the response message and
//                    trailers `grpc-status: 0`; on error, the head (initial metadata) and the
//                    status in trailers
//   ModelStreamInfer a stream (HttpHandler::OpenStream): requests are decoded as their bytes
//                    arrive, up to Options::max_stream_inflight run at once, and each response
//                    (or its error_message) is written when it completes; the status ends the
//                    stream once the client has half-closed and every request is answered.
//                    Past max_stream_inflight the stream's body is not consumed, so HTTP/2 flow
//                    control holds the client back.
//
// Metadata: `grpc-timeout` becomes the request's deadline; `x-request-id` is echoed (or one is
// generated) in the response headers; `x-client-id` names the client for rate limits;
// `traceparent` / `tracestate` start a trace (Options::handler.tracer) and `traceresponse` is
// sent back. A refusal that says when to retry carries `retry-after` (seconds).
//
// Errors: grpc-message is cut to 1 KiB and percent-encoded. A message that does not parse is
// INTERNAL (as grpc-go and grpc-java answer), one over Options::max_receive_message_bytes
// (decompressed, for a compressed one) RESOURCE_EXHAUSTED; an unknown method UNIMPLEMENTED.
// Compressed messages (`grpc-encoding: gzip` or `deflate`, as Triton's clients send them with
// compression_algorithm) are decompressed; another encoding is UNIMPLEMENTED, and such answers
// announce `grpc-accept-encoding: identity,deflate,gzip`. Responses are not compressed. The
// transport's own refusals (a header block or body over its limits, a stalled body) are turned into
// a grpc-status as well (TransportError; over HTTP/1.1 they stay the server's JSON errors). A
// request that is not gRPC gets HTTP 415 (wrong content type), 405 (not a POST) or 505 (not
// HTTP/2), each with a grpc-status too.
//
// Thread safety: every method may be called from any thread (the transport's I/O threads).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>

#include "harrier/http_message.h"
#include "harrier/model_manager.h"
#include "protocol/grpc/grpc_inference_handler.h"

namespace harrier::grpc_frontend {

class GrpcHttpHandler final : public HttpHandler {
 public:
  struct Options {
    // Largest request message; a larger one is RESOURCE_EXHAUSTED. Default 64 MiB.
    std::size_t max_receive_message_bytes = std::size_t{64} << 20;
    // Requests of one ModelStreamInfer stream that may run (or wait to be written) at once.
    // Default 64.
    std::size_t max_stream_inflight = 64;
    // Generation responses of one stream that may wait for its client (GrpcServer::Options).
    std::size_t max_pending_stream_bytes = std::size_t{1} << 20;
    GrpcInferenceHandler::Options handler;
  };

  // `models` is not owned and must outlive the handler and every call in flight.
  GrpcHttpHandler(ModelManager* models, const Options& options);

  void Handle(HttpRequest&& request, HttpResponder respond) override;
  bool ServesAsStream(const HttpRequest& head) const override;
  std::shared_ptr<HttpStreamHandler> OpenStream(const HttpRequest& head,
                                                std::shared_ptr<HttpStreamWriter> writer,
                                                HttpResponse* response_head) override;
  std::optional<HttpResponse> TransportError(int status, std::string_view message,
                                             const HttpRequest& request,
                                             std::string_view code) override;

 private:
  class InferStream;

  // grpc.health.v1.Health/Check: SERVING when the server is ready, else NOT_SERVING.
  HttpResponse HealthCheck(const HttpRequest& request, HttpResponse head) const;

  const Options options_;
  const GrpcInferenceHandler handler_;
};

}  // namespace harrier::grpc_frontend
