// GrpcServer: the KServe v2 gRPC front end (package `inference`, service GRPCInferenceService)
// on grpc++, over a ModelManager. gRPC types stay inside src/protocol/grpc/: this header only
// forward-declares grpc::Server, so the composition root (src/cli/main.cc) that creates, starts
// and stops it never includes a gRPC header.
//
// API: grpc++'s callback API (docs/grpc.md, "Implementation"). Unary RPCs are answered on
// gRPC's own threads; ModelInfer is decoded there and answered from the model's worker thread
// when it completes. A call's deadline (grpc-timeout) becomes InferenceRequest::deadline and its
// cancellation (client cancel, disconnect, server shutdown past its deadline) cancels the
// request's CancellationToken, exactly as the HTTP server does for a closed connection.
// ModelStreamInfer keeps up to Options::max_stream_inflight requests of one stream running at
// once and writes each response (or its error_message) as it completes.
//
// TLS: with a certificate and key the port serves TLS only; with a client CA as well, clients
// must present a certificate it signed.
//
// Thread safety: Start() and Stop() from one thread (the composition root); everything else is
// internal.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "harrier/model_manager.h"
#include "harrier/status.h"
#include "protocol/grpc/grpc_inference_handler.h"

namespace grpc {
class Server;
}

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
    // Largest request message accepted (larger: RESOURCE_EXHAUSTED from gRPC itself).
    // Default 64 MiB; clamped to 2^31-1, gRPC's limit. The composition root passes
    // --max-body-bytes.
    uint64_t max_receive_message_bytes = uint64_t{64} << 20;
    // Requests of one ModelStreamInfer stream that may run at once; the stream reads no further
    // request while this many are unanswered. Default 64.
    size_t max_stream_inflight = 64;
    GrpcInferenceHandler::Options handler;
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
  bool tls() const { return !tls_cert_pem_.empty(); }
  // Stops accepting calls, lets calls in flight finish for up to `grace`, then cancels the rest
  // and waits for them to be answered. Idempotent.
  void Stop(std::chrono::milliseconds grace);

 private:
  class Service;
  GrpcServer(const Options& options, ModelManager* models);

  const Options options_;
  std::string tls_cert_pem_, tls_key_pem_, tls_client_ca_pem_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  uint16_t port_ = 0;
};

}  // namespace harrier::grpc_frontend
