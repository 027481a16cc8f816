#include "backends/onnxruntime/onnxruntime_backend.h"

#include <onnxruntime_cxx_api.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <system_error>
#include <utility>

#include "backends/onnxruntime/onnxruntime_instance.h"
#include "backends/onnxruntime/onnxruntime_session_config.h"
#include "backends/onnxruntime/onnxruntime_types.h"

namespace harrier {

namespace {

// This ONNX Runtime build has telemetry (Microsoft's 1DS client) that is on by default: when the
// first Ort::Env is created it writes $TMPDIR/mat-debug-<pid>.log, $TMPDIR/.ses and a device id
// and event queue under ~/.cache/Microsoft/DeveloperTools/.onnxruntime/, and about 10 s later
// resolves its collector's host name. DisableTelemetryEvents() on the Env stops none of that
// (checked with strace: same files, same DNS queries); only this variable, read when the Env is
// created, does.
constexpr const char* kDisableTelemetryVariable = "ORT_DISABLE_TELEMETRY";

}  // namespace

void OnnxRuntimeBackend::DisableTelemetryForProcess() {
  const char* value = std::getenv(kDisableTelemetryVariable);
  if (value != nullptr && std::strcmp(value, "1") == 0) return;  // no setenv: safe beside threads
  ::setenv(kDisableTelemetryVariable, "1", /*overwrite=*/1);
}

struct OnnxRuntimeBackend::Environment {
  explicit Environment(const Options& options)
      : env(ToOrtLevel(options.log_severity), options.log_id.c_str(), &LogToSpdlog, nullptr) {
    // ONNX Runtime's documented switch. In this build it leaves the files and the DNS queries
    // alone (the variable above stops those), but it is what other builds honour.
    env.DisableTelemetryEvents();
  }

  static OrtLoggingLevel ToOrtLevel(LogSeverity severity) {
    switch (severity) {
      case LogSeverity::kVerbose: return ORT_LOGGING_LEVEL_VERBOSE;
      case LogSeverity::kInfo: return ORT_LOGGING_LEVEL_INFO;
      case LogSeverity::kWarning: return ORT_LOGGING_LEVEL_WARNING;
      case LogSeverity::kError: return ORT_LOGGING_LEVEL_ERROR;
      case LogSeverity::kFatal: return ORT_LOGGING_LEVEL_FATAL;
    }
    return ORT_LOGGING_LEVEL_WARNING;
  }

  // Called by ONNX Runtime on any of its threads; spdlog's default logger is thread-safe.
  static void ORT_API_CALL LogToSpdlog(void* /*param*/, OrtLoggingLevel severity,
                                       const char* category, const char* /*logid*/,
                                       const char* code_location, const char* message) {
    spdlog::level::level_enum level = spdlog::level::info;
    switch (severity) {
      case ORT_LOGGING_LEVEL_VERBOSE: level = spdlog::level::debug; break;
      case ORT_LOGGING_LEVEL_INFO: level = spdlog::level::info; break;
      case ORT_LOGGING_LEVEL_WARNING: level = spdlog::level::warn; break;
      case ORT_LOGGING_LEVEL_ERROR: level = spdlog::level::err; break;
      case ORT_LOGGING_LEVEL_FATAL: level = spdlog::level::critical; break;
    }
    spdlog::log(level, "onnxruntime [{}] {} ({})", category ? category : "", message ? message : "",
                code_location ? code_location : "");
  }

  Ort::Env env;
};

namespace {

// ORT's own messages for these cases are long or misleading ("model package"), so they are
// answered before ORT sees the path.
Status CheckModelFile(const std::string& model_path) {
  std::error_code ec;
  const auto status = std::filesystem::status(model_path, ec);
  if (status.type() == std::filesystem::file_type::not_found) {
    return NotFound("model file '" + model_path + "' does not exist");
  }
  if (status.type() == std::filesystem::file_type::directory) {
    return InvalidArgument("model path '" + model_path + "' is a directory, not an ONNX file");
  }
  return Status::Ok();  // other failures (permissions, ...) are reported by ORT
}

}  // namespace

OnnxRuntimeBackend::OnnxRuntimeBackend(std::shared_ptr<Environment> env) : env_(std::move(env)) {}

OnnxRuntimeBackend::~OnnxRuntimeBackend() = default;

StatusOr<std::unique_ptr<OnnxRuntimeBackend>> OnnxRuntimeBackend::Create(const Options& options) {
  DisableTelemetryForProcess();
  try {
    auto env = std::make_shared<Environment>(options);
    return std::unique_ptr<OnnxRuntimeBackend>(new OnnxRuntimeBackend(std::move(env)));
  } catch (const Ort::Exception& e) {
    return Internal(std::string("starting ONNX Runtime: ") + e.what());
  } catch (const std::exception& e) {
    return Internal(std::string("starting ONNX Runtime: ") + e.what());
  }
}

StatusOr<ModelSignature> OnnxRuntimeBackend::Inspect(const std::string& model_path) {
  RETURN_IF_ERROR(CheckModelFile(model_path));
  const std::string context = "reading model '" + model_path + "'";
  try {
    Ort::SessionOptions so;
    so.SetGraphOptimizationLevel(ORT_DISABLE_ALL);
    so.SetIntraOpNumThreads(1);
    so.SetInterOpNumThreads(1);
    so.SetExecutionMode(ORT_SEQUENTIAL);
    so.DisableCpuMemArena();  // the session runs nothing; no arena to grow and keep
    Ort::Session session(env_->env, model_path.c_str(), so);
    StatusOr<ModelSignature> signature = ort::ReadSignature(session);
    if (!signature.ok()) return signature.status().WithContext(context);
    return signature;
  } catch (const Ort::Exception& e) {
    return ort::StatusFromOrtException(e, ort::OrtCallSite::kLoad, context);
  } catch (const std::exception& e) {
    return Internal(context + ": " + e.what());
  }
}

StatusOr<std::unique_ptr<ModelInstance>> OnnxRuntimeBackend::CreateInstance(
    const std::string& model_path, const InstanceOptions& options) {
  RETURN_IF_ERROR(CheckModelFile(model_path));
  StatusOr<ort::OnnxRuntimeSessionConfig> config = ort::ResolveSessionConfig(options);
  if (!config.ok()) return config.status().WithContext("model '" + model_path + "'");
  // The instance shares ownership of the environment: sessions must not outlive it.
  std::shared_ptr<const Ort::Env> env(env_, &env_->env);
  ASSIGN_OR_RETURN(auto instance,
                   ort::OnnxRuntimeInstance::Create(std::move(env), model_path, *config));
  return std::unique_ptr<ModelInstance>(std::move(instance));
}

StatusOr<std::unique_ptr<ModelInstance>> OnnxRuntimeBackend::CreateAnotherInstance(
    const ModelInstance& first, const std::string& model_path, const InstanceOptions& options) {
  StatusOr<ort::OnnxRuntimeSessionConfig> config = ort::ResolveSessionConfig(options);
  if (!config.ok()) return config.status().WithContext("model '" + model_path + "'");
  const auto* sibling = dynamic_cast<const ort::OnnxRuntimeInstance*>(&first);
  if (!config->share_session || sibling == nullptr) return CreateInstance(model_path, options);
  ASSIGN_OR_RETURN(auto instance, ort::OnnxRuntimeInstance::Share(*sibling));
  return std::unique_ptr<ModelInstance>(std::move(instance));
}

}  // namespace harrier
