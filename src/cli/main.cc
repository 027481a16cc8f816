// Harrier's composition root: parse flags, build the objects, serve until SIGINT/SIGTERM.
//
//   backend (ONNX Runtime) -> ModelRepositoryManager -> KServeHandler -> DashboardHandler
//                                                                        -> HttpServer
//                                                    -> GrpcServer (gRPC)
//                                                    -> MetricsHandler -> HttpServer (metrics)
//
// Shutdown on the first SIGINT/SIGTERM: stop accepting, let in-flight HTTP requests finish
// (bounded by --exit-timeout-secs), drain the model queues, exit 0. A second signal exits at once.
#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "backends/onnxruntime/onnxruntime_backend.h"
#include "core/json_writer.h"
#include "harrier/model_manager.h"
#include "lifecycle/model_repository_manager.h"
#include "observability/access_log.h"
#include "observability/connection_metrics.h"
#include "observability/dashboard_handler.h"
#include "observability/metrics_handler.h"
#include "observability/otlp_tracer.h"
#include "observability/process_metrics.h"
#include "observability/spdlog_log_control.h"
#include "protocol/grpc/grpc_server.h"
#include "protocol/kserve/kserve_handler.h"
#include "scheduler/admission_controller.h"
#include "server/http_server.h"

namespace harrier {
namespace {

struct ServeFlags {
  std::string model_repository;
  std::string http_address = "0.0.0.0";
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
  int http_threads = 0;
  uint64_t max_body_bytes = HttpServer::Options{}.max_body_bytes;
  uint64_t max_connections = HttpServer::Options{}.max_connections;
  uint32_t max_header_bytes = HttpServer::Options{}.max_header_bytes;
  int64_t max_tensor_elements = kserve::DecodeLimits{}.max_tensor_elements;
  int exit_timeout_secs = 30;
  double header_timeout_secs = 10;
  double body_timeout_secs = 30;
  double idle_timeout_secs = 60;
  // Admission control (docs/admission.md).
  int64_t max_inflight = AdmissionController::Options{}.max_inflight;
  std::string overload_protection = "on";
  std::string cpu_affinity = "off";
  uint64_t inline_execution_max_us = 100;
  std::string inline_execution = "grpc";  // which front ends may run a request inline
  int64_t overload_target_queue_delay_us = 0;
  std::string rate_limit_per_model = "off";
  std::string rate_limit_per_client = "off";
  size_t rate_limit_max_clients = AdmissionController::Options{}.max_clients;
  std::string log_format = "text";
  int log_verbose = 0;
  // Access log (docs/logging.md): one line per REST request and gRPC inference; off by default.
  std::string access_log = "off";
  std::string access_log_file;  // "" = stderr
  // Tracing (docs/tracing.md): OTLP/HTTP traces URL; "" = the OTEL_EXPORTER_OTLP_* environment,
  // else off.
  std::string trace_endpoint;
  double trace_sample_ratio = 0.01;
  int64_t trace_queue_size = 2048;
  int64_t trace_export_interval_ms = 1000;
};

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
  if (flags.trace_queue_size < 1) {
    return InvalidArgument("--trace-queue-size must be at least 1, got " +
                           std::to_string(flags.trace_queue_size));
  }
  if (flags.trace_export_interval_ms < 1) {
    return InvalidArgument("--trace-export-interval-ms must be at least 1, got " +
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

// spdlog flag %* : the message as the inside of a JSON string.
class JsonEscapedMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string quoted;
    AppendJsonString(&quoted, std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(quoted.data() + 1, quoted.data() + quoted.size() - 1);  // without the quotes
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonEscapedMessage>();
  }
};

void SetUpLogging(const ServeFlags& flags) {
  auto logger = spdlog::stderr_color_mt("harrier");
  if (flags.log_format == "json") {
    auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<JsonEscapedMessage>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","thread":%t,"message":"%*"})");
    logger->set_formatter(std::move(formatter));
  } else {
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%L%$ %t] %v");
  }
  logger->set_level(flags.log_verbose >= 2   ? spdlog::level::trace
                    : flags.log_verbose == 1 ? spdlog::level::debug
                                             : spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

// Blocks SIGINT and SIGTERM in this thread and every thread started after it, so that they
// are only ever received by sigwait() below, never by an I/O or model thread.
sigset_t BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a vanished client is an error code, not a process exit
  return set;
}

// Flag combinations CLI11's per-flag checks cannot see; empty when fine.
std::string CheckFlagCombinations(const ServeFlags& flags) {
  if (flags.tls_cert.empty() != flags.tls_key.empty())
    return "--tls-cert and --tls-key go together: give both or neither";
  if (!flags.tls_client_ca.empty() && flags.tls_cert.empty())
    return "--tls-client-ca needs --tls-cert and --tls-key";
  if (flags.plain_http == "off" && flags.tls_cert.empty())
    return "--plain-http off leaves no REST port: it needs --tls-cert and --tls-key";
  return {};
}

// Ranges of the HTTP/2 and TLS tuning flags (RFC 9113 §6.5.2 for the HTTP/2 ones); empty when
// fine. Checked before anything starts, so a bad value exits 1 at once.
std::string CheckTransportFlags(const ServeFlags& flags) {
  constexpr int64_t kMaxWindow = 0x7fffffff;  // 2^31-1
  if (flags.http2_initial_window_bytes < 1 || flags.http2_initial_window_bytes > kMaxWindow)
    return "--http2-initial-window-bytes must be in 1..2147483647";
  if (flags.http2_connection_window_bytes < 65535 ||
      flags.http2_connection_window_bytes > kMaxWindow)
    return "--http2-connection-window-bytes must be in 65535..2147483647";
  if (flags.http2_max_frame_bytes < 16384 || flags.http2_max_frame_bytes > 16777215)
    return "--http2-max-frame-bytes must be in 16384..16777215";
  if (flags.tls_ticket_rotation_s < 1 || flags.tls_ticket_rotation_s > 7 * 24 * 3600)
    return "--tls-ticket-rotation-s must be in 1..604800 (7 days)";
  return {};
}

int Serve(const ServeFlags& flags) {
  if (std::string bad = CheckFlagCombinations(flags); !bad.empty()) {
    std::fprintf(stderr, "harrier: %s\n", bad.c_str());
    return 2;
  }
  if (std::string bad = CheckTransportFlags(flags); !bad.empty()) {
    std::fprintf(stderr, "harrier: %s\n", bad.c_str());
    return 1;
  }
  SetUpLogging(flags);
  const sigset_t signals = BlockShutdownSignals();
  spdlog::info("harrier {} starting; model repository '{}'", HARRIER_VERSION,
               flags.model_repository);

  // Tracing (docs/tracing.md): first, so that a bad flag fails before the models load, and so
  // that it outlives the handlers and every request they answer; flushed at shutdown.
  const std::string trace_endpoint = TraceEndpoint(flags);
  auto tracer_created = CreateTracer(flags, trace_endpoint);
  if (!tracer_created.ok()) {
    spdlog::critical("tracing: {}", tracer_created.status().message());
    return 1;
  }
  std::unique_ptr<OtlpTracer> tracer = std::move(tracer_created).value();
  if (tracer) {
    spdlog::info("tracing on: {}, sample ratio {}", trace_endpoint, flags.trace_sample_ratio);
  }

  OnnxRuntimeBackend::Options backend_options;
  backend_options.log_severity = flags.log_verbose >= 2 ? OnnxRuntimeBackend::LogSeverity::kInfo
                                                        : OnnxRuntimeBackend::LogSeverity::kWarning;
  auto backend = OnnxRuntimeBackend::Create(backend_options);
  if (!backend.ok()) {
    spdlog::critical("cannot start ONNX Runtime: {}", backend.status().ToString());
    return 1;
  }

  // Built before the manager so that it outlives every model's admission.
  AdmissionController::Options admission_options;
  admission_options.max_inflight = flags.max_inflight;
  admission_options.overload_protection = flags.overload_protection == "on";
  admission_options.target_queue_delay =
      std::chrono::microseconds(flags.overload_target_queue_delay_us);
  admission_options.per_model = ParseRateLimit(flags.rate_limit_per_model).value();  // checked
  admission_options.per_client = ParseRateLimit(flags.rate_limit_per_client).value();
  admission_options.max_clients = flags.rate_limit_max_clients;
  auto admission = AdmissionController::Create(admission_options);
  if (!admission.ok()) {
    spdlog::critical("admission control: {}", admission.status().message());
    return 1;
  }

  ModelRepositoryManager::Options manager_options;
  manager_options.repository_path = flags.model_repository;
  manager_options.backend = backend->get();
  manager_options.admission = admission->get();
  manager_options.pin_instance_workers = flags.cpu_affinity == "on";
  manager_options.inline_execution_max_us = flags.inline_execution_max_us;
  auto manager = ModelRepositoryManager::Create(manager_options);
  if (!manager.ok()) {
    spdlog::critical("cannot use model repository '{}': {}", flags.model_repository,
                     manager.status().message());
    return 1;
  }
  (*manager)->LoadAll();  // logs each model's outcome
  int ready = 0, total = 0;
  std::string unavailable;
  for (const ModelVersionState& m : (*manager)->Index()) {
    ++total;
    if (m.state == ModelState::kReady) {
      ++ready;
    } else {
      unavailable += (unavailable.empty() ? "" : ", ") + m.name;
    }
  }
  spdlog::info("{} of {} model version(s) ready{}{}", ready, total,
               unavailable.empty() ? "" : "; unavailable: ", unavailable);

  // Built before the handler so that they outlive it and every request it answers.
  std::unique_ptr<AsyncAccessLog> access_log;
  if (flags.access_log == "on") {
    AsyncAccessLog::Options access_options;
    access_options.format = flags.log_format == "json" ? LogFormat::kJson : LogFormat::kText;
    access_options.file = flags.access_log_file;
    auto created = AsyncAccessLog::Create(access_options);
    if (!created.ok()) {
      spdlog::critical("access log: {}", created.status().message());
      (*manager)->Shutdown();
      return 1;
    }
    access_log = std::move(created).value();
    spdlog::info("access log on, to {}",
                 flags.access_log_file.empty() ? "stderr" : flags.access_log_file);
  }
  SpdlogLogControl log_control(flags.log_format, /*log_file=*/"");

  kserve::KServeHandler::Options handler_options;
  handler_options.server_version = HARRIER_VERSION;
  handler_options.access_log = access_log.get();
  handler_options.log_control = &log_control;
  handler_options.tracer = tracer.get();
  handler_options.inline_execution = flags.inline_execution == "all";
  handler_options.extensions.push_back("logging");  // GET/POST /v2/logging (REST only)
  handler_options.decode_limits.max_tensor_elements = flags.max_tensor_elements;
  kserve::KServeHandler kserve_handler(manager->get(), handler_options);
  // The status page (GET /dashboard, docs/dashboard.md) in front of the KServe routes.
  DashboardHandler handler([&manager] { return (*manager)->DashboardVersions(); }, &kserve_handler);

  HttpServer::Options http_options;
  http_options.address = flags.http_address;
  http_options.port = static_cast<uint16_t>(flags.http_port);
  http_options.io_threads = flags.http_threads;
  http_options.max_body_bytes = flags.max_body_bytes;
  http_options.max_connections = flags.max_connections;
  http_options.max_header_bytes = flags.max_header_bytes;
  http_options.shutdown_timeout = std::chrono::seconds(flags.exit_timeout_secs);
  auto ms = [](double secs) {
    return std::chrono::milliseconds(static_cast<int64_t>(secs * 1000.0 + 0.5));
  };
  http_options.header_timeout = ms(flags.header_timeout_secs);
  http_options.body_timeout = ms(flags.body_timeout_secs);
  http_options.keepalive_timeout = ms(flags.idle_timeout_secs);
  http_options.http2_max_concurrent_streams = flags.http2_max_concurrent_streams;
  http_options.http2_initial_window_bytes = static_cast<uint32_t>(flags.http2_initial_window_bytes);
  http_options.http2_connection_window_bytes =
      static_cast<uint32_t>(flags.http2_connection_window_bytes);
  http_options.http2_max_frame_bytes = static_cast<uint32_t>(flags.http2_max_frame_bytes);
  http_options.tls_ticket_key_rotation = std::chrono::seconds(flags.tls_ticket_rotation_s);
  http_options.tls_cert_file = flags.tls_cert;
  http_options.tls_key_file = flags.tls_key;
  http_options.tls_client_ca_file = flags.tls_client_ca;
  http_options.tls_port = static_cast<uint16_t>(flags.https_port);
  http_options.plain_http = flags.plain_http == "on";
  http_options.access_log = access_log.get();  // the HTTP layer's own refusals (400, 408, 413, 431)
  auto server = HttpServer::Create(http_options, &handler);
  Status started = server.ok() ? (*server)->Start() : server.status();
  if (!started.ok()) {
    spdlog::critical("cannot start the HTTP server: {}", started.message());
    (*manager)->Shutdown();
    return 1;
  }
  if (http_options.plain_http) {
    spdlog::info("listening on HTTP {}:{} ({} I/O threads; HTTP/1.1 and h2c)", flags.http_address,
                 (*server)->port(), (*server)->io_threads());
  }
  if ((*server)->tls_port() != 0) {
    spdlog::info("listening on HTTPS {}:{} (h2 and http/1.1 by ALPN{})", flags.http_address,
                 (*server)->tls_port(),
                 flags.tls_client_ca.empty() ? "" : "; client certificates required");
  }
  spdlog::info("REST: at most {} connections at once ({})", (*server)->max_connections(),
               flags.max_connections > 0
                   ? "--max-connections"
                   : "--max-connections 0: from the RLIMIT_NOFILE soft limit");

  // gRPC (docs/grpc.md) on its own port, TLS with the same certificate flags.
  grpc_frontend::GrpcServer::Options grpc_options;
  grpc_options.transport = http_options;  // the same HTTP/2 server settings and timeouts
  // Its own connection limit: --max-connections when given; derived, a sixteenth of REST's (at
  // least 64), inside the descriptor reserve REST's derived limit leaves (gRPC channels are few
  // and carry many calls each).
  grpc_options.transport.max_connections =
      flags.max_connections > 0 ? flags.max_connections
                                : std::max<uint64_t>(64, (*server)->max_connections() / 16);
  grpc_options.address = flags.http_address;
  grpc_options.port = static_cast<uint16_t>(flags.grpc_port);
  grpc_options.tls_cert_file = flags.tls_cert;
  grpc_options.tls_key_file = flags.tls_key;
  grpc_options.tls_client_ca_file = flags.tls_client_ca;
  grpc_options.max_receive_message_bytes = flags.max_body_bytes;
  grpc_options.handler.server_version = HARRIER_VERSION;
  grpc_options.handler.decode_limits = handler_options.decode_limits;
  grpc_options.handler.access_log = access_log.get();
  grpc_options.handler.tracer = tracer.get();
  grpc_options.handler.inline_execution = flags.inline_execution != "off";
  auto grpc_server = grpc_frontend::GrpcServer::Create(grpc_options, manager->get());
  Status grpc_started = grpc_server.ok() ? (*grpc_server)->Start() : grpc_server.status();
  if (!grpc_started.ok()) {
    spdlog::critical("cannot start the gRPC server: {}", grpc_started.message());
    (*server)->Stop();
    (*manager)->Shutdown();
    return 1;
  }
  spdlog::info("listening on gRPC {}:{} ({}{}; at most {} connections at once)", flags.http_address,
               (*grpc_server)->port(), (*grpc_server)->tls() ? "TLS" : "plaintext",
               flags.tls_client_ca.empty() ? "" : "; client certificates required",
               grpc_options.transport.max_connections);

  // Prometheus metrics (docs/metrics.md) on a server of their own, one I/O thread, so that a
  // scrape never waits behind inference traffic and vice versa.
  MetricsHandler metrics_handler({
      [&manager](TextExposition* out) { (*manager)->CollectMetrics(out); },
      [](TextExposition* out) {
        if (auto sample = ReadProcessSample()) AppendProcessMetrics(*sample, out);
      },
      [&access_log](TextExposition* out) {
        if (!access_log) return;  // the family exists only with --access-log on
        constexpr std::string_view kDropped = "harrier_access_log_dropped_lines_total";
        out->Declare(kDropped, TextExposition::Type::kCounter,
                     "Access log lines dropped because the writer fell behind");
        out->Add(kDropped, {}, access_log->dropped_lines());
      },
      [&tracer](TextExposition* out) {
        if (tracer) tracer->AppendMetrics(out);  // only with tracing on
      },
      [&server](TextExposition* out) {
        const HttpServer& rest = **server;
        AppendConnectionMetrics({rest.open_connections(), rest.max_connections(),
                                 rest.refused_connections(), rest.failed_accepts()},
                                out);
      },
  });
  HttpServer::Options metrics_options;
  metrics_options.address = flags.http_address;
  metrics_options.port = static_cast<uint16_t>(flags.metrics_port);
  metrics_options.io_threads = 1;
  metrics_options.max_body_bytes = 64u << 10;
  // A scraper or two; the descriptors are the REST port's (its default limit assumes them).
  metrics_options.max_connections = 64;
  metrics_options.shutdown_timeout = std::chrono::seconds(2);
  auto metrics_server = HttpServer::Create(metrics_options, &metrics_handler);
  Status metrics_started =
      metrics_server.ok() ? (*metrics_server)->Start() : metrics_server.status();
  if (!metrics_started.ok()) {
    spdlog::critical("cannot start the metrics server: {}", metrics_started.message());
    (*server)->Stop();
    (*grpc_server)->Stop(std::chrono::seconds(1));
    (*manager)->Shutdown();
    return 1;
  }
  spdlog::info("listening on metrics {}:{} (GET /metrics)", flags.http_address,
               (*metrics_server)->port());

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  spdlog::info("received {}; finishing in-flight requests (at most {} s), then exiting",
               signal_number == SIGINT ? "SIGINT" : "SIGTERM", flags.exit_timeout_secs);
  // A second signal means "now": do not wait for the drain.
  std::thread([signals] {
    int again = 0;
    sigwait(&signals, &again);
    spdlog::warn("second signal: exiting without waiting for in-flight requests");
    std::_Exit(1);
  }).detach();

  (*server)->Stop();  // stop accepting, answer what is in flight, close connections
  (*grpc_server)->Stop(std::chrono::seconds(flags.exit_timeout_secs));  // the same for gRPC
  (*manager)->Shutdown();  // finish what is still queued (nobody is waiting for it now)
  server->reset();
  // Every request is answered and its trace submitted: export them before the tracer goes.
  if (tracer && !tracer->Flush(std::chrono::seconds(5))) {
    spdlog::warn("tracing: spans still unexported after 5 s are dropped");
  }
  (*metrics_server)->Stop();  // scrapes see the drained queues until the end
  spdlog::info("stopped");
  return 0;
}

}  // namespace
}  // namespace harrier

int main(int argc, char** argv) {
  // Before any thread exists: it sets an environment variable (ONNX Runtime's telemetry off).
  harrier::OnnxRuntimeBackend::DisableTelemetryForProcess();
  using harrier::ServeFlags;
  ServeFlags flags;
  CLI::App app{
      "Harrier: a low-latency inference server for ONNX models, speaking the KServe v2 "
      "(Open Inference Protocol) REST API with Triton's extensions.",
      "harrier"};
  app.set_version_flag("--version", std::string("harrier ") + HARRIER_VERSION,
                       "Print the version and exit");
  app.require_subcommand(1);

  CLI::App* serve = app.add_subcommand("serve", "Load a model repository and serve it over HTTP");
  serve
      ->add_option("--model-repository", flags.model_repository,
                   "Triton-layout model repository: <dir>/<model>/[config.pbtxt] and "
                   "<dir>/<model>/<version>/model.onnx")
      ->required();
  serve->add_option("--http-address", flags.http_address, "Address the HTTP server binds")
      ->capture_default_str();
  serve->add_option("--http-port", flags.http_port, "HTTP port (0: pick a free one)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  serve
      ->add_option("--grpc-port", flags.grpc_port,
                   "gRPC port (KServe v2 gRPC, TLS with --tls-cert; 0: pick a free one; "
                   "docs/grpc.md)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  serve
      ->add_option("--tls-cert", flags.tls_cert,
                   "PEM certificate chain: with --tls-key, serve REST over TLS on --https-port "
                   "(h2 or http/1.1 by ALPN) and gRPC over TLS")
      ->check(CLI::ExistingFile);
  serve->add_option("--tls-key", flags.tls_key, "PEM private key for --tls-cert")
      ->check(CLI::ExistingFile);
  serve
      ->add_option("--tls-client-ca", flags.tls_client_ca,
                   "PEM CA bundle: require client certificates signed by it (mutual TLS)")
      ->check(CLI::ExistingFile);
  serve
      ->add_option("--https-port", flags.https_port,
                   "TLS port for REST when --tls-cert is given (0: pick a free one)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  serve
      ->add_option("--plain-http", flags.plain_http,
                   "Serve plain HTTP (HTTP/1.1 and h2c) on --http-port; 'off' needs --tls-cert")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  serve
      ->add_option("--metrics-port", flags.metrics_port,
                   "Prometheus metrics port: GET /metrics (0: pick a free one; docs/metrics.md)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  serve
      ->add_option("--http2-max-concurrent-streams", flags.http2_max_concurrent_streams,
                   "HTTP/2 (h2c and h2): streams a client may have open at once per connection")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
  serve
      ->add_option("--http2-initial-window-bytes", flags.http2_initial_window_bytes,
                   "HTTP/2: SETTINGS_INITIAL_WINDOW_SIZE, how much of a stream's request body a "
                   "client may send ahead (1..2147483647)")
      ->capture_default_str();
  serve
      ->add_option("--http2-connection-window-bytes", flags.http2_connection_window_bytes,
                   "HTTP/2: the connection's receive window, all streams together "
                   "(65535..2147483647)")
      ->capture_default_str();
  serve
      ->add_option("--http2-max-frame-bytes", flags.http2_max_frame_bytes,
                   "HTTP/2: SETTINGS_MAX_FRAME_SIZE, the largest frame payload a client may send "
                   "(16384..16777215)")
      ->capture_default_str();
  serve
      ->add_option("--tls-ticket-rotation-s", flags.tls_ticket_rotation_s,
                   "TLS session-ticket key period in seconds; the previous key is still accepted, "
                   "so a ticket resumes for at most two periods (1..604800)")
      ->capture_default_str();
  serve
      ->add_option("--http-threads", flags.http_threads,
                   "HTTP I/O threads (0: one per usable core)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  serve
      ->add_option("--max-body-bytes", flags.max_body_bytes,
                   "Largest request body; larger ones get 413")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve
      ->add_option("--max-connections", flags.max_connections,
                   "Most REST connections open at once (HTTP/1.1, HTTP/2, TLS), plain and TLS "
                   "ports together; one more is closed as soon as it is accepted. 0: the "
                   "RLIMIT_NOFILE soft limit less an eighth of it (at least 64): 896 of 1024")
      ->capture_default_str();
  serve
      ->add_option("--max-header-bytes", flags.max_header_bytes,
                   "Largest request line + headers; larger ones get 431")
      ->capture_default_str()
      ->check(CLI::Range(1024u, 16u << 20));
  serve
      ->add_option("--max-tensor-elements", flags.max_tensor_elements,
                   "Most elements one input tensor may claim; more get 413")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve
      ->add_option("--http-header-timeout-secs", flags.header_timeout_secs,
                   "A request's line and headers must arrive within this time (else 408)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  serve
      ->add_option("--http-body-timeout-secs", flags.body_timeout_secs,
                   "Longest pause inside a request body (else 408)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  serve
      ->add_option("--http-idle-timeout-secs", flags.idle_timeout_secs,
                   "Idle keep-alive connections are closed after this time")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  serve
      ->add_option("--exit-timeout-secs", flags.exit_timeout_secs,
                   "On SIGINT/SIGTERM, how long in-flight requests may take to finish")
      ->capture_default_str()
      ->check(CLI::Range(0, 86400));
  // Admission control: docs/admission.md.
  auto rate_limit = [](const std::string& text) {
    auto parsed = harrier::ParseRateLimit(text);
    return parsed.ok() ? std::string() : parsed.status().message();
  };
  serve
      ->add_option("--max-inflight", flags.max_inflight,
                   "Requests admitted and not yet answered, across all models; more get 429 "
                   "(0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  serve
      ->add_option("--cpu-affinity", flags.cpu_affinity,
                   "Pin each model instance's worker thread to one CPU, round robin over the "
                   "process's CPUs in load order (ONNX Runtime's own pool threads stay unpinned)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  serve
      ->add_option("--inline-execution-max-us", flags.inline_execution_max_us,
                   "Run a request on the thread that received it (no hand-off to the model's "
                   "worker) when nothing is queued, an instance is idle and the model's recent "
                   "one-request executions took at most this many microseconds (0: never)")
      ->capture_default_str();
  serve
      ->add_option("--inline-execution", flags.inline_execution,
                   "Front ends whose threads may run a short request inline: grpc (gRPC only), "
                   "all (also the HTTP I/O threads), off")
      ->capture_default_str()
      ->check(CLI::IsMember({"grpc", "all", "off"}));
  serve
      ->add_option("--overload-protection", flags.overload_protection,
                   "Per-model admission on the predicted queue delay: answers 429 instead of "
                   "letting queue delay grow past its target")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  serve
      ->add_option("--overload-target-queue-delay-us", flags.overload_target_queue_delay_us,
                   "Queue delay overload protection holds each model to (0: derived from the "
                   "model's batch-1 service time, half of it)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{3'600'000'000}));
  serve
      ->add_option("--rate-limit-per-model", flags.rate_limit_per_model,
                   "Token bucket for each model version's requests, RPS[:BURST] or off "
                   "(config parameter harrier.rate_limit.rps overrides)")
      ->capture_default_str()
      ->check(rate_limit);
  serve
      ->add_option("--rate-limit-per-client", flags.rate_limit_per_client,
                   "Token bucket per client key (X-Client-Id header; none = one anonymous "
                   "client), across all models: RPS[:BURST] or off")
      ->capture_default_str()
      ->check(rate_limit);
  serve
      ->add_option("--rate-limit-max-clients", flags.rate_limit_max_clients,
                   "Client keys a rate limiter remembers (least recently seen are forgotten)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 24));
  serve->add_option("--log-format", flags.log_format, "Log lines as text or as JSON objects")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  serve
      ->add_option("--log-verbose", flags.log_verbose,
                   "0: info; 1: debug; 2: trace (and ONNX Runtime's info)")
      ->capture_default_str()
      ->check(CLI::Range(0, 10));
  serve
      ->add_option("--access-log", flags.access_log,
                   "One line per REST request and gRPC inference (request id, model, version, "
                   "input shapes, status, bytes, stage durations) in --log-format, written off "
                   "the request path (docs/logging.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  serve->add_option("--access-log-file", flags.access_log_file,
                    "Write the access log to this file (appended to) instead of stderr");

  // Tracing: docs/tracing.md. Values are checked at startup (exit 1), with the endpoint.
  serve->add_option("--trace-endpoint", flags.trace_endpoint,
                    "OTLP/HTTP traces URL (http://collector:4318/v1/traces) to export request "
                    "traces to; empty: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, then "
                    "OTEL_EXPORTER_OTLP_ENDPOINT, else tracing is off");
  serve
      ->add_option("--trace-sample-ratio", flags.trace_sample_ratio,
                   "Share of requests without a valid traceparent that are traced, 0..1 (a "
                   "client's traceparent decides by its sampled flag)")
      ->capture_default_str();
  serve
      ->add_option("--trace-queue-size", flags.trace_queue_size,
                   "Traced requests waiting for export; more are dropped and counted")
      ->capture_default_str();
  serve
      ->add_option("--trace-export-interval-ms", flags.trace_export_interval_ms,
                   "How often queued spans are exported (sooner when a batch is full)")
      ->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  return harrier::Serve(flags);
}
