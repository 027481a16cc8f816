// Harrier's composition root: parse flags, build the objects, serve until SIGINT/SIGTERM.
//
//   backends (ONNX Runtime, llama.cpp) -> ModelRepositoryManager
//       -> KServeHandler -> OpenAiHandler -> DashboardHandler [-> AuthHandler] -> HttpServer
//                                  -> GrpcServer (gRPC) [AuthHandler in front of its handler]
//                                  -> MetricsHandler [-> AuthHandler] -> HttpServer (metrics)
// (AuthHandler: only with --api-key-file or Triton's restricted-API flags; docs/security.md.)
//
// Shutdown on the first SIGINT/SIGTERM (core/shutdown_timeline.h): readiness off while requests
// are still served for --shutdown-delay-secs, then stop accepting, let in-flight HTTP requests
// finish (bounded by --exit-timeout-secs), drain the model queues, exit 0. A signal during the
// delay skips the rest of it; one after it exits at once.
#include <fmt/format.h>
#include <spdlog/details/os.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "auth/access_control.h"
#include "backends/llamacpp/llamacpp_backend.h"
#include "backends/onnxruntime/onnxruntime_backend.h"
#include "cli/serve_flags.h"
#include "core/fatal_signal.h"
#include "core/json_writer.h"
#include "core/shutdown_timeline.h"
#include "harrier/model_manager.h"
#include "lifecycle/model_repository_manager.h"
#include "observability/access_log.h"
#include "observability/async_log_sink.h"
#include "observability/connection_metrics.h"
#include "observability/dashboard_handler.h"
#include "observability/metrics_handler.h"
#include "observability/otlp_tracer.h"
#include "observability/process_metrics.h"
#include "observability/spdlog_log_control.h"
#include "protocol/common/content_coding.h"
#include "protocol/grpc/grpc_server.h"
#include "protocol/kserve/kserve_handler.h"
#include "protocol/openai/openai_handler.h"
#include "repository/override_directory.h"
#include "scheduler/admission_controller.h"
#include "server/http_server.h"
#include "shared_memory/shared_memory_registry.h"

namespace harrier {
namespace {

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

// The server log: spdlog's default logger, on stderr through an AsyncLogSink (a stalled reader
// of stderr never holds a thread that logs, nor the stop).
std::shared_ptr<AsyncLogSink> SetUpLogging(const ServeFlags& flags) {
  AsyncLogSink::Options sink_options;
  sink_options.color = flags.log_format != "json" && spdlog::details::os::in_terminal(stderr) &&
                       spdlog::details::os::is_color_terminal();
  auto sink = std::make_shared<AsyncLogSink>(sink_options);
  auto logger = std::make_shared<spdlog::logger>("harrier", sink);
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
  spdlog::set_default_logger(logger);
  return sink;
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
  // logrotate's habit: a SIGHUP after rotating. It ended the process at once (no drain); the
  // access log follows a rotation by itself (AsyncAccessLog reopens a moved file).
  std::signal(SIGHUP, SIG_IGN);
  return set;
}

const char* SignalName(int signal_number) {
  return signal_number == SIGINT ? "SIGINT" : "SIGTERM";
}

// Waits for the shutdown signals and the drain's delay as `timeline` orders, logging each step;
// returns when the listeners should close. Then a thread of its own waits for one more signal,
// which exits the process at once with status 1.
void AwaitStop(const sigset_t& signals, const ServeFlags& flags, ShutdownTimeline* timeline) {
  for (;;) {
    int signal_number = 0;
    ShutdownTimeline::Action action;
    if (timeline->phase() == ShutdownTimeline::Phase::kServing) {
      sigwait(&signals, &signal_number);
      action = timeline->OnSignal(SteadyClock().Now());
    } else {
      const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
          timeline->DelayLeft(SteadyClock().Now()));
      timespec wait{static_cast<time_t>(left.count() / 1'000'000'000),
                    static_cast<long>(left.count() % 1'000'000'000)};
      signal_number = sigtimedwait(&signals, nullptr, &wait);
      if (signal_number < 0 && errno != EAGAIN) continue;  // EINTR: wait for the rest
      action = signal_number > 0 ? timeline->OnSignal(SteadyClock().Now())
                                 : timeline->OnTime(SteadyClock().Now());
    }
    if (action == ShutdownTimeline::Action::kDrain) {
      spdlog::info(
          "received {}; readiness off, still serving for {} s (--shutdown-delay-secs), then "
          "finishing in-flight requests (at most {} s) and exiting",
          SignalName(signal_number), flags.shutdown_delay_secs, flags.exit_timeout_secs);
    } else if (action == ShutdownTimeline::Action::kStop) {
      if (signal_number <= 0) {
        spdlog::info(
            "shutdown delay over; finishing in-flight requests (at most {} s), then "
            "exiting",
            flags.exit_timeout_secs);
      } else if (timeline->delay() > Clock::duration::zero()) {
        spdlog::info(
            "second signal ({}): skipping the rest of the shutdown delay; finishing "
            "in-flight requests (at most {} s), then exiting",
            SignalName(signal_number), flags.exit_timeout_secs);
      } else {
        spdlog::info("received {}; finishing in-flight requests (at most {} s), then exiting",
                     SignalName(signal_number), flags.exit_timeout_secs);
      }
      break;
    }
  }
  // Once stopping, a further signal means "now" (the timeline's kExitNow): do not wait for the
  // drain. The thread does not ask the timeline, which Serve() destroys before the process ends.
  std::thread([signals] {
    int again = 0;
    sigwait(&signals, &again);
    spdlog::warn("another signal: exiting without waiting for in-flight requests");
    spdlog::default_logger()->flush();  // the line above, written (at most 1 s): no destructors
    std::_Exit(1);
  }).detach();
}

// A SIGTERM or SIGINT while the models load stops the start: `stop` begins the manager's
// shutdown (the loads not begun are skipped, a configured warm-up stops between runs, the load
// in progress finishes), and the server exits 0 without opening a port; another signal exits at
// once with 1 (probe 39: the signals waited, blocked, until every model had loaded and every
// port had opened). A thread polls the blocked signals every 100 ms until Finish(); a signal
// after that stays pending for AwaitStop.
class SignalsWhileLoading {
 public:
  SignalsWhileLoading(const sigset_t& signals, std::function<void()> stop)
      : thread_([this, signals, stop = std::move(stop)] {
          while (!done_.load()) {
            timespec tick{0, 100'000'000};
            const int signal_number = sigtimedwait(&signals, nullptr, &tick);
            if (signal_number <= 0) continue;
            if (signal_.exchange(signal_number) != 0) {
              spdlog::warn("another signal: exiting without waiting for the load in progress");
              spdlog::default_logger()->flush();
              std::_Exit(1);
            }
            spdlog::info(
                "received {} while the models load: skipping the loads not begun, finishing "
                "the one in progress, then exiting",
                SignalName(signal_number));
            stop();
          }
        }) {}
  ~SignalsWhileLoading() { Finish(); }
  SignalsWhileLoading(const SignalsWhileLoading&) = delete;
  SignalsWhileLoading& operator=(const SignalsWhileLoading&) = delete;

  // Stops watching; whether a signal came.
  bool Finish() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
    return signal_.load() != 0;
  }

 private:
  std::atomic<bool> done_{false};
  std::atomic<int> signal_{0};
  std::thread thread_;  // last: it reads the two above from its first instruction
};

int Serve(const ServeFlags& flags) {
  if (std::string bad = CheckFlagCombinations(flags); !bad.empty()) {
    std::fprintf(stderr, "harrier: %s\n", bad.c_str());
    return 2;
  }
  if (std::string bad = CheckListeners(flags); !bad.empty()) {
    std::fprintf(stderr, "harrier: %s\n", bad.c_str());
    return 2;
  }
  if (std::string bad = CheckTransportFlags(flags); !bad.empty()) {
    std::fprintf(stderr, "harrier: %s\n", bad.c_str());
    return 1;
  }
  // First, before any thread exists (the log's writer is one): every thread inherits the mask,
  // so only sigwait() below takes SIGINT and SIGTERM. A writer started before it took a
  // SIGTERM meant for the stop, whose default action ended the process at once.
  const sigset_t signals = BlockShutdownSignals();
  const std::shared_ptr<AsyncLogSink> log_sink = SetUpLogging(flags);
  // Last of all on every way out: the server log's lines written, or given up on after
  // kStopGrace (a stalled reader of stderr must not hold the exit).
  struct StopLogAtExit {
    AsyncLogSink* sink;
    ~StopLogAtExit() { sink->Stop(AsyncLogSink::kStopGrace); }
  } stop_log_at_exit{log_sink.get()};
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
  // The engines this build has, chosen per model by its config's backend or platform, or its
  // model file (lifecycle/backend_registry.h).
  BackendRegistry backends;
  backends.AddTensorBackend(backend->get());
  LlamaCppBackend llamacpp_backend;  // GGUF models (docs/generation.md)
  backends.AddGenerativeBackend(&llamacpp_backend);
  manager_options.backends = &backends;
  manager_options.admission = admission->get();
  manager_options.pin_instance_workers = flags.cpu_affinity == "on";
  manager_options.inline_execution_max_us = flags.inline_execution_max_us;
  manager_options.control_mode = flags.model_control_mode == "poll" ? ModelControlMode::kPoll
                                 : flags.model_control_mode == "explicit"
                                     ? ModelControlMode::kExplicit
                                     : ModelControlMode::kNone;
  manager_options.poll_interval = std::chrono::seconds(flags.repository_poll_secs);
  manager_options.startup_models = flags.load_models;
  manager_options.load_thread_count = flags.model_load_thread_count;
  manager_options.load_retain_bytes = static_cast<uint64_t>(flags.model_load_retain_mb) << 20;
  auto manager = ModelRepositoryManager::Create(manager_options);
  if (!manager.ok()) {
    spdlog::critical("cannot use model repository '{}': {}", flags.model_repository,
                     manager.status().message());
    return 1;
  }
  // A TLS file that cannot be used stops the start now, not after every model has loaded.
  if (!flags.tls_cert.empty() && !flags.tls_key.empty()) {
    if (Status tls = HttpServer::CheckTlsFiles(flags.tls_cert, flags.tls_key, flags.tls_client_ca);
        !tls.ok()) {
      spdlog::critical("cannot use TLS: {}", tls.message());
      return 1;
    }
  }
  // Before any load can make one: the file overrides' directories of servers that were killed.
  RemoveAbandonedOverrideDirectories("");
  bool stopped_while_loading = false;
  {
    SignalsWhileLoading watch(signals, [&manager] { (*manager)->BeginShutdown(); });
    (*manager)->LoadAll();  // logs each model's outcome
    stopped_while_loading = watch.Finish();
  }
  if (stopped_while_loading) {
    (*manager)->Shutdown();
    spdlog::info("stopped before serving");
    return 0;
  }
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
  // Access control (docs/security.md): a key file or restriction that does not parse stops the
  // start here, before any port opens.
  auth::AccessControl::Options access_options;
  access_options.api_key_file = flags.api_key_file;
  access_options.http_restricted_api = flags.http_restricted_api;
  access_options.grpc_restricted_protocol = flags.grpc_restricted_protocol;
  access_options.metrics_require_key = flags.metrics_require_key;
  access_options.access_log = access_log.get();
  auto access_control = auth::AccessControl::Create(access_options);
  if (!access_control.ok()) {
    spdlog::critical("access control: {}", access_control.status().message());
    (*manager)->Shutdown();
    return 1;
  }
  SpdlogLogControl log_control(flags.log_format, /*log_file=*/"");
  // Triton's system shared memory, one registry for REST and gRPC; built before both handlers,
  // so that it is destroyed (every region unregistered, unmapped once no request uses it) after
  // both servers have stopped.
  std::unique_ptr<SharedMemoryRegistry> shared_memory;
  if (flags.allow_client_shm) {
    shared_memory = std::make_unique<SharedMemoryRegistry>();
    spdlog::info("system shared memory on (--allow-client-shm)");
  }

  // The drain's order (readiness off, the delay, then the stop); the health handlers of both
  // front ends read it, so it outlives them.
  ShutdownTimeline shutdown(std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(flags.shutdown_delay_secs)));

  kserve::KServeHandler::Options handler_options;
  handler_options.readiness = &shutdown;
  handler_options.server_version = HARRIER_VERSION;
  handler_options.server_name = flags.server_id;
  handler_options.access_log = access_log.get();
  handler_options.log_control = &log_control;
  handler_options.tracer = tracer.get();
  handler_options.inline_execution = InlinePoliciesOf(flags).rest;
  handler_options.extensions.push_back("logging");  // GET/POST /v2/logging (REST only)
  handler_options.shared_memory = shared_memory.get();
  if (shared_memory) handler_options.extensions.push_back("system_shared_memory");
  handler_options.decode_limits.max_tensor_elements = flags.max_tensor_elements;
  handler_options.max_body_bytes = flags.max_body_bytes;
  kserve::KServeHandler kserve_handler(manager->get(), handler_options);
  // The generation endpoints (OpenAI's /v1, Triton's generate; docs/openai.md) in front of them.
  auto seconds_ms = [](double secs) {
    return std::chrono::milliseconds(static_cast<int64_t>(secs * 1000.0 + 0.5));
  };
  openai::OpenAiHandler::Options openai_options;
  openai_options.access_log = access_log.get();
  openai_options.tracer = tracer.get();
  openai_options.heartbeat_interval = seconds_ms(flags.generation_heartbeat_secs);
  openai_options.disconnect_grace = seconds_ms(flags.generation_disconnect_grace_secs);
  openai_options.max_pending_stream_bytes = flags.generation_stream_buffer_bytes;
  openai_options.store.retention = seconds_ms(flags.generation_stream_retention_secs);
  openai_options.max_body_bytes = flags.max_body_bytes;
  openai::OpenAiHandler openai_handler(manager->get(), &kserve_handler, openai_options);
  // The status page (GET /dashboard, docs/dashboard.md) in front of them all.
  DashboardHandler dashboard_handler([&manager] { return (*manager)->DashboardVersions(); },
                                     &openai_handler);
  // Access control in front of the whole chain, answering from the head (null: none).
  std::unique_ptr<HttpHandler> rest_auth = (*access_control)->WrapRest(&dashboard_handler);
  HttpHandler& handler = rest_auth ? *rest_auth : dashboard_handler;

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
  http_options.refusal_hold = std::chrono::milliseconds(flags.refusal_hold_ms);
  http_options.busy_poll = std::chrono::microseconds(flags.busy_poll_us);
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
  rlimit nofile{};
  grpc_options.transport.max_connections =
      GrpcMaxConnections(flags, (*server)->max_connections(),
                         ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 ? nofile.rlim_cur : 1024);
  grpc_options.address = GrpcAddressOf(flags);
  grpc_options.port = static_cast<uint16_t>(flags.grpc_port);
  grpc_options.tls_cert_file = flags.tls_cert;
  grpc_options.tls_key_file = flags.tls_key;
  grpc_options.tls_client_ca_file = flags.tls_client_ca;
  grpc_options.max_receive_message_bytes = flags.max_body_bytes;
  grpc_options.max_pending_stream_bytes = flags.generation_stream_buffer_bytes;
  grpc_options.handler.server_version = HARRIER_VERSION;
  grpc_options.handler.server_name = flags.server_id;
  grpc_options.handler.readiness = &shutdown;
  grpc_options.handler.decode_limits = handler_options.decode_limits;
  grpc_options.handler.access_log = access_log.get();
  grpc_options.handler.tracer = tracer.get();
  grpc_options.handler.inline_execution = InlinePoliciesOf(flags).grpc;
  grpc_options.handler.shared_memory = shared_memory.get();
  grpc_options.handler.log_control = &log_control;
  // The REST list: logging (the LogSettings RPC) and shared memory are served on both ports.
  grpc_options.handler.extensions = handler_options.extensions;
  grpc_options.wrap_handler = [&access_control](HttpHandler* grpc) {
    return (*access_control)->WrapGrpc(grpc);
  };
  auto grpc_server = grpc_frontend::GrpcServer::Create(grpc_options, manager->get());
  Status grpc_started = grpc_server.ok() ? (*grpc_server)->Start() : grpc_server.status();
  if (!grpc_started.ok()) {
    spdlog::critical("cannot start the gRPC server: {}", grpc_started.message());
    (*server)->Stop();
    (*manager)->Shutdown();
    return 1;
  }
  spdlog::info("listening on gRPC {}:{} ({}{}; at most {} connections at once)",
               grpc_options.address, (*grpc_server)->port(),
               (*grpc_server)->tls() ? "TLS" : "plaintext",
               flags.tls_client_ca.empty() ? "" : "; client certificates required",
               grpc_options.transport.max_connections);

  // Prometheus metrics (docs/metrics.md) on a server of their own, one I/O thread, so that a
  // scrape never waits behind inference traffic and vice versa.
  MetricsHandler metrics_handler(
      {
          [&manager](TextExposition* out) { (*manager)->CollectMetrics(out); },
          [](TextExposition* out) {
            if (auto sample = ReadProcessSample()) AppendProcessMetrics(*sample, out);
          },
          [&log_sink](TextExposition* out) {
            constexpr std::string_view kDropped = "harrier_log_dropped_lines_total";
            out->Declare(kDropped, TextExposition::Type::kCounter,
                         "Server log lines dropped because stderr took no more (its reader fell "
                         "behind or it was closed)");
            out->Add(kDropped, {}, log_sink->dropped_lines());
          },
          [&access_log](TextExposition* out) {
            if (!access_log) return;  // the family exists only with --access-log on
            constexpr std::string_view kDropped = "harrier_access_log_dropped_lines_total";
            out->Declare(
                kDropped, TextExposition::Type::kCounter,
                "Access log lines dropped because the writer fell behind or writing failed");
            out->Add(kDropped, {}, access_log->dropped_lines());
          },
          [&tracer](TextExposition* out) {
            if (tracer) tracer->AppendMetrics(out);  // only with tracing on
          },
          [&access_control](TextExposition* out) { (*access_control)->AppendMetrics(out); },
          [&server](TextExposition* out) {
            const HttpServer& rest = **server;
            AppendConnectionMetrics({rest.open_connections(), rest.max_connections(),
                                     rest.refused_connections(), rest.failed_accepts()},
                                    out);
          },
      },
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
  metrics_options.address = MetricsAddressOf(flags);
  metrics_options.port = static_cast<uint16_t>(flags.metrics_port);
  metrics_options.io_threads = 1;
  metrics_options.max_body_bytes = 64u << 10;
  // A scraper or two; the descriptors are the REST port's (its default limit assumes them).
  metrics_options.max_connections = 64;
  metrics_options.shutdown_timeout = std::chrono::seconds(2);
  const bool metrics_tls = flags.metrics_tls == "on";
  if (metrics_tls) {
    // TLS only, on the metrics port, with REST's and gRPC's certificate and client CA: a
    // --metrics-require-key key, or the figures themselves, then never cross a network in clear
    // (probe 36).
    metrics_options.tls_cert_file = flags.tls_cert;
    metrics_options.tls_key_file = flags.tls_key;
    metrics_options.tls_client_ca_file = flags.tls_client_ca;
    metrics_options.tls_ticket_key_rotation = std::chrono::seconds(flags.tls_ticket_rotation_s);
    metrics_options.plain_http = false;
    metrics_options.tls_port = metrics_options.port;
  }
  std::unique_ptr<HttpHandler> metrics_auth = (*access_control)->WrapMetrics(&metrics_handler);
  auto metrics_server = HttpServer::Create(
      metrics_options,
      metrics_auth ? metrics_auth.get() : static_cast<HttpHandler*>(&metrics_handler));
  Status metrics_started =
      metrics_server.ok() ? (*metrics_server)->Start() : metrics_server.status();
  if (!metrics_started.ok()) {
    spdlog::critical("cannot start the metrics server: {}", metrics_started.message());
    (*server)->Stop();
    (*grpc_server)->Stop(std::chrono::seconds(1));
    (*manager)->Shutdown();
    return 1;
  }
  spdlog::info("listening on metrics {}:{} (GET /metrics{})", metrics_options.address,
               metrics_tls ? (*metrics_server)->tls_port() : (*metrics_server)->port(),
               metrics_tls ? ", TLS" : "");

  AwaitStop(signals, flags, &shutdown);
  // First, while the connections are open: queued loads and unloads are answered 503 at once
  // (run after the front ends had stopped, each queued load lengthened the stop by its load
  // time, for a client already gone), and a configured warm-up stops.
  (*manager)->BeginShutdown();

  // Both front ends stop together: each stops accepting at once, answers what is in flight
  // within --exit-timeout-secs and closes its connections. One after the other, the gRPC port
  // went on accepting calls while REST drained, and the stop could take twice the timeout.
  std::thread rest_stop([&server] { (*server)->Stop(); });
  (*grpc_server)->Stop(std::chrono::seconds(flags.exit_timeout_secs));
  rest_stop.join();
  (*manager)->Shutdown();  // finish what is still queued (nobody is waiting for it now)
  // The REST server object lives on until Serve returns, after the metrics server: a scrape
  // reads its connection counts (ThreadSanitizer saw one read a server destroyed here).
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
  // A fault ends the process with a backtrace on stderr (core/fatal_signal.h); first, so that
  // every thread inherits it.
  harrier::InstallFatalSignalReport();
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
  harrier::AddServeFlags(serve, &flags);

  CLI11_PARSE(app, argc, argv);
  return harrier::Serve(flags);
}
