#include "lifecycle/model_loader.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <future>
#include <map>

#include "core/cpu_quota.h"
#include "lifecycle/warmup.h"
#include "repository/config_autocomplete.h"
#include "repository/config_data_type.h"
#include "repository/config_json.h"
#include "repository/config_validation.h"
#include "repository/file_system.h"

namespace harrier {

namespace {

// The adaptive batching target (docs/scheduling.md).
constexpr std::string_view kTargetP99Parameter = "harrier.batching.target_p99_us";

ModelIO MakeModelIO(const inference::ModelConfig& config) {
  ModelIO io;
  io.max_batch_size = config.max_batch_size();
  for (const auto& in : config.input()) {
    IoSpec spec{in.name(),
                FromConfigType(in.data_type()),
                {in.dims().begin(), in.dims().end()},
                std::nullopt,
                in.optional()};
    if (in.has_reshape())
      spec.reshape = std::vector<int64_t>(in.reshape().shape().begin(), in.reshape().shape().end());
    io.inputs.push_back(std::move(spec));
  }
  for (const auto& out : config.output()) {
    IoSpec spec{out.name(),
                FromConfigType(out.data_type()),
                {out.dims().begin(), out.dims().end()},
                std::nullopt,
                false};
    if (out.has_reshape())
      spec.reshape =
          std::vector<int64_t>(out.reshape().shape().begin(), out.reshape().shape().end());
    io.outputs.push_back(std::move(spec));
  }
  return io;
}

// Triton's label_filename: a text file in the model's directory (the config check keeps it
// there), line i naming class i (a '\r' before the newline dropped), read once at load. A
// missing, unreadable or oversized file fails the load, as a missing one does in Triton.
constexpr uint64_t kMaxLabelFileBytes = uint64_t{16} << 20;

Status LoadClassificationLabels(const inference::ModelConfig& config, const std::string& model_dir,
                                ModelIO* io) {
  for (const auto& out : config.output()) {
    if (out.label_filename().empty()) continue;
    const std::string what =
        "output '" + out.name() + "': label_filename '" + out.label_filename() + "'";
    // The file itself must be in the model's directory, not only its name.
    StatusOr<std::string> resolved = ResolveInside(model_dir, out.label_filename());
    if (!resolved.ok())
      return InvalidArgument(what + ": " + std::string(resolved.status().message()));
    const std::string path = std::move(resolved).value();
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(path, ec);
    if (ec) return InvalidArgument(what + ": " + ec.message());
    if (size > kMaxLabelFileBytes) {
      return InvalidArgument(what + ": " + std::to_string(size) + " bytes, over the " +
                             std::to_string(kMaxLabelFileBytes) + " a labels file may have");
    }
    ASSIGN_OR_RETURN(std::string text, LocalFileSystem().ReadFile(path));
    auto labels = std::make_shared<std::vector<std::string>>();
    for (size_t start = 0; start < text.size();) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string_view line(text.data() + start, end - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      labels->emplace_back(line);
      start = end + 1;
    }
    io->labels[out.name()] = std::move(labels);
  }
  return Status::Ok();
}

// Triton's ONNX graph levels (-1 basic, 0 default = all, 1 basic + extended, 2 none: its ONNX
// Runtime backend's README) to ORT's.
int GraphLevel(const inference::ModelConfig& config) {
  if (!config.has_optimization() || !config.optimization().has_graph()) return -1;
  switch (config.optimization().graph().level()) {
    case -1: return 1;
    case 1: return 2;
    case 2: return 0;  // ORT_DISABLE_ALL (probe 63: it failed the load)
    default: return -1;
  }
}

QueuePolicy MakeQueuePolicy(const inference::ModelQueuePolicy& p) {
  QueuePolicy q;
  q.timeout_action = p.timeout_action() == inference::ModelQueuePolicy::DELAY
                         ? QueuePolicy::TimeoutAction::kDelay
                         : QueuePolicy::TimeoutAction::kReject;
  q.default_timeout_us = p.default_timeout_microseconds();
  q.allow_timeout_override = p.allow_timeout_override();
  q.max_queue_size = p.max_queue_size();
  return q;
}

// The scheduler's policy from the completed config: `dynamic_batching` (absent: one request
// per execution, one FIFO level) and the adaptive target parameter.
StatusOr<BatchingPolicy> MakeBatchingPolicy(const inference::ModelConfig& config) {
  BatchingPolicy policy;
  policy.max_batch_size = config.max_batch_size();
  if (config.has_dynamic_batching()) {
    const inference::ModelDynamicBatching& db = config.dynamic_batching();
    policy.dynamic_batching = true;
    policy.preferred_batch_sizes.assign(db.preferred_batch_size().begin(),
                                        db.preferred_batch_size().end());
    policy.max_queue_delay_us = db.max_queue_delay_microseconds();
    policy.preserve_ordering = db.preserve_ordering();
    policy.priority_levels = db.priority_levels();
    policy.default_priority_level = db.default_priority_level();
    policy.default_queue_policy = MakeQueuePolicy(db.default_queue_policy());
    for (const auto& [level, p] : db.priority_queue_policy())
      policy.priority_queue_policy[level] = MakeQueuePolicy(p);
  }
  auto it = config.parameters().find(std::string(kTargetP99Parameter));
  if (it != config.parameters().end()) {
    const std::string& value = it->second.string_value();
    uint64_t us = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), us);
    if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
      return InvalidArgument("parameter '" + std::string(kTargetP99Parameter) + "' is '" + value +
                             "'; expected a whole number of microseconds");
    }
    policy.target_p99_us = us;
  }
  return policy;
}

}  // namespace

namespace {

// The version's model file: `filename` (checked to stay in the version's directory) under
// <model>/<version>/, which must be a regular file (a symbolic link to one is followed): a FIFO
// or a device would hold the load, and its lifecycle thread, forever.
StatusOr<std::string> ModelFile(const ModelDirectory& dir, int64_t version,
                                const inference::ModelConfig& config, std::string_view fallback) {
  RETURN_IF_ERROR(ValidateModelFilename(config).WithContext(
      dir.config_path.empty() ? dir.path : dir.config_path));
  const std::string filename = config.default_model_filename().empty()
                                   ? std::string(fallback)
                                   : config.default_model_filename();
  std::string path = dir.path + "/" + std::to_string(version) + "/" + filename;
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    return InvalidArgument("'" + path + "' is not a regular file");
  }
  return path;
}

}  // namespace

ModelLoader::ModelLoader(const Options& options)
    : options_(options),
      allowed_cpus_(options.pin_instance_workers ? AllowedCpus() : std::vector<int>{}) {}

StatusOr<ModelLoader::LoadedVersion> ModelLoader::LoadVersion(
    const ModelDirectory& dir, const inference::ModelConfig& base_config, int64_t version,
    std::shared_ptr<TrafficController> traffic, const std::atomic<bool>* unload,
    std::shared_ptr<ModelStats> stats) {
  const BackendRegistry::Choice choice = Choose(dir, base_config, version);
  if (choice.generative)
    return LoadGenerativeVersion(dir, base_config, version, choice, std::move(traffic),
                                 std::move(stats));
  if (!choice.unknown.empty()) {
    return Unimplemented((dir.config_path.empty() ? dir.path : dir.config_path) + ": backend '" +
                         choice.unknown + "' is not one this server has; it runs " +
                         options_.backends->Names() + " models");
  }
  if (!choice.unknown_platform.empty()) {
    return Unimplemented((dir.config_path.empty() ? dir.path : dir.config_path) + ": platform '" +
                         choice.unknown_platform + "' is not supported; this server runs " +
                         options_.backends->Names() + " models (platform '" +
                         std::string(choice.tensor->platform()) + "')");
  }
  Backend& backend = *choice.tensor;
  inference::ModelConfig config = base_config;
  ASSIGN_OR_RETURN(const std::string model_path,
                   ModelFile(dir, version, config, backend.default_model_filename()));

  // Where a load's time goes, for its log line (the reading of the file's signature, the
  // instances' sessions, the warm-up).
  using LoadClock = std::chrono::steady_clock;
  const auto ms_since = [](LoadClock::time_point from) {
    return std::chrono::duration<double, std::milli>(LoadClock::now() - from).count();
  };
  // Instances take their options from the config as written: completion below does not change
  // the instance count, the graph optimization level or the parameters.
  const int instances = static_cast<int>(InstanceCount(config));
  InstanceOptions instance_options;
  // Instances x intra-op threads <= usable cores; a config parameter may say otherwise.
  instance_options.intra_op_threads = std::max(1, options_.usable_cores / instances);
  instance_options.graph_optimization_level = GraphLevel(config);
  instance_options.instance_count = instances;
  for (const auto& [key, value] : config.parameters())
    instance_options.parameters[key] = value.string_value();

  // The first instance reads the model's signature with the file: a separate Inspect would
  // read and parse it again (0.5 of a 1.3 s ResNet-50 load). A backend whose instances do not
  // say is inspected.
  std::vector<std::unique_ptr<ModelInstance>> created;
  LoadClock::time_point phase = LoadClock::now();
  ASSIGN_OR_RETURN(auto first, backend.CreateInstance(model_path, instance_options));
  created.push_back(std::move(first));
  double instances_ms = ms_since(phase);
  phase = LoadClock::now();
  ModelSignature signature;
  if (const ModelSignature* read = created.front()->signature()) {
    signature = *read;
  } else {
    ASSIGN_OR_RETURN(signature, backend.Inspect(model_path));
  }
  const double inspect_ms = ms_since(phase);
  AutoCompleteOptions complete_options;
  complete_options.default_model_filename = std::string(backend.default_model_filename());
  RETURN_IF_ERROR(AutoCompleteConfig(signature, dir.name, backend.name(), backend.platform(),
                                     &config, complete_options)
                      .WithContext(dir.config_path.empty() ? model_path : dir.config_path));
  ModelIO io = MakeModelIO(config);
  RETURN_IF_ERROR(LoadClassificationLabels(config, dir.path, &io));

  phase = LoadClock::now();
  for (int i = 1; i < instances; ++i) {
    ASSIGN_OR_RETURN(auto instance,
                     backend.CreateAnotherInstance(*created.front(), model_path, instance_options));
    created.push_back(std::move(instance));
  }
  instances_ms += ms_since(phase);
  ASSIGN_OR_RETURN(BatchingPolicy policy, MakeBatchingPolicy(config));
  ASSIGN_OR_RETURN(auto warmup, BuildWarmup(config, io, dir.path));

  LoadedModel::Options model_options;
  model_options.name = dir.name;
  model_options.version = version;
  model_options.io = io;
  model_options.config_json = ModelConfigToJson(config);
  model_options.policy = policy;
  model_options.inline_execution_max_us = options_.inline_execution_max_us;
  model_options.traffic = std::move(traffic);
  model_options.stats = std::move(stats);  // the warm-up runs on the instances, uncounted
  if (!allowed_cpus_.empty()) {
    for (int i = 0; i < instances; ++i)
      model_options.worker_cpus.push_back(allowed_cpus_[next_cpu_++ % allowed_cpus_.size()]);
  }
  if (options_.admission != nullptr) {
    AdmissionController::ModelSpec spec;
    spec.name = dir.name;
    spec.instance_count = instances;
    spec.requests_per_run =
        policy.dynamic_batching ? static_cast<int>(std::max<int64_t>(1, policy.max_batch_size)) : 1;
    spec.batching_delay = std::chrono::microseconds(
        policy.dynamic_batching ? static_cast<int64_t>(policy.max_queue_delay_us) : 0);
    spec.parameters = instance_options.parameters;
    ASSIGN_OR_RETURN(model_options.admission, options_.admission->ForModel(spec));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> model,
                   LoadedModel::Create(std::move(model_options), std::move(created)));
  // Warm-up runs on every instance before the version is reported READY.
  LoadedVersion loaded{model, ""};
  phase = LoadClock::now();
  Status warmed =
      RunWarmup(warmup.samples, io, dir.name, model->scheduler(), options_.stopping, unload);
  if (warmed.ok() && !warmup.skipped.empty()) warmed = InvalidArgument(warmup.skipped);
  const double warmup_ms = ms_since(phase);
  if (!warmed.ok()) {
    if (!warmup.implicit) return warmed;
    loaded.warmup_failure = warmed.message();
  }
  spdlog::info(
      "model '{}' version {}: {} instance(s), {} intra-op thread(s) each, max_batch_size {}, {}; "
      "signature read in {:.1f} ms, instances made in {:.1f} ms, warm-up {:.1f} ms",
      dir.name, version, instances, instance_options.intra_op_threads, io.max_batch_size,
      !policy.dynamic_batching ? std::string("one request per execution")
      : policy.target_p99_us > 0
          ? "dynamic batching, adaptive (target " + std::to_string(policy.target_p99_us) + " us)"
          : "dynamic batching, max_queue_delay " + std::to_string(policy.max_queue_delay_us) +
                " us",
      inspect_ms, instances_ms, warmup_ms);
  return loaded;
}

namespace {

// The implicit warm-up of a generator: one greedy token, waited for.
class WarmupSink : public GenerationSink {
 public:
  void OnStart(int, int) override {}
  void OnToken(std::string_view, float) override {}
  void OnEnd(FinishReason reason, const GenerationUsage&, const Status& status) override {
    done.set_value(reason == FinishReason::kError ? status : Status::Ok());
  }
  std::promise<Status> done;
};

}  // namespace

BackendRegistry::Choice ModelLoader::Choose(const ModelDirectory& dir,
                                            const inference::ModelConfig& config,
                                            int64_t version) const {
  return options_.backends->Choose(config, dir.path + "/" + std::to_string(version) + "/",
                                   LocalFileSystem());
}

bool ModelLoader::IsGenerative(const ModelDirectory& dir, const inference::ModelConfig& config,
                               int64_t version) const {
  return Choose(dir, config, version).generative;
}

std::string_view ModelLoader::PlatformFor(const ModelDirectory& dir,
                                          const inference::ModelConfig& config) const {
  const int64_t latest = dir.versions.empty() ? 1 : dir.versions.back();
  const BackendRegistry::Choice choice = Choose(dir, config, latest);
  if (choice.generator != nullptr) return choice.generator->platform();
  // A generator the build lacks is reported as the default backend's until it fails to load.
  if (choice.tensor == nullptr) return options_.backends->default_tensor_backend()->platform();
  return choice.tensor->platform();
}

StatusOr<ModelLoader::LoadedVersion> ModelLoader::LoadGenerativeVersion(
    const ModelDirectory& dir, inference::ModelConfig config, int64_t version,
    const BackendRegistry::Choice& choice, std::shared_ptr<TrafficController> traffic,
    std::shared_ptr<ModelStats> stats) {
  const std::string where = dir.config_path.empty() ? dir.path : dir.config_path;
  if (choice.generator == nullptr) {
    const std::string engine(choice.missing);
    return Unimplemented(where + ": this model generates text (" + engine +
                         "), and this build of the server has no " + engine + " engine");
  }
  GenerativeBackend& backend = *choice.generator;
  RETURN_IF_ERROR(ValidateGenerativeConfig(config, backend.name()).WithContext(where));
  // A generation answers with many responses (tokens): Triton's decoupled models. Clients that
  // read the config to choose streaming (perf_analyzer, tritonclient) see it said.
  config.mutable_model_transaction_policy()->set_decoupled(true);
  WriteOutDefaults(&config);
  if (config.name().empty()) {
    config.set_name(dir.name);
  } else if (config.name() != dir.name) {  // as for tensor models (AutoCompleteConfig)
    return InvalidArgument(where + ": name '" + config.name() +
                           "' in the config does not match the model directory '" + dir.name + "'");
  }
  config.set_backend(std::string(backend.name()));
  config.set_platform(std::string(backend.platform()));
  if (config.default_model_filename().empty())
    config.set_default_model_filename(std::string(backend.default_model_filename()));
  ASSIGN_OR_RETURN(const std::string model_path, ModelFile(dir, version, config, ""));
  std::map<std::string, std::string> parameters;
  for (const auto& [key, value] : config.parameters()) parameters[key] = value.string_value();

  auto engine = backend.Load(model_path, parameters, options_.usable_cores);
  if (!engine.ok()) return engine.status().WithContext(model_path);
  std::shared_ptr<GenerativeModel> generator = std::move(engine).value();

  LoadedModel::Options model_options;
  model_options.name = dir.name;
  model_options.version = version;
  model_options.config_json = ModelConfigToJson(config);
  model_options.traffic = std::move(traffic);
  model_options.stats = std::move(stats);  // the warm-up goes to the engine itself, uncounted
  model_options.generator = generator;
  // Of dynamic_batching only the priority levels mean anything here: the engine batches itself.
  ASSIGN_OR_RETURN(model_options.policy, MakeBatchingPolicy(config));
  if (options_.admission != nullptr) {
    AdmissionController::ModelSpec spec;
    spec.name = dir.name;
    spec.parameters = parameters;
    // Overload protection predicts a newcomer's wait from the runs of a batch scheduler, which a
    // generator has not: its waiting room is bounded by the engine (max_waiting_requests).
    spec.parameters["harrier.overload.protection"] = "off";
    ASSIGN_OR_RETURN(model_options.admission, options_.admission->ForModel(spec));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> model,
                   LoadedModel::Create(std::move(model_options), {}));

  // Warm-up: one greedy token, so that the first request does not pay for the first decode.
  // A failure is logged and the version serves (as for tensor models' implicit warm-up).
  LoadedVersion loaded{model, ""};
  GenerationRequest warm;
  warm.prompt = "Hello";
  warm.max_tokens = 1;
  warm.sampling.temperature = 0;
  auto sink = std::make_shared<WarmupSink>();
  auto finished = sink->done.get_future();
  Status warmed = generator->Generate(std::move(warm), sink);
  if (warmed.ok()) warmed = finished.get();
  if (!warmed.ok()) loaded.warmup_failure = warmed.message();
  spdlog::info("model '{}' version {}: {} (context {} tokens, {} KV cells)", dir.name, version,
               backend.name(), generator->context_size(), generator->Stats().kv_cells_total);
  return loaded;
}

}  // namespace harrier
