// GrpcServer: the KServe v2 gRPC front end (package `inference`, service GRPCInferenceService)
// over a ModelManager, served by Harrier's own HTTP/2 server (server/http_server.h, nghttp2)
// with GrpcHttpHandler (grpc_http_handler.h) speaking gRPC's wire format. No gRPC library is
// involved (docs/grpc.md, "Implementation", says why: grpc++ 1.51 does not survive the floods
// that nghttp2 does, docs/security.md). The generated protobuf messages are the only
// dependency.
//
// Every limit of the HTTP/2 server applies per connection and stream: SETTINGS_MAX_CONCURRENT_
// STREAMS (128), the header list limit, flow-control windows, nghttp2's own flood guards
// (rapid reset, SETTINGS, PING, CONTINUATION), the header, body, write and idle timeouts.
// A call's deadline (grpc-timeout) becomes InferenceRequest::deadline; a stream the client
// resets, or a connection that goes, cancels the request's CancellationToken.
// ModelStreamInfer keeps up to Options::max_stream_inflight requests of one stream running at
// once and writes each response (or its error_message) as it completes.
//
// TLS: with a certificate and key the port serves TLS only (h2 by ALPN); with a client CA as
// well, clients must present a certificate it signed.
//
// Thread safety: Start() and Stop() from one thread (the composition root); everything else is
// internal.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "harrier/model_manager.h"
#include "harrier/status.h"
#include "protocol/grpc/grpc_inference_handler.h"
#include "server/http_server.h"

namespace harrier {
class HttpHandler;
}  // namespace harrier

namespace harrier::grpc_frontend {

class GrpcServer {
 public:
  struct Options {
    // Address and port to bind; port 0 picks a free one (see port()).
    std::string address = "0.0.0.0";
    uint16_t port = 8001;
    // PEM files. Certificate and key together turn TLS on; the client CA (which needs them)
    // makes client certificates required and verified against it. All empty: plain (insecure).
    std::string tls_cert_file;
    std::string tls_key_file;
    std::string tls_client_ca_file;
    // Largest request message accepted (larger: RESOURCE_EXHAUSTED). Default 64 MiB; clamped
    // to 2^31-1, gRPC's limit. The composition root passes --max-body-bytes.
    uint64_t max_receive_message_bytes = uint64_t{64} << 20;
    // The HTTP/2 server under the port: its I/O threads, timeouts, HTTP/2 settings (128
    // concurrent streams by default), TLS ticket rotation, as for REST (the composition root
    // copies the REST port's). Its address, ports, TLS files, body and header limits and access
    // log are set from the other fields here.
    HttpServer::Options transport;
    // Largest header block (metadata) of a call. Default 16 KiB (gRPC's own default is 8 KiB
    // soft, 16 KiB hard); larger: RESOURCE_EXHAUSTED.
    uint32_t max_metadata_bytes = 16u << 10;
    // Requests of one ModelStreamInfer stream that may run at once; the stream reads no further
    // request while this many are unanswered. Default 64.
    size_t max_stream_inflight = 64;
    // Generation responses of one ModelStreamInfer stream that may wait for its client (queued,
    // not yet with the kernel): past it, the stream's requests are cancelled (their sequences
    // stop) and it ends RESOURCE_EXHAUSTED, as an SSE stream ends (--generation-stream-buffer-
    // bytes). Default 1 MiB.
    size_t max_pending_stream_bytes = size_t{1} << 20;
    GrpcInferenceHandler::Options handler;
    // Puts a handler in front of the gRPC handler it is given (access control, src/auth/), or
    // returns null for none. Empty: none. Called once, by Create.
    std::function<std::unique_ptr<HttpHandler>(HttpHandler* grpc)> wrap_handler;
  };

  // Checks the options and reads the TLS files. kInvalidArgument for a bad combination or an
  // unreadable file. `models` is not owned and must outlive the server.
  static StatusOr<std::unique_ptr<GrpcServer>> Create(const Options& options, ModelManager* models);
  ~GrpcServer();  // Stop(0) if still running

  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Binds and starts serving. kUnavailable when the address cannot be bound (in use, bad
  // address).
  Status Start();
  // The bound port (the real one when Options::port was 0). Valid after Start().
  uint16_t port() const { return port_; }
  bool tls() const { return tls_; }
  // The TLS handshakes so far (HttpServer::tls_handshakes()). Any thread, after Start().
  HttpServer::TlsHandshakes tls_handshakes() const { return server_->tls_handshakes(); }
  // Stops accepting calls (GOAWAY), lets calls in flight finish for up to `grace`, then closes
  // the connections left, which cancels their calls. Idempotent.
  void Stop(std::chrono::milliseconds grace);

 private:
  GrpcServer(const Options& options, ModelManager* models);

  const Options options_;
  std::unique_ptr<HttpHandler> handler_;
  std::unique_ptr<HttpHandler>
      front_;  // Options::wrap_handler's, in front of handler_; may be null
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
  bool tls_ = false;
};

}  // namespace harrier::grpc_frontend
