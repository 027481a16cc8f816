// `harrier serve`: parse and check the flags, build the server (cli/app.h), serve until SIGINT or
// SIGTERM, then stop in order.
//
// Shutdown on the first SIGINT/SIGTERM (core/shutdown_timeline.h): readiness off while requests
// are still served for --shutdown-delay-secs, then stop accepting, let in-flight requests finish
// (bounded by --exit-timeout-secs), drain the model queues, exit 0. A signal during the delay
// skips the rest of it; one after it exits at once with 1. A signal while the models load ends
// the start: exit 0 without opening a port (cli/stop_signals.h).
//
// Exit status: 0 after a stop, 1 when the server cannot start, 2 for flags that cannot work
// together (docs/server.md).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include "backends/onnxruntime/onnxruntime_backend.h"
#include "cli/app.h"
#include "cli/serve_flags.h"
#include "cli/server_log.h"
#include "cli/stop_signals.h"
#include "core/fatal_signal.h"
#include "core/standard_descriptors.h"
#include "observability/async_log_sink.h"

namespace harrier {
namespace {

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
  // First, before any thread exists (the log's writer is one): every thread inherits the mask.
  const sigset_t signals = BlockShutdownSignals();
  const std::shared_ptr<AsyncLogSink> log_sink = SetUpServerLog(flags);
  // Last of all on every way out, after the App has stopped: the server log's lines written, or
  // given up on after kStopGrace (a stalled reader of stderr must not hold the exit).
  struct StopLogAtExit {
    AsyncLogSink* sink;
    ~StopLogAtExit() { sink->Stop(AsyncLogSink::kStopGrace); }
  } stop_log_at_exit{log_sink.get()};
  spdlog::info("harrier {} starting; model repository '{}'", HARRIER_VERSION,
               flags.model_repository);

  // From here until AwaitStop, a signal stops the start (probe 44: one blocked opening a file
  // ignored it).
  SignalsBeforeServing watch(signals);
  watch.Step("checking the flags and their files", /*bounded=*/true);
  App app(flags, log_sink.get());
  // Every way out stops the watch first: its forced exit must not fire while the App unwinds.
  auto failed = [&watch](const Status& status) {
    watch.Finish();
    spdlog::critical("{}", status.message());
    return 1;  // the App's destructor stops what had started
  };
  if (Status built = app.Build(); !built.ok()) return failed(built);
  if (watch.stop_signal() == 0) {
    watch.Loading([&app] { app.BeginShutdown(); });
    app.LoadModels();
  }
  if (watch.stop_signal() == 0) {
    app.LogReadiness();
    watch.Step("opening the access log and the key file", /*bounded=*/true);
    if (Status opened = app.OpenFiles(); !opened.ok()) return failed(opened);
  }
  if (watch.stop_signal() != 0) {
    watch.Finish();
    app.Stop();
    spdlog::info("stopped before serving");
    return 0;
  }
  // Bounded until the first port listens (every server reads its TLS files before; probes 48
  // and 50: a hung read there ignored the signal), then not: once the REST port listens, it
  // answers, and a stop then takes the drain's order.
  watch.Step("preparing the ports (reading the TLS files, if any)", /*bounded=*/true);
  const Status started =
      app.Start([&watch] { watch.Step("opening the ports", /*bounded=*/false); });
  if (!started.ok()) return failed(started);
  watch.Finish();
  // A signal while the ports opened: the server stops as it would have a moment later, in the
  // drain's order (AwaitStop takes it, pending, from this thread).
  if (const int signal_number = watch.stop_signal(); signal_number != 0) raise(signal_number);
  AwaitStop(signals, flags, app.shutdown_timeline());
  app.Stop();
  spdlog::info("stopped");
  return 0;
}

}  // namespace
}  // namespace harrier

int main(int argc, char** argv) {
  // First of all: a closed stdin, stdout or stderr must not be reused by the next descriptor
  // opened (the server log writes to 2). Best effort: without /dev/null (a bare chroot) the
  // server starts as it did before (probe 71: it exited 1 without a word).
  (void)harrier::OpenClosedStandardDescriptors();
  // A fault ends the process with a backtrace on stderr (core/fatal_signal.h); first, so that
  // every thread inherits it.
  harrier::InstallFatalSignalReport();
  // Before any thread exists: it sets an environment variable (ONNX Runtime's telemetry off).
  harrier::OnnxRuntimeBackend::DisableTelemetryForProcess();
  harrier::ServeFlags flags;
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
