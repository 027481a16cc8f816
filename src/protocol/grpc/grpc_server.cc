#include "protocol/grpc/grpc_server.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "protocol/grpc/grpc_http_handler.h"
#include "protocol/grpc/grpc_wire.h"

namespace harrier::grpc_frontend {

StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Create(const Options& options,
                                                         ModelManager* models) {
  std::unique_ptr<GrpcServer> server(new GrpcServer(options, models));

  const uint64_t max_message = std::min<uint64_t>(options.max_receive_message_bytes, INT_MAX);
  HttpServer::Options http = options.transport;
  http.address = options.address;
  http.name = "grpc";
  // A unary call's body is its one message and prefix; a larger one is refused (413, said as
  // RESOURCE_EXHAUSTED) before it is buffered. A stream's messages are checked one by one.
  http.max_body_bytes = max_message + kMessagePrefixBytes;
  http.max_header_bytes = options.max_metadata_bytes;
  http.access_log = options.handler.access_log;
  // HttpServer::Create checks the TLS files (pairing, readable, loadable) and says what is wrong.
  http.tls_cert_file = options.tls_cert_file;
  http.tls_key_file = options.tls_key_file;
  http.tls_client_ca_file = options.tls_client_ca_file;
  server->tls_ = !options.tls_cert_file.empty() || !options.tls_key_file.empty();
  http.plain_http = !server->tls_;  // the port serves TLS only, or plaintext only
  http.tls_h2_only = true;          // gRPC is HTTP/2: ALPN never picks http/1.1 here
  if (server->tls_) {
    http.tls_port = options.port;
  } else {
    http.port = options.port;
  }
  if (options.wrap_handler) server->front_ = options.wrap_handler(server->handler_.get());
  auto created =
      HttpServer::Create(http, server->front_ ? server->front_.get() : server->handler_.get());
  if (!created.ok()) return created.status();
  server->server_ = std::move(*created);
  return server;
}

GrpcServer::GrpcServer(const Options& options, ModelManager* models) : options_(options) {
  GrpcHttpHandler::Options handler;
  handler.max_receive_message_bytes =
      static_cast<std::size_t>(std::min<uint64_t>(options.max_receive_message_bytes, INT_MAX));
  handler.max_stream_inflight = options.max_stream_inflight;
  handler.max_pending_stream_bytes = options.max_pending_stream_bytes;
  handler.handler = options.handler;
  handler_ = std::make_unique<GrpcHttpHandler>(models, handler);
}

GrpcServer::~GrpcServer() {
  Stop(std::chrono::milliseconds(0));
}

Status GrpcServer::Start() {
  if (Status started = server_->Start(); !started.ok()) {
    const std::string host = options_.address.find(':') != std::string::npos
                                 ? "[" + options_.address + "]"
                                 : options_.address;
    return Unavailable("cannot listen for gRPC on " + host + ":" + std::to_string(options_.port) +
                       ": " + started.message());
  }
  port_ = tls_ ? server_->tls_port() : server_->port();
  return Status::Ok();
}

void GrpcServer::Stop(std::chrono::milliseconds grace) {
  if (server_) server_->Stop(grace);
}

}  // namespace harrier::grpc_frontend
