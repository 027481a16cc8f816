// The flags of `harrier serve`: their values (ServeFlags, defaults as documented in
// docs/server.md), their registration with CLI11, and the checks CLI11's per-flag validators
// cannot make. The composition root (main.cc) parses them and builds the server from them.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "harrier/inference_request.h"
#include "lifecycle/model_repository_manager.h"
#include "protocol/kserve/infer_request_decoder.h"
#include "scheduler/admission_controller.h"
#include "server/http_server.h"

namespace harrier {

struct ServeFlags {
  std::string model_repository;
  // Model control (docs/model-lifecycle.md): Triton's flags and defaults.
  std::string model_control_mode = "none";  // none | poll | explicit
  int repository_poll_secs = 15;
  std::vector<std::string> load_models;  // explicit mode: loaded at start; "*" = all
  // Triton's --model-load-thread-count: models loaded at once (at least 1).
  int model_load_thread_count = ModelRepositoryManager::Options{}.load_thread_count;
  // Free heap (MiB) loads may keep for the next load before it goes back to the system.
  int64_t model_load_retain_mb = ModelRepositoryManager::Options{}.load_retain_bytes >> 20;
  std::string http_address = "0.0.0.0";
  // Triton's --grpc-address and --metrics-address; "" = --http-address (see GrpcAddressOf).
  std::string grpc_address;
  std::string metrics_address;
  int http_port = 8000;
  int grpc_port = 8001;
  int metrics_port = 8002;
  // TLS (docs/server.md): with a certificate and key, REST is also served over TLS on
  // https_port (ALPN h2 / http/1.1) and gRPC uses TLS on grpc_port. plain_http "off" closes the
  // plain HTTP port. tls_client_ca: require and verify client certificates against it.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  int https_port = 8443;
  uint32_t http2_max_concurrent_streams = HttpServer::Options{}.http2_max_concurrent_streams;
  // HTTP/2 flow control and framing, and the TLS ticket-key period: signed so that a negative
  // value reaches CheckTransportFlags (exit 1 with a clear message) rather than a parse error.
  int64_t http2_initial_window_bytes = HttpServer::Options{}.http2_initial_window_bytes;
  int64_t http2_connection_window_bytes = HttpServer::Options{}.http2_connection_window_bytes;
  int64_t http2_max_frame_bytes = HttpServer::Options{}.http2_max_frame_bytes;
  int64_t tls_ticket_rotation_s = HttpServer::Options{}.tls_ticket_key_rotation.count();
  std::string plain_http = "on";
  // "on": an HTTP/1.1 request with `Upgrade: h2c` on the plain port continues as HTTP/2
  // (HttpServer::Options::h2c_upgrade). "off" (default): served as HTTP/1.1; behind a proxy that
  // forwards Upgrade, the upgrade is a tunnel past the proxy's rules (probe 57).
  std::string http2_upgrade = "off";
  // "on": the metrics port serves TLS only, with the same certificate (and client CA) as REST
  // and gRPC; needs tls_cert. "off" (default): plain HTTP, as Triton's metrics port.
  std::string metrics_tls = "off";
  int http_threads = 0;
  uint64_t max_body_bytes = HttpServer::Options{}.max_body_bytes;
  // 0: derived (IncomingBodyLimit in app.cc).
  uint64_t max_incoming_body_bytes = 0;
  uint64_t max_connections = HttpServer::Options{}.max_connections;
  uint32_t max_connections_per_client = 0;
  uint32_t max_header_bytes = HttpServer::Options{}.max_header_bytes;
  int64_t max_tensor_elements = kserve::DecodeLimits{}.max_tensor_elements;
  int exit_timeout_secs = 30;
  // Triton's --id: the server's name in server metadata (REST GET /v2, gRPC ServerMetadata).
  std::string server_id = "harrier";
  // On SIGTERM/SIGINT, how long readiness reads "not ready" while requests are still served,
  // before the listeners close (docs/deployment.md, "The drain"); 0: close at once.
  double shutdown_delay_secs = 0;
  double header_timeout_secs = 10;
  double body_timeout_secs = 30;
  double idle_timeout_secs = 60;
  int64_t refusal_hold_ms = HttpServer::Options{}.refusal_hold.count();
  int64_t busy_poll_us = HttpServer::Options{}.busy_poll.count();
  // Admission control (docs/admission.md).
  int64_t max_inflight = AdmissionController::Options{}.max_inflight;
  std::string overload_protection = "on";
  std::string cpu_affinity = "off";
  uint64_t inline_execution_max_us = 100;
  // Which front ends' requests may run inline: auto (each front end's sole requesters),
  // grpc (every gRPC request, no REST one), all, off. See InlinePolicies().
  std::string inline_execution = "auto";
  int64_t overload_target_queue_delay_us = 0;
  std::string rate_limit_per_model = "off";
  std::string rate_limit_per_client = "off";
  size_t rate_limit_max_clients = AdmissionController::Options{}.max_clients;
  // Triton's system shared memory (docs/api.md): clients may register /dev/shm objects of this
  // host and have tensors read from and written to them. Off by default, as in Triton 26.04+: a
  // network client could otherwise map any shared-memory object the server's user can open.
  bool allow_client_shm = false;
  // Access control (docs/security.md, "API keys and scopes"). Keys come from the file only,
  // never from the command line, where every user of the host could read them.
  std::string api_key_file;          // "" = no API keys: every route is open, as before
  bool api_key_file_given = false;   // the flag was there, even with an empty value
  bool metrics_require_key = false;  // /metrics needs a key with the `metrics` scope
  // Triton's "API[,API...]:HEADER=VALUE", repeatable.
  std::vector<std::string> http_restricted_api;
  std::vector<std::string> grpc_restricted_protocol;
  // Origins whose pages' browser requests may change state over REST ("*": any); none by
  // default (auth/browser_origin.h).
  std::vector<std::string> allowed_origins;
  // Host names REST answers besides IP addresses and localhost; none: any (DNS rebinding).
  std::vector<std::string> allowed_hosts;
  // Text generation (docs/generation.md).
  double generation_heartbeat_secs = 15;          // `: ping` on an idle stream; 0: none
  double generation_disconnect_grace_secs = 0;    // a gone client's generation goes on this long
  double generation_stream_retention_secs = 300;  // a stream stays resumable this long
  size_t generation_stream_buffer_bytes = size_t{1} << 20;  // a slow reader's limit
  std::string log_format = "text";
  int log_verbose = 0;
  // Access log (docs/logging.md): one line per REST request and gRPC inference; off by default.
  std::string access_log = "off";
  std::string access_log_file;  // "" = stderr
  bool access_log_file_given = false;
  // Tracing (docs/tracing.md): OTLP/HTTP traces URL; "" = the OTEL_EXPORTER_OTLP_* environment,
  // else off.
  std::string trace_endpoint;
  double trace_sample_ratio = 0.01;
  int64_t trace_queue_size = 2048;
  int64_t trace_export_interval_ms = 1000;
};

// Registers every `serve` flag on `serve`, writing into `*flags` (which must outlive parsing).
void AddServeFlags(CLI::App* serve, ServeFlags* flags);

// `--inline-execution` as each front end's policy.
struct InlinePolicies {
  InlinePolicy rest = InlinePolicy::kSoleRequester;
  InlinePolicy grpc = InlinePolicy::kSoleRequester;
};
InlinePolicies InlinePoliciesOf(const ServeFlags& flags);

// The address the gRPC port binds: --grpc-address, else --http-address (which bound every port
// before --grpc-address existed; Triton's default is 0.0.0.0 whatever --http-address says).
const std::string& GrpcAddressOf(const ServeFlags& flags);
// The address the metrics port binds: --metrics-address, else --http-address (Triton's rule).
const std::string& MetricsAddressOf(const ServeFlags& flags);

// Flag combinations CLI11's per-flag checks cannot see; empty when fine.
std::string CheckFlagCombinations(const ServeFlags& flags);

// The listeners' addresses and ports, before any model loads: each address an IP literal, and no
// two listeners on one port where their addresses overlap (the same, or either a wildcard);
// port 0 picks a free one and meets no other. Empty when fine. These were found only once every
// model had loaded and the HTTP port had opened (probe 39).
std::string CheckListeners(const ServeFlags& flags);

// The gRPC port's connection limit: --max-connections when given; else derived from REST's
// (`rest_connections`) and the descriptor limit: a sixteenth of REST's, at least 64 (or half
// of REST's when that is less), and at most half the descriptor reserve REST's derived limit
// leaves, which also holds the files and the rest of the process (gRPC channels are few and
// carry many calls each). 1024 descriptors -> 64, 256 -> 32, 64 -> 8. With ulimit -n 64 a
// floor of 64 let idle gRPC connections take every descriptor (probes 39, 40).
uint64_t GrpcMaxConnections(const ServeFlags& flags, uint64_t rest_connections,
                            uint64_t descriptor_limit);

// The server-wide budget of request bodies still arriving: --max-incoming-body-bytes, or with 0
// a quarter of `usable_memory` (core/cpu_quota.h), at least --max-body-bytes so that one body of
// the largest size always fits. A quarter: the bodies are copied once more as they are decoded,
// and the models, their arenas and the answers need the rest.
uint64_t IncomingBodyLimit(const ServeFlags& flags, uint64_t usable_memory);

// Ranges of the HTTP/2 and TLS tuning flags (RFC 9113 §6.5.2 for the HTTP/2 ones); empty when
// fine. Checked before anything starts, so a bad value exits 1 at once.
std::string CheckTransportFlags(const ServeFlags& flags);

}  // namespace harrier
