#include "lifecycle/model_repository_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <shared_mutex>

#include "core/cpu_quota.h"
#include "lifecycle/loaded_model.h"
#include "observability/model_metrics.h"
#include "repository/config_autocomplete.h"
#include "repository/config_data_type.h"
#include "repository/config_json.h"
#include "repository/model_config_parser.h"
#include "repository/repository_relative_paths.h"
#include "repository/repository_scan.h"
#include "repository/version_policy.h"

namespace harrier {

namespace {

using Clock = std::chrono::steady_clock;

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

// Triton's ONNX graph levels (-1 basic, 0 default = all, 1 basic + extended) to ORT's.
int GraphLevel(const inference::ModelConfig& config) {
  if (!config.has_optimization() || !config.optimization().has_graph()) return -1;
  switch (config.optimization().graph().level()) {
    case -1: return 1;
    case 1: return 2;
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

int InstanceCount(const inference::ModelConfig& config) {
  int n = 0;
  for (const auto& g : config.instance_group()) n += std::max(1, g.count());
  return std::max(1, n);
}

// A warm-up sample: named inputs with their own buffers.
struct WarmupSample {
  std::string name;
  int runs = 1;
  std::vector<Tensor> inputs;
};

// What a version's warm-up runs. The implicit one (no `model_warmup` in the config) is only an
// optimisation, so its failure is a warning; a configured one that fails fails the load, as in
// Triton.
struct Warmup {
  bool implicit = false;
  std::vector<WarmupSample> samples;
};

// Zero-filled bytes are a valid tensor of every type, BYTES included (each element an empty
// string: a zero 4-byte length).
Tensor ZeroTensor(const std::string& name, DataType dtype, Shape shape) {
  int64_t count = ElementCount(shape).value_or(0);
  size_t bytes =
      static_cast<size_t>(count) * (dtype == DataType::kBytes ? 4 : DataTypeByteSize(dtype));
  auto buffer = AllocateTensorBuffer(bytes);
  std::memset(buffer.get(), 0, bytes);
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = buffer.get();
  t.size_bytes = bytes;
  t.owner = std::move(buffer);
  return t;
}

// Shape with free dims set to 1, and the batch dim (when batching) set to `batch`.
Shape ConcreteShape(const ModelIO& io, const std::vector<int64_t>& dims, int64_t batch) {
  Shape shape;
  if (io.max_batch_size > 0) shape.push_back(batch);
  for (int64_t d : dims) shape.push_back(d < 0 ? 1 : d);
  return shape;
}

StatusOr<Warmup> BuildWarmup(const inference::ModelConfig& config, const ModelIO& io,
                             const std::string& model_dir) {
  Warmup warmup;
  std::vector<WarmupSample>& samples = warmup.samples;
  if (config.model_warmup_size() == 0) {
    // Default: one zero-filled run, so the first real request does not pay for lazy set-up.
    warmup.implicit = true;
    WarmupSample s{"default zero-filled run", 1, {}};
    for (const IoSpec& in : io.inputs)
      if (!in.optional)
        s.inputs.push_back(ZeroTensor(in.name, in.dtype, ConcreteShape(io, in.dims, 1)));
    samples.push_back(std::move(s));
    return warmup;
  }
  std::mt19937 rng(12345);
  for (const auto& w : config.model_warmup()) {
    WarmupSample s{w.name(), static_cast<int>(std::max<uint32_t>(1, w.count())), {}};
    const int64_t batch = std::max<uint32_t>(1, w.batch_size());
    for (const auto& [name, in] : w.inputs()) {
      Shape shape;
      if (io.max_batch_size > 0) shape.push_back(batch);
      shape.insert(shape.end(), in.dims().begin(), in.dims().end());
      DataType dtype = FromConfigType(in.data_type());
      Tensor t = ZeroTensor(name, dtype, shape);
      if (in.has_random_data() && dtype != DataType::kBytes) {
        auto* p = const_cast<std::byte*>(t.data);
        for (size_t i = 0; i < t.size_bytes; ++i) p[i] = std::byte(rng() & 0x3f);  // small values
      } else if (in.has_input_data_file()) {
        std::string path = model_dir + "/warmup/" + in.input_data_file();
        auto content = LocalFileSystem().ReadFile(path);
        if (!content.ok()) return content.status().WithContext("warm-up '" + w.name() + "'");
        auto buffer = AllocateTensorBuffer(content->size());
        std::memcpy(buffer.get(), content->data(), content->size());
        t.data = buffer.get();
        t.size_bytes = content->size();
        t.owner = std::move(buffer);
      }
      s.inputs.push_back(std::move(t));
    }
    samples.push_back(std::move(s));
  }
  return warmup;
}

Status RunWarmup(const std::vector<WarmupSample>& samples, const ModelIO& io,
                 std::string_view model_name, ModelScheduler& scheduler) {
  std::vector<std::string> all_outputs;
  for (const auto& o : io.outputs) all_outputs.push_back(o.name);
  for (const WarmupSample& s : samples) {
    // Warm-up inputs pass the same checks as a client's, so a bad model_warmup is reported.
    InferenceRequest check;
    check.inputs = s.inputs;
    std::vector<std::string> outputs;
    RETURN_IF_ERROR(ValidateAndPrepare(io, model_name, &check, &outputs)
                        .WithContext("warm-up sample '" + s.name + "'"));
    for (int i = 0; i < s.runs; ++i) {
      RETURN_IF_ERROR(scheduler
                          .RunOnEachInstance([&](ModelInstance& instance) {
                            std::vector<Tensor> out;
                            return instance.Run(check.inputs, outputs, &out, RunContext{});
                          })
                          .WithContext("warm-up sample '" + s.name + "'"));
    }
  }
  return Status::Ok();
}

class ModelRepositoryManagerImpl : public ModelRepositoryManager {
 public:
  explicit ModelRepositoryManagerImpl(const Options& options)
      : options_(options), client_paths_(options.repository_path) {
    if (options_.usable_cores <= 0) options_.usable_cores = UsableCores();
    if (options_.pin_instance_workers) allowed_cpus_ = AllowedCpus();
  }
  ~ModelRepositoryManagerImpl() override { Shutdown(); }

  void LoadAll() override;
  void Shutdown() override;
  StatusOr<std::shared_ptr<ServableModel>> Get(std::string_view name,
                                               std::optional<int64_t> version) override;
  StatusOr<ModelMetadata> Metadata(std::string_view name, std::optional<int64_t> version) override;
  std::vector<ModelVersionState> Index() const override;
  StatusOr<std::vector<ModelVersionStats>> Stats(std::optional<std::string_view> name,
                                                 std::optional<int64_t> version) const override;
  bool AllReady() const override;
  void RecordUnroutedFailure(StatusCode code) override {
    unrouted_failures_.Add(FailureReasonFor(code));
  }
  void CollectMetrics(TextExposition* out) const override;
  std::vector<DashboardVersion> DashboardVersions() const override;

 private:
  struct VersionEntry {
    ModelState state = ModelState::kLoading;
    std::string reason;
    std::shared_ptr<LoadedModel> model;  // set when READY
    double load_seconds = -1;            // load and warm-up time; negative: never tried
    uint64_t warmup_failures = 0;        // implicit warm-ups that failed (the version serves)
  };
  // A version that loaded: READY, though its implicit warm-up may have failed (why, or empty).
  struct LoadedVersion {
    std::shared_ptr<LoadedModel> model;
    std::string warmup_failure;
  };
  struct ModelEntry {
    std::string platform;
    std::string reason;                        // a failure before any version could load
    std::map<int64_t, VersionEntry> versions;  // ascending
  };

  void LoadModel(const ModelDirectory& dir);
  StatusOr<LoadedVersion> LoadVersion(const ModelDirectory& dir,
                                      const inference::ModelConfig& base_config, int64_t version);
  void SetModel(const std::string& name, ModelEntry entry);
  // REQUIRES: mu_ held (shared or exclusive).
  StatusOr<const ModelEntry*> FindModel(std::string_view name) const;

  Options options_;  // constant after construction
  // Every reason stored below goes through it: reasons reach clients (index, Get()'s errors,
  // the status page) with paths relative to the repository; the log lines keep full paths.
  RepositoryRelativePaths client_paths_;  // constant after construction
  std::vector<int> allowed_cpus_;         // constant after construction; empty unless pinning
  std::atomic<size_t> next_cpu_{0};       // round-robin position for pinned instance workers

  mutable std::shared_mutex mu_;
  std::map<std::string, ModelEntry, std::less<>> models_;  // guarded by mu_
  bool shut_down_ = false;                                 // guarded by mu_

  FailureCounters unrouted_failures_;  // relaxed atomics
};

void ModelRepositoryManagerImpl::LoadAll() {
  auto dirs = ScanRepository(options_.repository_path);
  if (!dirs.ok()) {
    spdlog::error("model repository {}: {}", options_.repository_path, dirs.status().message());
    return;
  }
  if (dirs->empty()) spdlog::warn("model repository {} holds no models", options_.repository_path);
  for (const ModelDirectory& dir : *dirs) {
    ModelEntry loading;
    SetModel(dir.name, loading);
    LoadModel(dir);
  }
}

void ModelRepositoryManagerImpl::SetModel(const std::string& name, ModelEntry entry) {
  std::unique_lock lock(mu_);
  models_[name] = std::move(entry);
}

void ModelRepositoryManagerImpl::LoadModel(const ModelDirectory& dir) {
  ModelEntry entry;
  entry.platform = std::string(options_.backend->platform());
  auto fail = [&](const Status& s) {
    entry.reason = client_paths_.Rewrite(s.message());
    spdlog::error("model '{}' is UNAVAILABLE: {}", dir.name, s.message());
    SetModel(dir.name, std::move(entry));
  };
  if (!dir.error.ok()) return fail(dir.error);

  inference::ModelConfig config;
  if (!dir.config_path.empty()) {
    auto parsed = ReadModelConfigFile(dir.config_path);
    if (!parsed.ok()) return fail(parsed.status());
    config = std::move(parsed).value();
  }
  VersionSelection selection = SelectVersions(config.version_policy(), dir.versions);
  const std::vector<int64_t>& versions = selection.selected;
  const std::vector<int64_t>& missing = selection.missing;
  for (int64_t v : missing) {
    const std::string reason = "version " + std::to_string(v) +
                               " is named by the version policy but has no directory in " +
                               dir.path;
    spdlog::error("model '{}' version {} is UNAVAILABLE: {}", dir.name, v, reason);
    entry.versions[v] = {ModelState::kUnavailable, client_paths_.Rewrite(reason), nullptr};
  }
  if (versions.empty() && missing.empty()) {
    return fail(NotFound("no version directories (numeric names such as '1') in " + dir.path));
  }
  for (int64_t v : versions) {
    const Clock::time_point start = Clock::now();
    auto loaded = LoadVersion(dir, config, v);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (loaded.ok()) {
      const bool warmed = loaded->warmup_failure.empty();
      if (warmed) {
        spdlog::info("model '{}' version {} READY (loaded and warmed up in {:.1f} ms)", dir.name, v,
                     ms);
      } else {
        spdlog::warn(
            "model '{}' version {} READY (loaded in {:.1f} ms), but its default warm-up failed: "
            "{}; its first request may be slower (a model_warmup in config.pbtxt replaces it)",
            dir.name, v, ms, loaded->warmup_failure);
      }
      entry.versions[v] = {ModelState::kReady, "", std::move(loaded->model), ms / 1000.0,
                           warmed ? 0u : 1u};
    } else {
      spdlog::error("model '{}' version {} is UNAVAILABLE: {}", dir.name, v,
                    loaded.status().message());
      entry.versions[v] = {ModelState::kUnavailable,
                           client_paths_.Rewrite(loaded.status().message()), nullptr, ms / 1000.0};
    }
  }
  SetModel(dir.name, std::move(entry));
}

StatusOr<ModelRepositoryManagerImpl::LoadedVersion> ModelRepositoryManagerImpl::LoadVersion(
    const ModelDirectory& dir, const inference::ModelConfig& base_config, int64_t version) {
  Backend& backend = *options_.backend;
  inference::ModelConfig config = base_config;
  const std::string filename = config.default_model_filename().empty()
                                   ? std::string(backend.default_model_filename())
                                   : config.default_model_filename();
  const std::string model_path = dir.path + "/" + std::to_string(version) + "/" + filename;

  ASSIGN_OR_RETURN(ModelSignature signature, backend.Inspect(model_path));
  AutoCompleteOptions complete_options;
  complete_options.default_model_filename = std::string(backend.default_model_filename());
  RETURN_IF_ERROR(AutoCompleteConfig(signature, dir.name, backend.name(), backend.platform(),
                                     &config, complete_options)
                      .WithContext(dir.config_path.empty() ? model_path : dir.config_path));
  ModelIO io = MakeModelIO(config);

  const int instances = InstanceCount(config);
  InstanceOptions instance_options;
  // Instances x intra-op threads <= usable cores; a config parameter may say otherwise.
  instance_options.intra_op_threads = std::max(1, options_.usable_cores / instances);
  instance_options.graph_optimization_level = GraphLevel(config);
  for (const auto& [key, value] : config.parameters())
    instance_options.parameters[key] = value.string_value();

  std::vector<std::unique_ptr<ModelInstance>> created;
  for (int i = 0; i < instances; ++i) {
    ASSIGN_OR_RETURN(auto instance, backend.CreateInstance(model_path, instance_options));
    created.push_back(std::move(instance));
  }
  ASSIGN_OR_RETURN(BatchingPolicy policy, MakeBatchingPolicy(config));
  ASSIGN_OR_RETURN(auto warmup, BuildWarmup(config, io, dir.path));

  LoadedModel::Options model_options;
  model_options.name = dir.name;
  model_options.version = version;
  model_options.io = io;
  model_options.config_json = ModelConfigToJson(config);
  model_options.policy = policy;
  model_options.inline_execution_max_us = options_.inline_execution_max_us;
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
  Status warmed = RunWarmup(warmup.samples, io, dir.name, model->scheduler());
  if (!warmed.ok()) {
    if (!warmup.implicit) return warmed;
    loaded.warmup_failure = warmed.message();
  }
  spdlog::info(
      "model '{}' version {}: {} instance(s), {} intra-op thread(s) each, max_batch_size {}, {}",
      dir.name, version, instances, instance_options.intra_op_threads, io.max_batch_size,
      !policy.dynamic_batching ? std::string("one request per execution")
      : policy.target_p99_us > 0
          ? "dynamic batching, adaptive (target " + std::to_string(policy.target_p99_us) + " us)"
          : "dynamic batching, max_queue_delay " + std::to_string(policy.max_queue_delay_us) +
                " us");
  return loaded;
}

StatusOr<const ModelRepositoryManagerImpl::ModelEntry*> ModelRepositoryManagerImpl::FindModel(
    std::string_view name) const {
  auto it = models_.find(name);
  // Triton's words, which its clients and QA tests match on (the start of the message).
  if (it == models_.end())
    return NotFound("Request for unknown model: '" + std::string(name) + "' is not found");
  return &it->second;
}

StatusOr<std::shared_ptr<ServableModel>> ModelRepositoryManagerImpl::Get(
    std::string_view name, std::optional<int64_t> version) {
  std::shared_lock lock(mu_);
  ASSIGN_OR_RETURN(const ModelEntry* entry, FindModel(name));
  // Built only for an error: this runs on every request. Triton's words first (its clients match
  // on them), Harrier's detail after.
  auto unknown = [name] { return "Request for unknown model: '" + std::string(name) + "'"; };
  if (shut_down_) return Unavailable("the server is shutting down");
  if (version) {
    auto it = entry->versions.find(*version);
    if (it == entry->versions.end())
      return NotFound(unknown() + " version " + std::to_string(*version) + " is not found");
    const VersionEntry& v = it->second;
    if (v.state != ModelState::kReady) {
      return Unavailable(unknown() + " version " + std::to_string(*version) +
                         " is not at ready state: it is " + std::string(ModelStateName(v.state)) +
                         (v.reason.empty() ? "" : ": " + v.reason));
    }
    return std::shared_ptr<ServableModel>(v.model);
  }
  for (auto it = entry->versions.rbegin(); it != entry->versions.rend(); ++it)
    if (it->second.state == ModelState::kReady)
      return std::shared_ptr<ServableModel>(it->second.model);
  std::string reason = entry->reason;
  if (reason.empty() && !entry->versions.empty()) reason = entry->versions.rbegin()->second.reason;
  if (reason.empty()) reason = "it is still loading";
  return Unavailable(unknown() + " has no available versions: " + reason);
}

StatusOr<ModelMetadata> ModelRepositoryManagerImpl::Metadata(std::string_view name,
                                                             std::optional<int64_t> version) {
  ASSIGN_OR_RETURN(std::shared_ptr<ServableModel> servable, Get(name, version));
  auto* loaded = static_cast<LoadedModel*>(servable.get());
  ModelMetadata md;
  md.name = loaded->name();
  {
    std::shared_lock lock(mu_);
    ASSIGN_OR_RETURN(const ModelEntry* entry, FindModel(name));
    md.platform = entry->platform;
    for (const auto& [v, e] : entry->versions)
      if (e.state == ModelState::kReady) md.versions.push_back(std::to_string(v));
  }
  const ModelIO& io = loaded->io();
  for (const IoSpec& s : io.inputs) md.inputs.push_back({s.name, s.dtype, io.ClientShape(s)});
  for (const IoSpec& s : io.outputs) md.outputs.push_back({s.name, s.dtype, io.ClientShape(s)});
  return md;
}

std::vector<ModelVersionState> ModelRepositoryManagerImpl::Index() const {
  std::shared_lock lock(mu_);
  std::vector<ModelVersionState> rows;
  for (const auto& [name, entry] : models_) {
    if (entry.versions.empty()) {
      rows.push_back({name, 0,
                      entry.reason.empty() ? ModelState::kLoading : ModelState::kUnavailable,
                      entry.reason});
      continue;
    }
    for (const auto& [v, e] : entry.versions) rows.push_back({name, v, e.state, e.reason});
  }
  return rows;
}

StatusOr<std::vector<ModelVersionStats>> ModelRepositoryManagerImpl::Stats(
    std::optional<std::string_view> name, std::optional<int64_t> version) const {
  std::shared_lock lock(mu_);
  std::vector<ModelVersionStats> out;
  auto add = [&](const ModelEntry& entry) {
    for (const auto& [v, e] : entry.versions) {
      if (e.state != ModelState::kReady || (version && *version != v)) continue;
      ModelVersionStats s;
      e.model->SnapshotStats(&s);
      out.push_back(std::move(s));
    }
  };
  if (name) {
    ASSIGN_OR_RETURN(const ModelEntry* entry, FindModel(*name));
    if (version && !entry->versions.contains(*version))
      return NotFound("Request for unknown model: '" + std::string(*name) + "' version " +
                      std::to_string(*version) + " is not found");
    add(*entry);
    if (out.empty())
      return Unavailable("Request for unknown model: '" + std::string(*name) +
                         "' has no available versions");
  } else {
    for (const auto& [n, entry] : models_) add(entry);
  }
  return out;
}

bool ModelRepositoryManagerImpl::AllReady() const {
  std::shared_lock lock(mu_);
  if (shut_down_) return false;
  for (const auto& [name, entry] : models_) {
    if (entry.versions.empty()) return false;
    for (const auto& [v, e] : entry.versions)
      if (e.state != ModelState::kReady) return false;
  }
  return true;
}

void ModelRepositoryManagerImpl::CollectMetrics(TextExposition* out) const {
  DeclareModelMetricFamilies(out);
  // Pinned under the lock, read outside it: a scrape does not hold up Get() on the request path
  // longer than a map walk.
  struct Version {
    ModelVersionState state;
    double load_seconds;
    uint64_t warmup_failures;
    std::shared_ptr<LoadedModel> model;
  };
  std::vector<Version> versions;
  {
    std::shared_lock lock(mu_);
    for (const auto& [name, entry] : models_) {
      if (entry.versions.empty()) {
        versions.push_back(
            {{name, 0, entry.reason.empty() ? ModelState::kLoading : ModelState::kUnavailable, ""},
             -1,
             0,
             nullptr});
      }
      for (const auto& [v, e] : entry.versions)
        versions.push_back({{name, v, e.state, ""}, e.load_seconds, e.warmup_failures, e.model});
    }
  }
  for (const Version& v : versions) {
    if (v.model == nullptr) continue;
    ModelVersionStats stats;
    v.model->SnapshotStats(&stats);
    ModelVersionSample sample;
    sample.stats = &stats;
    sample.metrics = &v.model->metrics();
    sample.queue_depth = v.model->scheduler().queue_depth();
    AppendModelVersionMetrics(sample, out);
  }
  AppendUnroutedFailures(unrouted_failures_, out);
  for (const Version& v : versions)
    AppendModelState(v.state, v.load_seconds, v.warmup_failures, out);
}

std::vector<DashboardVersion> ModelRepositoryManagerImpl::DashboardVersions() const {
  // As in CollectMetrics(): pinned under the lock, read outside it.
  std::vector<std::pair<DashboardVersion, std::shared_ptr<LoadedModel>>> pinned;
  {
    std::shared_lock lock(mu_);
    for (const auto& [name, entry] : models_) {
      if (entry.versions.empty()) {
        DashboardVersion row;
        row.state = {name, 0,
                     entry.reason.empty() ? ModelState::kLoading : ModelState::kUnavailable,
                     entry.reason};
        pinned.emplace_back(std::move(row), nullptr);
      }
      for (const auto& [v, e] : entry.versions) {
        DashboardVersion row;
        row.state = {name, v, e.state, e.reason};
        pinned.emplace_back(std::move(row), e.model);
      }
    }
  }
  std::vector<DashboardVersion> out;
  out.reserve(pinned.size());
  for (auto& [row, model] : pinned) {
    if (model != nullptr) {
      ModelVersionStats stats;
      model->SnapshotStats(&stats);
      const ModelMetrics& m = model->metrics();
      row.loaded = true;
      row.success_count = stats.success.count;
      for (size_t r = 0; r < kFailureReasonCount; ++r)
        row.failure_count += m.failures.Read(static_cast<FailureReason>(r));
      row.queue_depth = model->scheduler().queue_depth();
      row.in_flight = m.in_flight.load(std::memory_order_relaxed);
      row.request_duration = m.request_duration.Snapshot();
    }
    out.push_back(std::move(row));
  }
  return out;
}

void ModelRepositoryManagerImpl::Shutdown() {
  std::vector<std::shared_ptr<LoadedModel>> loaded;
  {
    std::unique_lock lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    for (auto& [name, entry] : models_)
      for (auto& [v, e] : entry.versions)
        if (e.model) loaded.push_back(e.model);
  }
  // Outside the lock: draining runs the queued requests' callbacks.
  for (auto& m : loaded) m->Shutdown();
}

}  // namespace

StatusOr<std::unique_ptr<ModelRepositoryManager>> ModelRepositoryManager::Create(
    const Options& options) {
  if (options.backend == nullptr) return InvalidArgument("ModelRepositoryManager needs a backend");
  auto type = LocalFileSystem().GetFileType(options.repository_path);
  if (!type.ok()) return type.status();
  if (*type == FileType::kNotFound)
    return NotFound("model repository '" + options.repository_path + "' does not exist");
  if (*type != FileType::kDirectory)
    return InvalidArgument("model repository '" + options.repository_path + "' is not a directory");
  if (!LocalFileSystem().ListDirectory(options.repository_path).ok())
    return InvalidArgument("model repository '" + options.repository_path + "' cannot be read");
  return std::unique_ptr<ModelRepositoryManager>(new ModelRepositoryManagerImpl(options));
}

}  // namespace harrier
