// App: what `harrier serve` builds, held in the order its parts depend on each other, and
// stopped in the reverse order by one function that every way out goes through.
//
//   backends (ONNX Runtime, llama.cpp) -> ModelRepositoryManager
//       -> KServeHandler -> OpenAiHandler -> DashboardHandler [-> AuthHandler] -> HttpServer
//                                  -> GrpcServer (gRPC) [AuthHandler in front of its handler]
//                                  -> MetricsHandler [-> AuthHandler] -> HttpServer (metrics)
// (AuthHandler: only with --api-key-file or Triton's restricted-API flags; docs/security.md.)
//
// A run: Build() (tracing, engines, admission, the model manager; a bad flag or file fails
// here, before anything loads), LoadModels(), Start() (the handlers and the three ports), then
// Stop() when the process should end. Each step may fail or be skipped; Stop() - and the
// destructor, which calls it - stops whatever the steps before had started:
//   1. the manager's shutdown begins: queued loads and unloads are answered 503 at once, a
//      configured warm-up stops;
//   2. the REST and gRPC ports stop together: each stops accepting, answers what is in flight
//      within --exit-timeout-secs and closes its connections (one after the other, the gRPC port
//      went on accepting calls while REST drained, and the stop took twice the timeout);
//   3. the model queues drain (nobody waits for them now);
//   4. the spans of every answered request are exported (at most 5 s);
//   5. the metrics port stops last, so that scrapes see the drained queues.
// The objects themselves are destroyed after that, in the reverse order of their members below:
// each outlives everything that uses it (the REST server outlives the metrics server, whose
// scrapes read its connection counts; the access log and the tracer outlive every handler).
//
// Thread safety: one thread calls Build, LoadModels, Start, Stop and the destructor;
// BeginShutdown may be called from any thread once Build has succeeded.
#pragma once

#include <functional>
#include <memory>

#include "cli/serve_flags.h"
#include "core/shutdown_timeline.h"
#include "harrier/status.h"

namespace harrier {

class AdmissionController;
class AsyncAccessLog;
class AsyncLogSink;
class BackendRegistry;
class DashboardHandler;
class HttpHandler;
class HttpServer;
class IncomingBodies;
class LlamaCppBackend;
class MetricsHandler;
class ModelRepositoryManager;
class OnnxRuntimeBackend;
class OtlpTracer;
class SharedMemoryRegistry;
class SpdlogLogControl;
namespace auth {
class AccessControl;
}  // namespace auth
namespace grpc_frontend {
class GrpcServer;
}  // namespace grpc_frontend
namespace kserve {
class KServeHandler;
}  // namespace kserve
namespace openai {
class OpenAiHandler;
}  // namespace openai

class App {
 public:
  // `flags` have passed CheckFlagCombinations, CheckListeners and CheckTransportFlags.
  // `log_sink` (the server log's, for its dropped-lines metric; may be null) must outlive the
  // App.
  App(const ServeFlags& flags, const AsyncLogSink* log_sink);
  ~App();  // Stop()
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  // Tracing, ONNX Runtime, admission control, the model manager, and a check of the TLS files.
  // The error names what could not be built ("cannot start ONNX Runtime: ..."); the caller
  // logs it and exits 1.
  Status Build();

  // Loads the repository as --model-control-mode says. Returns early, with the loads not begun
  // skipped, after BeginShutdown.
  void LoadModels();

  // Logs how many versions are ready and names the others: once the loads are over, unless a
  // stop cut them short (the skipped ones are not unavailable; probe 42).
  void LogReadiness() const;

  // Begins the manager's shutdown (Stop's step 1), from any thread: during LoadModels, a signal
  // ends the start this way.
  void BeginShutdown();

  // The files the ports need before they open: the access log (opened) and access control
  // (the key file read). Before Start, which calls it if the caller did not; a separate step
  // so that the stop signals know no port is open while it runs (cli/stop_signals.h).
  Status OpenFiles();

  // OpenFiles, then the handlers, then the REST, gRPC and metrics ports, each logged as it
  // opens. Every server is made, its TLS files read, before any listens; `listening` (may be
  // empty) is called just before the first port listens: until then nothing is served, which
  // the stop signals' watch needs to know (cli/stop_signals.h). On an error nothing is left
  // serving once Stop has run.
  Status Start(const std::function<void()>& listening = nullptr);

  // The drain's order (readiness off, the delay, the stop): AwaitStop drives it, and both
  // front ends' health answers read it.
  ShutdownTimeline* shutdown_timeline() { return &shutdown_; }

  // The ports as bound (0 before Start, or for a port that did not open).
  uint16_t http_port() const;
  uint16_t grpc_port() const;
  uint16_t metrics_port() const;

  // Stops whatever was started, in the order above. Once; later calls return at once.
  void Stop();

 private:
  void CollectMetrics(class TextExposition* out) const;

  const ServeFlags flags_;
  const AsyncLogSink* const log_sink_;
  bool stopped_ = false;

  // Members in the order they are built; destroyed in the reverse order.
  std::unique_ptr<OtlpTracer> tracer_;  // null: tracing off
  std::unique_ptr<OnnxRuntimeBackend> onnxruntime_;
  std::unique_ptr<LlamaCppBackend> llamacpp_;
  std::unique_ptr<BackendRegistry> backends_;
  std::unique_ptr<AdmissionController> admission_;  // outlives every model's admission
  std::unique_ptr<ModelRepositoryManager> manager_;
  std::unique_ptr<AsyncAccessLog> access_log_;  // null: --access-log off
  std::unique_ptr<auth::AccessControl> access_control_;
  std::unique_ptr<SpdlogLogControl> log_control_;
  // Triton's system shared memory, one registry for REST and gRPC (null: off); destroyed (every
  // region unregistered, unmapped once no request uses it) after both servers.
  std::unique_ptr<SharedMemoryRegistry> shared_memory_;
  ShutdownTimeline shutdown_;
  std::unique_ptr<kserve::KServeHandler> kserve_handler_;
  std::unique_ptr<openai::OpenAiHandler> openai_handler_;
  std::unique_ptr<DashboardHandler> dashboard_handler_;
  std::unique_ptr<HttpHandler> rest_auth_;   // null: no access control
  // The budget of request bodies still arriving, REST and gRPC together (server/incoming_bodies.h).
  std::shared_ptr<IncomingBodies> incoming_bodies_;
  std::unique_ptr<HttpServer> rest_server_;  // each server: set once started
  std::unique_ptr<grpc_frontend::GrpcServer> grpc_server_;
  std::unique_ptr<MetricsHandler> metrics_handler_;
  std::unique_ptr<HttpHandler> metrics_auth_;
  std::unique_ptr<HttpServer> metrics_server_;
};

}  // namespace harrier
