#include "cli/app.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "auth/access_control.h"
#include "backends/llamacpp/llamacpp_backend.h"
#include "backends/onnxruntime/onnxruntime_backend.h"
#include "core/cpu_quota.h"
#include "core/thread_spawner.h"
#include "harrier/model_manager.h"
#include "lifecycle/backend_registry.h"
#include "lifecycle/model_repository_manager.h"
#include "observability/access_log.h"
#include "observability/async_log_sink.h"
#include "observability/connection_metrics.h"
#include "observability/dashboard_handler.h"
#include "observability/metrics_handler.h"
#include "observability/otlp_tracer.h"
#include "observability/process_metrics.h"
#include "observability/spdlog_log_control.h"
#include "observability/text_exposition.h"
#include "protocol/common/content_coding.h"
#include "protocol/grpc/grpc_server.h"
#include "protocol/kserve/kserve_handler.h"
#include "protocol/openai/openai_handler.h"
#include "repository/override_directory.h"
#include "scheduler/admission_controller.h"
#include "server/http_server.h"
#include "server/incoming_bodies.h"
#include "shared_memory/shared_memory_registry.h"

namespace harrier {
namespace {

// Access control's options as the flags give them (no access log).
auth::AccessControl::Options AccessOptions(const ServeFlags& flags) {
  auth::AccessControl::Options options;
  options.api_key_file = flags.api_key_file;
  options.http_restricted_api = flags.http_restricted_api;
  options.grpc_restricted_protocol = flags.grpc_restricted_protocol;
  options.metrics_require_key = flags.metrics_require_key;
  options.allowed_origins = flags.allowed_origins;
  options.allowed_hosts = flags.allowed_hosts;
  return options;
}

// The traces URL: --trace-endpoint, else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as is), else
// OTEL_EXPORTER_OTLP_ENDPOINT + "/v1/traces" (OpenTelemetry's rules); "" = tracing off.
std::string TraceEndpoint(const ServeFlags& flags) {
  if (!flags.trace_endpoint.empty()) return flags.trace_endpoint;
  if (const char* traces = std::getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); traces && *traces)
    return traces;
  if (const char* base = std::getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); base && *base) {
    std::string url = base;
    while (!url.empty() && url.back() == '/') url.pop_back();
    return url + "/v1/traces";
  }
  return {};
}

// The OtlpTracer for `endpoint`, or null when tracing is off; an error for a bad flag value.
StatusOr<std::unique_ptr<OtlpTracer>> CreateTracer(const ServeFlags& flags,
                                                   const std::string& endpoint) {
  if (!(flags.trace_sample_ratio >= 0.0 && flags.trace_sample_ratio <= 1.0)) {
    return InvalidArgument(fmt::format("--trace-sample-ratio must be between 0 and 1, got {}",
                                       flags.trace_sample_ratio));
  }
  if (flags.trace_queue_size < 1 ||
      static_cast<uint64_t>(flags.trace_queue_size) > OtlpTracer::kMaxQueue) {
    return InvalidArgument("--trace-queue-size must be in 1.." +
                           std::to_string(OtlpTracer::kMaxQueue) + ", got " +
                           std::to_string(flags.trace_queue_size));
  }
  if (flags.trace_export_interval_ms < 1 ||
      flags.trace_export_interval_ms > OtlpTracer::kMaxExportInterval.count()) {
    return InvalidArgument("--trace-export-interval-ms must be in 1.." +
                           std::to_string(OtlpTracer::kMaxExportInterval.count()) + ", got " +
                           std::to_string(flags.trace_export_interval_ms));
  }
  if (endpoint.empty()) return std::unique_ptr<OtlpTracer>();
  OtlpTracer::Options options;
  options.endpoint = endpoint;
  options.sample_ratio = flags.trace_sample_ratio;
  options.max_queue = static_cast<size_t>(flags.trace_queue_size);
  options.export_interval = std::chrono::milliseconds(flags.trace_export_interval_ms);
  options.service_version = HARRIER_VERSION;
  return OtlpTracer::Create(std::move(options));
}

std::chrono::milliseconds Milliseconds(double secs) {
  return std::chrono::milliseconds(static_cast<int64_t>(secs * 1000.0 + 0.5));
}

// `prefix: message`, keeping the status's code.
Status Prefixed(std::string_view prefix, const Status& status) {
  return Status(status.code(), fmt::format("{}: {}", prefix, status.message()));
}

}  // namespace

App::App(const ServeFlags& flags, const AsyncLogSink* log_sink)
    : flags_(flags),
      log_sink_(log_sink),
      shutdown_(std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(flags.shutdown_delay_secs))) {}

App::~App() {
  Stop();
}

Status App::Build() {
  // Tracing (docs/tracing.md): first, so that a bad flag fails before the models load, and so
  // that it outlives the handlers and every request they answer; flushed at the stop.
  const std::string trace_endpoint = TraceEndpoint(flags_);
  auto tracer = CreateTracer(flags_, trace_endpoint);
  if (!tracer.ok()) return Prefixed("tracing", tracer.status());
  tracer_ = std::move(tracer).value();
  if (tracer_) {
    spdlog::info("tracing on: {}, sample ratio {}", RedactedUrl(trace_endpoint),
                 flags_.trace_sample_ratio);
  }

  // Access control's lists (origins, hosts, restrictions): before the models load too; its
  // files are opened after (OpenFiles).
  if (Status checked = auth::AccessControl::CheckFlags(AccessOptions(flags_)); !checked.ok())
    return Prefixed("access control", checked);

  OnnxRuntimeBackend::Options onnxruntime_options;
  onnxruntime_options.log_severity = flags_.log_verbose >= 2
                                         ? OnnxRuntimeBackend::LogSeverity::kInfo
                                         : OnnxRuntimeBackend::LogSeverity::kWarning;
  auto onnxruntime = OnnxRuntimeBackend::Create(onnxruntime_options);
  if (!onnxruntime.ok()) {
    return Status(onnxruntime.status().code(),
                  "cannot start ONNX Runtime: " + onnxruntime.status().ToString());
  }
  onnxruntime_ = std::move(onnxruntime).value();
  // The engines this build has, chosen per model by its config's backend or platform, or its
  // model file (lifecycle/backend_registry.h).
  llamacpp_ = std::make_unique<LlamaCppBackend>();  // GGUF models (docs/generation.md)
  backends_ = std::make_unique<BackendRegistry>();
  backends_->AddTensorBackend(onnxruntime_.get());
  backends_->AddGenerativeBackend(llamacpp_.get());

  AdmissionController::Options admission_options;
  admission_options.max_inflight = flags_.max_inflight;
  admission_options.overload_protection = flags_.overload_protection == "on";
  admission_options.target_queue_delay =
      std::chrono::microseconds(flags_.overload_target_queue_delay_us);
  admission_options.per_model = ParseRateLimit(flags_.rate_limit_per_model).value();  // checked
  admission_options.per_client = ParseRateLimit(flags_.rate_limit_per_client).value();
  admission_options.max_clients = flags_.rate_limit_max_clients;
  auto admission = AdmissionController::Create(admission_options);
  if (!admission.ok()) return Prefixed("admission control", admission.status());
  admission_ = std::move(admission).value();

  ModelRepositoryManager::Options manager_options;
  manager_options.repository_path = flags_.model_repository;
  manager_options.backends = backends_.get();
  manager_options.admission = admission_.get();
  manager_options.pin_instance_workers = flags_.cpu_affinity == "on";
  manager_options.inline_execution_max_us = flags_.inline_execution_max_us;
  manager_options.control_mode = flags_.model_control_mode == "poll" ? ModelControlMode::kPoll
                                 : flags_.model_control_mode == "explicit"
                                     ? ModelControlMode::kExplicit
                                     : ModelControlMode::kNone;
  manager_options.poll_interval = std::chrono::seconds(flags_.repository_poll_secs);
  manager_options.startup_models = flags_.load_models;
  manager_options.load_thread_count = flags_.model_load_thread_count;
  manager_options.load_retain_bytes = static_cast<uint64_t>(flags_.model_load_retain_mb) << 20;
  auto manager = ModelRepositoryManager::Create(manager_options);
  if (!manager.ok()) {
    return Prefixed(fmt::format("cannot use model repository '{}'", flags_.model_repository),
                    manager.status());
  }
  manager_ = std::move(manager).value();

  // A TLS file that cannot be used stops the start now, not after every model has loaded.
  if (!flags_.tls_cert.empty() && !flags_.tls_key.empty()) {
    Status tls = HttpServer::CheckTlsFiles(flags_.tls_cert, flags_.tls_key, flags_.tls_client_ca);
    if (!tls.ok()) return Prefixed("cannot use TLS", tls);
  }
  // Before any load can make one: the file overrides' directories of servers that were killed.
  RemoveAbandonedOverrideDirectories("");
  return Status();
}

void App::LoadModels() {
  manager_->LoadAll();  // logs each model's outcome
}

void App::LogReadiness() const {
  int ready = 0, total = 0;
  std::string unavailable;
  for (const ModelVersionState& m : manager_->Index()) {
    ++total;
    if (m.state == ModelState::kReady) {
      ++ready;
    } else {
      unavailable += (unavailable.empty() ? "" : ", ") + m.name;
    }
  }
  spdlog::info("{} of {} model version(s) ready{}{}", ready, total,
               unavailable.empty() ? "" : "; unavailable: ", unavailable);
}

void App::BeginShutdown() {
  manager_->BeginShutdown();
}

Status App::OpenFiles() {
  if (access_control_) return Status::Ok();  // opened already
  // Built before the handlers so that they outlive them and every request they answer.
  if (flags_.access_log == "on") {
    AsyncAccessLog::Options options;
    options.format = flags_.log_format == "json" ? LogFormat::kJson : LogFormat::kText;
    options.file = flags_.access_log_file;
    auto created = AsyncAccessLog::Create(options);
    if (!created.ok()) return Prefixed("access log", created.status());
    access_log_ = std::move(created).value();
    spdlog::info("access log on, to {}",
                 flags_.access_log_file.empty() ? "stderr" : flags_.access_log_file);
  }
  // Access control (docs/security.md): a key file or restriction that does not parse stops the
  // start here, before any port opens.
  auth::AccessControl::Options access_options = AccessOptions(flags_);
  access_options.access_log = access_log_.get();
  auto access_control = auth::AccessControl::Create(access_options);
  if (!access_control.ok()) return Prefixed("access control", access_control.status());
  access_control_ = std::move(access_control).value();
  return Status::Ok();
}

Status App::Start(const std::function<void()>& listening) {
  RETURN_IF_ERROR(OpenFiles());
  log_control_ = std::make_unique<SpdlogLogControl>(flags_.log_format, /*log_file=*/"");
  if (flags_.allow_client_shm) {
    shared_memory_ = std::make_unique<SharedMemoryRegistry>();
    spdlog::info("system shared memory on (--allow-client-shm)");
  }

  kserve::KServeHandler::Options kserve_options;
  kserve_options.readiness = &shutdown_;
  kserve_options.server_version = HARRIER_VERSION;
  kserve_options.server_name = flags_.server_id;
  kserve_options.access_log = access_log_.get();
  kserve_options.log_control = log_control_.get();
  kserve_options.tracer = tracer_.get();
  kserve_options.inline_execution = InlinePoliciesOf(flags_).rest;
  kserve_options.extensions.push_back("logging");  // GET/POST /v2/logging (REST only)
  kserve_options.shared_memory = shared_memory_.get();
  if (shared_memory_) kserve_options.extensions.push_back("system_shared_memory");
  kserve_options.decode_limits.max_tensor_elements = flags_.max_tensor_elements;
  kserve_options.max_body_bytes = flags_.max_body_bytes;
  kserve_handler_ = std::make_unique<kserve::KServeHandler>(manager_.get(), kserve_options);
  // The generation endpoints (OpenAI's /v1, Triton's generate; docs/openai.md) in front of them.
  openai::OpenAiHandler::Options openai_options;
  openai_options.access_log = access_log_.get();
  openai_options.tracer = tracer_.get();
  openai_options.heartbeat_interval = Milliseconds(flags_.generation_heartbeat_secs);
  openai_options.disconnect_grace = Milliseconds(flags_.generation_disconnect_grace_secs);
  openai_options.max_pending_stream_bytes = flags_.generation_stream_buffer_bytes;
  openai_options.store.retention = Milliseconds(flags_.generation_stream_retention_secs);
  openai_options.max_body_bytes = flags_.max_body_bytes;
  openai_handler_ = std::make_unique<openai::OpenAiHandler>(manager_.get(), kserve_handler_.get(),
                                                            openai_options);
  // The status page (GET /dashboard, docs/dashboard.md) in front of them all.
  dashboard_handler_ = std::make_unique<DashboardHandler>(
      [this] { return manager_->DashboardVersions(); }, openai_handler_.get(), access_log_.get());
  // Access control in front of the whole chain, answering from the head (null: none).
  rest_auth_ = access_control_->WrapRest(dashboard_handler_.get());
  HttpHandler* rest_handler = rest_auth_ ? rest_auth_.get() : dashboard_handler_.get();

  HttpServer::Options http_options;
  http_options.address = flags_.http_address;
  http_options.port = static_cast<uint16_t>(flags_.http_port);
  http_options.io_threads = flags_.http_threads;
  http_options.max_body_bytes = flags_.max_body_bytes;
  http_options.max_connections = flags_.max_connections;
  http_options.max_connections_per_client = flags_.max_connections_per_client;
  http_options.max_header_bytes = flags_.max_header_bytes;
  http_options.shutdown_timeout = std::chrono::seconds(flags_.exit_timeout_secs);
  http_options.header_timeout = Milliseconds(flags_.header_timeout_secs);
  http_options.body_timeout = Milliseconds(flags_.body_timeout_secs);
  http_options.keepalive_timeout = Milliseconds(flags_.idle_timeout_secs);
  http_options.refusal_hold = std::chrono::milliseconds(flags_.refusal_hold_ms);
  http_options.busy_poll = std::chrono::microseconds(flags_.busy_poll_us);
  http_options.http2_max_concurrent_streams = flags_.http2_max_concurrent_streams;
  http_options.http2_initial_window_bytes =
      static_cast<uint32_t>(flags_.http2_initial_window_bytes);
  http_options.http2_connection_window_bytes =
      static_cast<uint32_t>(flags_.http2_connection_window_bytes);
  http_options.http2_max_frame_bytes = static_cast<uint32_t>(flags_.http2_max_frame_bytes);
  http_options.tls_ticket_key_rotation = std::chrono::seconds(flags_.tls_ticket_rotation_s);
  http_options.tls_cert_file = flags_.tls_cert;
  http_options.tls_key_file = flags_.tls_key;
  http_options.tls_client_ca_file = flags_.tls_client_ca;
  http_options.tls_port = static_cast<uint16_t>(flags_.https_port);
  http_options.plain_http = flags_.plain_http == "on";
  http_options.h2c_upgrade = flags_.http2_upgrade == "on";
  http_options.access_log = access_log_.get();  // the HTTP layer's own refusals (400, 408, ...)
  // One budget for the bodies still arriving on REST and gRPC together (the gRPC transport's
  // options are a copy of these).
  incoming_bodies_ =
      std::make_shared<IncomingBodies>(IncomingBodyLimit(flags_, UsableMemoryBytes()));
  http_options.incoming_bodies = incoming_bodies_;
  // Every server is made (its TLS files read) before any listens: until `listening`, nothing
  // is served, and a start blocked reading a file can still be given up on (cli/stop_signals.h;
  // probe 50: gRPC's and the metrics server's reads came after REST listened).
  auto rest = HttpServer::Create(http_options, rest_handler);
  if (!rest.ok()) return Prefixed("cannot start the HTTP server", rest.status());

  // gRPC (docs/grpc.md) on its own port, TLS with the same certificate flags.
  grpc_frontend::GrpcServer::Options grpc_options;
  grpc_options.transport = http_options;  // the same HTTP/2 server settings and timeouts
  grpc_options.transport.h2c_upgrade = false;  // gRPC clients speak HTTP/2 from the preface
  rlimit nofile{};
  grpc_options.transport.max_connections =
      GrpcMaxConnections(flags_, (*rest)->max_connections(),
                         ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 ? nofile.rlim_cur : 1024);
  grpc_options.address = GrpcAddressOf(flags_);
  grpc_options.port = static_cast<uint16_t>(flags_.grpc_port);
  grpc_options.tls_cert_file = flags_.tls_cert;
  grpc_options.tls_key_file = flags_.tls_key;
  grpc_options.tls_client_ca_file = flags_.tls_client_ca;
  grpc_options.max_receive_message_bytes = flags_.max_body_bytes;
  grpc_options.max_pending_stream_bytes = flags_.generation_stream_buffer_bytes;
  grpc_options.handler.server_version = HARRIER_VERSION;
  grpc_options.handler.server_name = flags_.server_id;
  grpc_options.handler.readiness = &shutdown_;
  grpc_options.handler.decode_limits = kserve_options.decode_limits;
  grpc_options.handler.access_log = access_log_.get();
  grpc_options.handler.tracer = tracer_.get();
  grpc_options.handler.inline_execution = InlinePoliciesOf(flags_).grpc;
  grpc_options.handler.shared_memory = shared_memory_.get();
  grpc_options.handler.log_control = log_control_.get();
  // The REST list: logging (the LogSettings RPC) and shared memory are served on both ports.
  grpc_options.handler.extensions = kserve_options.extensions;
  grpc_options.wrap_handler = [this](HttpHandler* grpc) { return access_control_->WrapGrpc(grpc); };
  auto grpc = grpc_frontend::GrpcServer::Create(grpc_options, manager_.get());
  if (!grpc.ok()) return Prefixed("cannot start the gRPC server", grpc.status());

  // Prometheus metrics (docs/metrics.md) on a server of their own, one I/O thread, so that a
  // scrape never waits behind inference traffic and vice versa.
  metrics_handler_ = std::make_unique<MetricsHandler>(
      std::vector<MetricsHandler::Collector>{[this](TextExposition* out) { CollectMetrics(out); }},
      // gzip or deflate when the scraper asks (Prometheus does on every scrape), as the
      // inference responses are encoded (protocol/common/content_coding.h).
      [](std::string_view accept,
         std::string_view body) -> std::optional<std::pair<std::string, std::string>> {
        const ContentCoding coding = NegotiateContentCoding(accept);
        if (coding == ContentCoding::kIdentity) return std::nullopt;
        std::optional<std::string> encoded = EncodeContent(body, coding);
        if (!encoded) return std::nullopt;
        return std::make_pair(std::string(ContentCodingName(coding)), std::move(*encoded));
      });
  HttpServer::Options metrics_options;
  metrics_options.address = MetricsAddressOf(flags_);
  metrics_options.port = static_cast<uint16_t>(flags_.metrics_port);
  metrics_options.io_threads = 1;
  metrics_options.max_body_bytes = 64u << 10;
  // A scraper or two; the descriptors are the REST port's (its default limit assumes them).
  metrics_options.max_connections = 64;
  // And at most 8 from one address, so that one client cannot hold all 64 (sockets that never
  // read the scrape: each held for the write timeout) and keep every scraper out (probe 52).
  metrics_options.max_connections_per_client = 8;
  metrics_options.name = "metrics";
  metrics_options.limit_flag = "the metrics port's limit";
  // A scrape whose client stops reading lets its connection go after 10 s (Prometheus's own
  // scrape timeout), not REST's 30 s.
  metrics_options.write_timeout = std::chrono::seconds(10);
  metrics_options.shutdown_timeout = std::chrono::seconds(2);
  const bool metrics_tls = flags_.metrics_tls == "on";
  if (metrics_tls) {
    // TLS only, on the metrics port, with REST's and gRPC's certificate and client CA: a
    // --metrics-require-key key, or the figures themselves, then never cross a network in clear
    // (probe 36).
    metrics_options.tls_cert_file = flags_.tls_cert;
    metrics_options.tls_key_file = flags_.tls_key;
    metrics_options.tls_client_ca_file = flags_.tls_client_ca;
    metrics_options.tls_ticket_key_rotation = std::chrono::seconds(flags_.tls_ticket_rotation_s);
    metrics_options.plain_http = false;
    metrics_options.tls_port = metrics_options.port;
  }
  metrics_auth_ = access_control_->WrapMetrics(metrics_handler_.get());
  auto metrics = HttpServer::Create(metrics_options,
                                    metrics_auth_ ? metrics_auth_.get() : metrics_handler_.get());
  if (!metrics.ok()) return Prefixed("cannot start the metrics server", metrics.status());

  // Now the ports listen, REST first.
  if (listening) listening();
  if (Status started = (*rest)->Start(); !started.ok())
    return Prefixed("cannot start the HTTP server", started);
  rest_server_ = std::move(rest).value();
  if (http_options.plain_http) {
    spdlog::info("listening on HTTP {}:{} ({} I/O threads; HTTP/1.1 and h2c)", flags_.http_address,
                 rest_server_->port(), rest_server_->io_threads());
  }
  if (rest_server_->tls_port() != 0) {
    spdlog::info("listening on HTTPS {}:{} (h2 and http/1.1 by ALPN{})", flags_.http_address,
                 rest_server_->tls_port(),
                 flags_.tls_client_ca.empty() ? "" : "; client certificates required");
  }
  spdlog::info("REST: at most {} connections at once ({})", rest_server_->max_connections(),
               flags_.max_connections > 0
                   ? "--max-connections"
                   : "--max-connections 0: from the RLIMIT_NOFILE soft limit");
  spdlog::info(
      "request bodies still arriving: at most {} bytes at once, REST and gRPC together "
      "({})",
      incoming_bodies_->limit(),
      flags_.max_incoming_body_bytes > 0
          ? "--max-incoming-body-bytes"
          : "--max-incoming-body-bytes 0: a quarter of the memory the server may use");
  if (Status started = (*grpc)->Start(); !started.ok())
    return Prefixed("cannot start the gRPC server", started);
  grpc_server_ = std::move(grpc).value();
  spdlog::info("listening on gRPC {}:{} ({}{}; at most {} connections at once)",
               grpc_options.address, grpc_server_->port(),
               grpc_server_->tls() ? "TLS" : "plaintext",
               flags_.tls_client_ca.empty() ? "" : "; client certificates required",
               grpc_options.transport.max_connections);
  if (Status started = (*metrics)->Start(); !started.ok())
    return Prefixed("cannot start the metrics server", started);
  metrics_server_ = std::move(metrics).value();
  spdlog::info("listening on metrics {}:{} (GET /metrics{})", metrics_options.address,
               metrics_port(), metrics_tls ? ", TLS" : "");
  return Status();
}

uint16_t App::http_port() const {
  return rest_server_ ? rest_server_->port() : 0;
}

uint16_t App::grpc_port() const {
  return grpc_server_ ? grpc_server_->port() : 0;
}

uint16_t App::metrics_port() const {
  if (!metrics_server_) return 0;
  return flags_.metrics_tls == "on" ? metrics_server_->tls_port() : metrics_server_->port();
}

void App::CollectMetrics(TextExposition* out) const {
  manager_->CollectMetrics(out);
  if (auto sample = ReadProcessSample()) AppendProcessMetrics(*sample, out);
  if (log_sink_) log_sink_->AppendMetrics(out);
  if (access_log_) access_log_->AppendMetrics(out);  // the family exists only with it on
  if (tracer_) tracer_->AppendMetrics(out);          // only with tracing on
  access_control_->AppendMetrics(out);
  AppendConnectionMetrics({rest_server_->open_connections(), rest_server_->max_connections(),
                           rest_server_->refused_connections(), rest_server_->failed_accepts()},
                          out);
  AppendIncomingBodyMetrics(
      {incoming_bodies_->held(), incoming_bodies_->limit(), incoming_bodies_->refused()}, out);
  std::vector<TlsHandshakeSample> tls;
  auto add_tls = [&tls](std::string_view port, const HttpServer::TlsHandshakes& h) {
    tls.push_back({port, h.tls12, h.tls13, h.resumed, h.failed, h.timed_out});
  };
  if (rest_server_->tls_port() != 0) add_tls("http", rest_server_->tls_handshakes());
  if (grpc_server_ && grpc_server_->tls()) add_tls("grpc", grpc_server_->tls_handshakes());
  if (metrics_server_ && flags_.metrics_tls == "on")
    add_tls("metrics", metrics_server_->tls_handshakes());
  AppendTlsMetrics(tls, out);
  if (metrics_server_) AppendMetricsPortRefusals(metrics_server_->refused_connections(), out);
}

void App::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (!manager_) return;  // Build failed before it: nothing loads, nothing serves
  manager_->BeginShutdown();
  // A generation still running shortly before the transports give up on their requests
  // (--exit-timeout-secs) ends with the server's reason: its stream gets an error event and its
  // proper end, which a client tells from a network fault, where it was cut mid-body (probe 44).
  // A margin of a quarter of the timeout, at most 1 s: an engine ends a sequence within a step.
  const auto exit_timeout = std::chrono::seconds(flags_.exit_timeout_secs);
  const auto margin = std::min<std::chrono::milliseconds>(
      std::chrono::seconds(1), std::chrono::milliseconds(exit_timeout) / 4);
  const Status ended =
      Unavailable("the server is shutting down: its exit timeout (--exit-timeout-secs " +
                  std::to_string(flags_.exit_timeout_secs) + ") ended the generation");
  // With no timeout, before the transports close everything at once: their last events may
  // still be cut, since nothing waits for them to be written (docs/server.md).
  if (exit_timeout.count() == 0) manager_->EndGenerations(ended);
  std::mutex stop_mu;
  std::condition_variable stopped;
  bool servers_stopped = false;
  // Where no thread can be had (the process's thread limit), the stop goes on without: the
  // generations end at once, and the servers stop one after the other (probe 53).
  StatusOr<std::thread> end_generations = SpawnThread([&] {
    if (exit_timeout.count() == 0) return;
    std::unique_lock lock(stop_mu);
    if (stopped.wait_for(lock, exit_timeout - margin, [&] { return servers_stopped; })) return;
    lock.unlock();
    manager_->EndGenerations(ended);
  });
  if (!end_generations.ok()) {
    spdlog::warn("stopping: {}; generations still running end now",
                 end_generations.status().message());
    if (exit_timeout.count() != 0) manager_->EndGenerations(ended);
  }
  StatusOr<std::thread> rest_stop = std::thread();
  if (rest_server_) rest_stop = SpawnThread([this] { rest_server_->Stop(); });
  if (!rest_stop.ok()) rest_server_->Stop();
  if (grpc_server_) grpc_server_->Stop(exit_timeout);
  if (rest_stop.ok() && rest_stop->joinable()) rest_stop->join();
  {
    std::lock_guard lock(stop_mu);
    servers_stopped = true;
  }
  stopped.notify_all();
  if (end_generations.ok()) end_generations->join();
  manager_->Shutdown();
  // Every request is answered and its trace submitted: export them before the tracer goes.
  if (tracer_ && !tracer_->Flush(std::chrono::seconds(5))) {
    spdlog::warn("tracing: spans still unexported after 5 s are dropped");
  }
  if (metrics_server_) metrics_server_->Stop();
}

}  // namespace harrier
