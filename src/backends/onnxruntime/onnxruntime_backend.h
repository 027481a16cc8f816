// OnnxRuntimeBackend: serves ONNX models through ONNX Runtime (CPU execution provider).
//
// The backend owns the process's one Ort::Env (ONNX Runtime's logging and global state) and
// creates one Ort::Session per model instance, or one per version when the model's config asks
// for share_session_between_instances. Create exactly one OnnxRuntimeBackend per
// process: ONNX Runtime keeps a single environment per process, so a second backend would share
// the first one's environment and its log settings would be ignored.
//
// This header does not include ONNX Runtime's headers, so the composition root can build the
// backend without seeing them; everything that does lives next to this file.
//
// Telemetry: ONNX Runtime's own telemetry is off. Create() sets ORT_DISABLE_TELEMETRY=1 in the
// process environment (unless it already is 1) and calls DisableTelemetryEvents() on the Env, so
// ONNX Runtime neither writes files under $HOME/.cache/Microsoft and $TMPDIR nor contacts
// Microsoft's collector (docs/onnxruntime-backend.md).
//
// Lifetime: instances keep the environment alive, so the backend may be destroyed before the
// instances it created.
// Thread safety: Inspect and CreateInstance may be called from any thread, concurrently.
// Run on one instance is called by one thread at a time (see ModelInstance).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "harrier/backend.h"
#include "harrier/status.h"

namespace harrier {

class OnnxRuntimeBackend : public Backend {
 public:
  enum class LogSeverity { kVerbose, kInfo, kWarning, kError, kFatal };

  struct Options {
    // ONNX Runtime's messages below this severity are dropped; the rest go to spdlog's default
    // logger (ORT's verbose/info -> debug/info, warning -> warn, error -> error, fatal ->
    // critical). Default: warnings and worse.
    LogSeverity log_severity = LogSeverity::kWarning;
    // The name ONNX Runtime gives its log messages' source. Default "harrier".
    std::string log_id = "harrier";
  };

  // Sets ORT_DISABLE_TELEMETRY=1 in the process environment, which ONNX Runtime reads when its
  // environment is created. Call it first thing in main(), before any thread starts: setenv is
  // not safe while another thread reads the environment (curl, gRPC and glibc's resolver do).
  // Create() calls it too, and then it only reads the variable when it is already 1.
  static void DisableTelemetryForProcess();

  // Creates the ONNX Runtime environment with its telemetry off (see above). kInternal when ONNX
  // Runtime cannot start. REQUIRES: DisableTelemetryForProcess() was called before other threads
  // started, or no other thread touches the environment during this call.
  static StatusOr<std::unique_ptr<OnnxRuntimeBackend>> Create(const Options& options);

  ~OnnxRuntimeBackend() override;
  OnnxRuntimeBackend(const OnnxRuntimeBackend&) = delete;
  OnnxRuntimeBackend& operator=(const OnnxRuntimeBackend&) = delete;

  std::string_view name() const override { return "onnxruntime"; }
  std::string_view platform() const override { return "onnxruntime_onnx"; }
  std::string_view default_model_filename() const override { return "model.onnx"; }

  // Loads the model with graph optimisation off and one thread (cheap: no kernels are
  // optimised, but initializers are still read), and returns its inputs and outputs.
  // Dims are -1 where the model leaves them free (symbolic or unset); a tensor of unknown rank
  // gets empty dims.
  // Errors: kNotFound (no such file), kInvalidArgument (not a model, a directory, a model ONNX
  // Runtime rejects, or an input/output that is not a tensor of a Harrier data type — the
  // message names the tensor and its type), kInternal (other engine failures).
  StatusOr<ModelSignature> Inspect(const std::string& model_path) override;

  // Loads one instance with the session settings resolved from `options` (see
  // onnxruntime_session_config.h for the defaults and the recognised parameters).
  // Errors: as Inspect, plus kInvalidArgument for a malformed option or parameter.
  StatusOr<std::unique_ptr<ModelInstance>> CreateInstance(const std::string& model_path,
                                                          const InstanceOptions& options) override;

  // With the parameter share_session_between_instances (Triton's name) on, an instance over
  // `first`'s session (loaded once, weights in memory once); otherwise CreateInstance.
  StatusOr<std::unique_ptr<ModelInstance>> CreateAnotherInstance(
      const ModelInstance& first, const std::string& model_path,
      const InstanceOptions& options) override;

 private:
  struct Environment;  // holds the Ort::Env; shared with the instances
  explicit OnnxRuntimeBackend(std::shared_ptr<Environment> env);

  std::shared_ptr<Environment> env_;
};

}  // namespace harrier
