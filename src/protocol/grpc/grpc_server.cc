#include "protocol/grpc/grpc_server.h"

#include <algorithm>
#include <climits>
#include <fstream>
#include <utility>

#include "protocol/grpc/grpc_http_handler.h"
#include "protocol/grpc/grpc_wire.h"

namespace harrier::grpc_frontend {

namespace {

Status Readable(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("cannot read " + std::string(what) + " '" + path + "'");
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Create(const Options& options,
                                                         ModelManager* models) {
  if (options.tls_cert_file.empty() != options.tls_key_file.empty())
    return InvalidArgument("gRPC TLS needs both a certificate and a key");
  if (!options.tls_client_ca_file.empty() && options.tls_cert_file.empty())
    return InvalidArgument("a gRPC client CA needs a server certificate and key");
  if (!options.tls_cert_file.empty()) {
    RETURN_IF_ERROR(Readable(options.tls_cert_file, "TLS certificate"));
    RETURN_IF_ERROR(Readable(options.tls_key_file, "TLS key"));
  }
  if (!options.tls_client_ca_file.empty())
    RETURN_IF_ERROR(Readable(options.tls_client_ca_file, "TLS client CA"));
  std::unique_ptr<GrpcServer> server(new GrpcServer(options, models));

  const uint64_t max_message = std::min<uint64_t>(options.max_receive_message_bytes, INT_MAX);
  HttpServer::Options http = options.transport;
  http.address = options.address;
  // A unary call's body is its one message and prefix; a larger one is refused (413, said as
  // RESOURCE_EXHAUSTED) before it is buffered. A stream's messages are checked one by one.
  http.max_body_bytes = max_message + kMessagePrefixBytes;
  http.max_header_bytes = options.max_metadata_bytes;
  http.access_log = options.handler.access_log;
  http.tls_cert_file.clear();
  http.tls_key_file.clear();
  http.tls_client_ca_file.clear();
  if (options.tls_cert_file.empty()) {
    http.port = options.port;
    http.plain_http = true;
  } else {
    http.plain_http = false;
    http.tls_port = options.port;
    http.tls_cert_file = options.tls_cert_file;
    http.tls_key_file = options.tls_key_file;
    http.tls_client_ca_file = options.tls_client_ca_file;
    server->tls_ = true;
  }
  auto created = HttpServer::Create(http, server->handler_.get());
  if (!created.ok()) return created.status();
  server->server_ = std::move(*created);
  return server;
}

GrpcServer::GrpcServer(const Options& options, ModelManager* models) : options_(options) {
  GrpcHttpHandler::Options handler;
  handler.max_receive_message_bytes =
      static_cast<std::size_t>(std::min<uint64_t>(options.max_receive_message_bytes, INT_MAX));
  handler.max_stream_inflight = options.max_stream_inflight;
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
