#include "lifecycle/model_repository_manager.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>

#include "core/cpu_quota.h"
#include "core/thread_spawner.h"
#include "core/utf8.h"
#include "lifecycle/forced_version_model.h"
#include "lifecycle/freed_memory.h"
#include "lifecycle/lifecycle_executor.h"
#include "lifecycle/loaded_model.h"
#include "lifecycle/model_loader.h"
#include "lifecycle/reconcile_plan.h"
#include "lifecycle/shadowed_model.h"
#include "observability/model_metrics.h"
#include "repository/config_json.h"
#include "repository/config_validation.h"
#include "repository/model_config_parser.h"
#include "repository/model_fingerprint.h"
#include "repository/override_directory.h"
#include "repository/repository_relative_paths.h"
#include "repository/repository_scan.h"
#include "repository/version_policy.h"
#include "routing/traffic_controller.h"
#include "routing/traffic_policy.h"

namespace harrier {

namespace {

using Clock = std::chrono::steady_clock;

// The key the repository polls' scans (and, outside poll mode, the periodic return of kept
// memory) are posted under (lifecycle_executor.h): one scan at a time, so that the per-model
// work they post is queued in scan order. No model is named so: a model's name is a directory
// name, which holds no '/'.
constexpr std::string_view kPollKey = "/poll";

// Runs fn(0) .. fn(count - 1) on `threads` threads: the caller's and threads - 1 more that it
// starts (and joins before returning), each taking the next index. At the caller's priority:
// for the loads at start, before anything serves (the lifecycle threads lower theirs).
void RunOnThreads(int threads, size_t count, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < count; i = next++) fn(i);
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < std::min(static_cast<size_t>(std::max(threads, 1)), count); ++t) {
    helpers.emplace_back([&work] {
      pthread_setname_np(pthread_self(), "model-load");
      work();
    });
  }
  work();
  for (std::thread& t : helpers) t.join();
}

// A traffic.json larger than this is not read (a policy is a few hundred bytes; PUT's body has
// --max-body-bytes): a stray large file costs one stat per poll and one log line.
constexpr uint64_t kMaxTrafficFileBytes = 1 << 20;

// Whether a regular file is at a path, with its size and modification time.
struct FileStamp {
  bool present = false;
  uint64_t size = 0;
  int64_t modified_ns = 0;
  friend bool operator==(const FileStamp&, const FileStamp&) = default;
};

FileStamp StampOf(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::is_regular_file(status)) return {};
  FileStamp stamp;
  stamp.present = true;
  stamp.size = fs::file_size(path, ec);
  if (ec) stamp.size = 0;
  const fs::file_time_type modified = fs::last_write_time(path, ec);
  if (!ec) {
    stamp.modified_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(modified.time_since_epoch()).count();
  }
  return stamp;
}

class ModelRepositoryManagerImpl : public ModelRepositoryManager {
 public:
  explicit ModelRepositoryManagerImpl(const Options& options)
      : options_(WithCores(options)),
        client_paths_(options.repository_path),
        loader_(LoaderOptions(options_, &stopping_)),
        freed_memory_(options_.load_retain_bytes) {
    // Before the lifecycle threads lower their priority: the threads loads start are created at
    // this (normal) one.
    InitThreadSpawner();
  }
  ~ModelRepositoryManagerImpl() override { Shutdown(); }

  void LoadAll() override;
  void BeginShutdown() override;
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
  void LoadModel(std::string_view name, ModelLoadOptions options,
                 std::function<void(Status)> done) override;
  void UnloadModel(std::string_view name, std::function<void(Status)> done) override;
  void PollNow() override;
  StatusOr<std::shared_ptr<ServableModel>> Route(std::string_view name,
                                                 std::optional<int64_t> version,
                                                 const RequestHeaders& headers) override;
  StatusOr<std::string> TrafficJson(std::string_view name) override;
  Status SetTrafficPolicy(std::string_view name, std::string_view json) override;
  Status ClearTrafficPolicy(std::string_view name) override;
  void CollectMetrics(TextExposition* out) const override;
  std::vector<DashboardVersion> DashboardVersions() const override;

 private:
  struct VersionEntry {
    ModelState state = ModelState::kLoading;
    std::string reason;
    std::shared_ptr<LoadedModel> model;  // set when READY (and while UNLOADING)
    double load_seconds = -1;            // load and warm-up time; negative: never tried
    uint64_t warmup_failures = 0;        // implicit warm-ups that failed (the version serves)
    uint64_t fingerprint = 0;            // ModelFingerprint() of what it was loaded from
    // Loaded from a load request's file overrides: the directory they were written to, removed
    // once no version holds it (after the version is retired). Null: from the repository.
    std::shared_ptr<const OverrideDirectory> files = nullptr;
    // READY: the fingerprint of files it failed to reload from (a poll does not retry them),
    // and why, which the index shows beside READY until the files change.
    uint64_t failed_reload_fingerprint = 0;
    std::string failed_reload_reason = {};
  };
  struct TrafficFile {
    // The content last applied ("" when none): a poll applies a changed file; the API's policy
    // stands until the file changes.
    std::string content;
    // What the file looked like when last read (size, modification time): a poll reads it
    // again only when that changes, or when `waits` and the READY versions are no longer
    // `ready`.
    FileStamp stamp;
    std::vector<int64_t> ready;
    // Its policy is not in force because of the versions: it named one that did not serve, or
    // it was dropped when one left. Tried again when the versions change.
    bool waits = false;
    // The policy in force came from the file (not from PUT .../traffic).
    bool in_force = false;
  };
  struct ModelEntry {
    std::string platform;
    std::string reason;                        // a failure before any version could load
    std::map<int64_t, VersionEntry> versions;  // ascending
    // Unloaded on purpose (UnloadModel(), or not named at start in explicit mode): it does not
    // count against the server's readiness, and a poll leaves it alone.
    bool unloaded = false;
    // The model's traffic controller: made with the entry's first load, kept for the model's
    // life (its versions hold it too).
    std::shared_ptr<TrafficController> traffic;
    // What is known of <model>/traffic.json (ApplyTraffic); reset to nothing by an unload.
    TrafficFile traffic_file;
    // The last failure of the model as a whole (its directory, its config), logged once: a
    // poll that meets it again says nothing until it changes or clears.
    std::string last_failure;
  };

  static Options WithCores(Options options) {
    if (options.usable_cores <= 0) options.usable_cores = UsableCores();
    return options;
  }
  static ModelLoader::Options LoaderOptions(const Options& options,
                                            const std::atomic<bool>* stopping) {
    ModelLoader::Options o;
    o.stopping = stopping;
    o.backends = options.backends;
    o.usable_cores = options.usable_cores;
    o.admission = options.admission;
    o.pin_instance_workers = options.pin_instance_workers;
    o.inline_execution_max_us = options.inline_execution_max_us;
    return o;
  }

  // Brings model `dir` to what its directory (or `config_override`) says, availability first:
  // (`files`: `dir` is that directory of file overrides, which the versions loaded hold.)
  // the versions to (re)load are loaded and warmed while the serving ones keep serving, then
  // swapped in, then the replaced ones are retired. Only versions whose fingerprint changed are
  // reloaded, unless `force`. A version that fails to load leaves a serving version of the same
  // number serving. Returns the first failure (the model's state says the rest). On a lifecycle
  // thread under the model's key, or at start in LoadAll(): never two at once for one model
  // (what serves is read at the start and swapped at the end).
  Status Reconcile(const ModelDirectory& dir, bool force,
                   const std::optional<inference::ModelConfig>& config_override,
                   const std::shared_ptr<const OverrideDirectory>& files);
  // A load with no overrides: joins the one queued for `name`, if any, or queues one.
  void LoadPlain(std::string name, std::function<void(Status)> done);
  // About how long the model's queued tasks take, in seconds, from its versions' load times.
  int64_t QueuedLoadsSeconds(std::string_view name) const;
  // Any other task of the model's (an unload, a load with overrides): queued behind the plain
  // load waiting to start, which later plain loads then no longer join. Post()'s result.
  bool PostAfterPlainLoads(const std::string& name, std::function<void()> task,
                           std::function<void()> dropped);
  // A load from the model's repository directory (scanned now), with `override` if given.
  Status LoadFromRepository(const std::string& name,
                            const std::optional<inference::ModelConfig>& override);
  // A load with file overrides: writes them to a directory of their own and loads the model
  // from it with `config`. The directory is removed again unless a version serves from it.
  Status LoadFromOverrides(const std::string& name, const inference::ModelConfig& config,
                           const std::vector<ModelFileOverride>& files);
  // Out of rotation already: waits (up to unload_timeout) for the requests holding handles,
  // then shuts each down, which finishes what is queued, and frees it; then hands the freed
  // memory to FreedMemory as an unload's (`unload`) or as a reload's.
  void Retire(std::vector<std::shared_ptr<LoadedModel>> models, bool unload);
  // A load of `name` begins: the flag UnloadModel sets, registered until LoadEnds.
  std::shared_ptr<std::atomic<bool>> LoadStarts(const std::string& name);
  void LoadEnds(const std::string& name, const std::shared_ptr<std::atomic<bool>>& flag);
  // A serving version whose files are back to what it was loaded from no longer carries the
  // reload that failed from other files.
  void ForgetRevertedReloads(const std::string& name, const std::map<int64_t, uint64_t>& files);
  // Takes every version of `name` out of rotation (UNLOADING), retires them, marks them
  // UNAVAILABLE "unloaded". `forget`: remove the model from the index too (gone from the
  // repository). `done` (may be empty) is called once the versions are out of rotation.
  void Unload(const std::string& name, bool forget, const std::function<void(Status)>& done);
  // One scan of the repository in poll mode, under kPollKey: posts each model's part under its
  // key — PollModel() for each model directory (new models load, changed versions reload,
  // removed versions unload), PollRemoved() for each model no longer in the repository.
  void Poll();
  void PollModel(const ModelDirectory& dir);
  void PollRemoved(const std::string& name);
  void SetModel(const std::string& name, ModelEntry entry);
  // Whether a version of `entry` serves from a load request's file overrides: a poll leaves
  // such a model alone (only a load or an unload replaces it). REQUIRES: mu_ held.
  static bool FromOverrides(const ModelEntry& entry) {
    return std::any_of(entry.versions.begin(), entry.versions.end(),
                       [](const auto& v) { return v.second.files != nullptr; });
  }
  Status ModelControlAllowed() const;
  // The model's controller, made if it has none yet. Under mu_, from any thread.
  std::shared_ptr<TrafficController> TrafficOf(const std::string& name);
  // The READY version numbers of `name`, ascending.
  std::vector<int64_t> ReadyVersions(std::string_view name) const;
  // The READY version numbers among `versions`, ascending. REQUIRES: mu_ held, or `versions`
  // not yet published.
  static std::vector<int64_t> ReadyIn(const std::map<int64_t, VersionEntry>& versions) {
    std::vector<int64_t> ready;
    for (const auto& [v, e] : versions)
      if (e.state == ModelState::kReady) ready.push_back(v);
    return ready;
  }
  // After the versions of `name` changed: the policy follows them (dropped, and logged, when a
  // version it names no longer serves), and a changed traffic.json is applied.
  void ApplyTraffic(const ModelDirectory& dir);
  // REQUIRES: mu_ held (shared or exclusive).
  StatusOr<const ModelEntry*> FindModel(std::string_view name) const;
  // Get()'s lookup. With `traffic` set and the model under an active traffic policy: sets
  // `*traffic` and returns null instead (the caller routes). REQUIRES: mu_ held.
  StatusOr<std::shared_ptr<ServableModel>> GetLocked(
      std::string_view name, std::optional<int64_t> version,
      std::shared_ptr<TrafficController>* traffic) const;

  const Options options_;
  // Every reason stored below goes through it: reasons reach clients (index, Get()'s errors,
  // the status page) with paths relative to the repository; the log lines keep full paths.
  const RepositoryRelativePaths client_paths_;
  // Set by BeginShutdown(): a configured warm-up in progress stops between runs.
  std::atomic<bool> stopping_{false};
  // A plain load (no config or file overrides) of each model, by name, from when it is queued
  // until it starts: a plain load of the same model asked meanwhile joins it, since its reload
  // reads the files after every one of them was asked (probe 35: 100 queued loads of unchanged
  // files were 100 reloads, and an unload asked after them answered 40 s later).
  struct QueuedLoad {
    std::vector<std::function<void(Status)>> waiters;  // guarded by queued_loads_mu_ while queued
  };
  std::mutex queued_loads_mu_;
  std::map<std::string, std::shared_ptr<QueuedLoad>, std::less<>> queued_loads_;
  // The load of each model under way, by name: set when an unload of it is asked for.
  std::mutex unload_asked_mu_;
  std::map<std::string, std::shared_ptr<std::atomic<bool>>, std::less<>> unload_asked_;
  ModelLoader loader_;        // thread-safe
  FreedMemory freed_memory_;  // thread-safe

  mutable std::shared_mutex mu_;
  std::map<std::string, ModelEntry, std::less<>> models_;  // guarded by mu_
  bool shut_down_ = false;                                 // guarded by mu_

  FailureCounters unrouted_failures_;  // relaxed atomics
  // Loads, unloads and polls, each model's in order (lifecycle_executor.h): started by
  // LoadAll(), stopped by Shutdown(). Last: destroyed (stopped) first.
  LifecycleExecutor lifecycle_;
};

void ModelRepositoryManagerImpl::LoadAll() {
  auto dirs = ScanRepository(options_.repository_path);
  if (!dirs.ok()) {
    spdlog::error("model repository {}: {}", options_.repository_path, dirs.status().message());
  } else {
    if (dirs->empty())
      spdlog::warn("model repository {} holds no models", options_.repository_path);
    const bool explicit_mode = options_.control_mode == ModelControlMode::kExplicit;
    auto named = [&](const std::string& name) {
      for (const std::string& n : options_.startup_models)
        if (n == "*" || n == name) return true;
      return false;
    };
    std::vector<const ModelDirectory*> to_load;
    for (const ModelDirectory& dir : *dirs) {
      ModelEntry entry;
      if (explicit_mode && !named(dir.name)) {
        entry.platform = std::string(loader_.PlatformFor(dir, inference::ModelConfig()));
        entry.reason = "unloaded";
        entry.unloaded = true;
        SetModel(dir.name, std::move(entry));
        continue;
      }
      SetModel(dir.name, std::move(entry));
      to_load.push_back(&dir);
    }
    // --model-load-thread-count models at once, each by one thread; with one, in name order on
    // this thread.
    // A stop begun meanwhile (a signal during the start) skips the loads not begun yet.
    RunOnThreads(options_.load_thread_count, to_load.size(), [&](size_t i) {
      if (stopping_.load(std::memory_order_relaxed)) return;
      (void)Reconcile(*to_load[i], true, std::nullopt, nullptr);
    });
    if (explicit_mode) {
      for (const std::string& n : options_.startup_models) {
        std::shared_lock lock(mu_);
        if (n != "*" && !models_.contains(n))
          spdlog::error("--load-model {}: no such model in the repository", n);
      }
    }
  }
  LifecycleExecutor::Options executor;
  executor.threads = options_.load_thread_count;
  // The periodic task runs once the threads have been idle for its interval: a poll in poll
  // mode, else only the return of memory that loads kept (freed_memory.h). A poll returns it
  // first: nothing has loaded for an interval by then.
  if (options_.control_mode == ModelControlMode::kPoll) {
    executor.periodic = [this] {
      freed_memory_.Settle();
      Poll();
    };
    executor.interval = options_.poll_interval;
  } else {
    executor.periodic = [this] { freed_memory_.Settle(); };
    executor.interval = FreedMemory::kSettleAfter;
  }
  executor.periodic_key = std::string(kPollKey);
  lifecycle_.Start(std::move(executor));
}

void ModelRepositoryManagerImpl::SetModel(const std::string& name, ModelEntry entry) {
  std::unique_lock lock(mu_);
  models_[name] = std::move(entry);
}

Status ModelRepositoryManagerImpl::Reconcile(
    const ModelDirectory& dir, bool force,
    const std::optional<inference::ModelConfig>& config_override,
    const std::shared_ptr<const OverrideDirectory>& files) {
  // What serves now (pinned), so that it can keep serving through the load.
  // And what failed to load before, from which files: a poll does not retry those until they
  // change.
  std::map<int64_t, VersionEntry> serving;
  std::map<int64_t, VersionEntry> failed_before;
  {
    std::shared_lock lock(mu_);
    auto it = models_.find(dir.name);
    if (it != models_.end()) {
      for (const auto& [v, e] : it->second.versions) {
        if (e.state == ModelState::kReady) serving[v] = e;
        if (e.state == ModelState::kUnavailable && e.fingerprint != 0) failed_before[v] = e;
      }
    }
  }
  // A failure before any version: with versions serving, they go on serving. Logged once while
  // a poll keeps meeting it (a symbolic-link loop, a broken config.pbtxt).
  const bool polled = !force && !config_override;
  auto fail = [&](const Status& s) {
    const std::string reason = client_paths_.Rewrite(s.message());
    bool repeated = false;
    {
      std::shared_lock lock(mu_);
      auto it = models_.find(dir.name);
      repeated = polled && it != models_.end() && it->second.last_failure == reason;
    }
    if (!repeated) {
      spdlog::error("model '{}'{}: {}", dir.name,
                    serving.empty() ? " is UNAVAILABLE"
                                    : " was not reloaded (its serving "
                                      "versions go on serving)",
                    s.message());
    }
    if (serving.empty()) {
      {
        // An unloaded model stays unloaded: its rows, its traffic figures, and the server's
        // readiness (which unloaded models do not count against) as they were. Replaced by a
        // failed entry, one refused load of a model nobody serves made the server unready
        // until someone unloaded it again (probe 28, F4).
        std::unique_lock lock(mu_);
        auto it = models_.find(dir.name);
        if (it != models_.end() && it->second.unloaded) {
          it->second.last_failure = reason;
          return s;
        }
      }
      ModelEntry entry;
      entry.platform = std::string(loader_.PlatformFor(dir, inference::ModelConfig()));
      entry.reason = reason;
      entry.last_failure = reason;
      SetModel(dir.name, std::move(entry));
    } else if (!config_override) {
      // Beside READY in the index until the repository's content loads (Index). A load
      // refused for its own config override changed nothing in the repository: its request's
      // answer says why, and the index does not (probe 33).
      std::unique_lock lock(mu_);
      models_[dir.name].last_failure = reason;
    }
    return s;
  };
  if (!dir.error.ok()) return fail(dir.error);
  inference::ModelConfig config;
  if (config_override) {
    config = *config_override;
  } else if (!dir.config_path.empty()) {
    auto parsed = ReadModelConfigFile(dir.config_path);
    if (!parsed.ok()) return fail(parsed.status());
    config = std::move(parsed).value();
  }
  // The policy's own mistakes first, in its own words (a specific policy listing nothing read
  // as "no version directories", and -1 as a version without a directory; probe 29).
  if (Status policy = ValidateVersionPolicy(config.version_policy()); !policy.ok()) {
    return fail(policy.WithContext(config_override ? "config override" : dir.config_path));
  }
  const VersionSelection selection = SelectVersions(config.version_policy(), dir.versions);
  if (selection.selected.empty() && selection.missing.empty())
    return fail(NotFound("no version directories (numeric names such as '1') in " + dir.path));
  if (selection.selected.empty()) {
    // A specific policy that names only versions without a directory: nothing to load, and
    // without this the model stayed LOADING for good, with no word in the log (fuzz model_load).
    auto list = [](const std::vector<int64_t>& versions) {
      std::string out;
      for (int64_t v : versions) out += (out.empty() ? "" : ", ") + std::to_string(v);
      return out.empty() ? std::string("none") : out;
    };
    std::vector<int64_t> present = dir.versions;
    std::sort(present.begin(), present.end());
    present.erase(std::unique(present.begin(), present.end()), present.end());
    const std::string what = "the version policy names version(s) " + list(selection.missing) +
                             ", none of which has a directory in " + dir.path +
                             " (the versions there: " + list(present) + ")";
    // An override's policy is the request's mistake (400); the repository's, a missing version.
    return fail(config_override ? InvalidArgument(what) : NotFound(what));
  }

  // Which versions to load, which to retire (reconcile_plan.h).
  ReconcileInputs plan_inputs;
  for (const auto& [v, e] : serving) plan_inputs.serving[v] = e.fingerprint;
  for (const auto& [v, e] : failed_before) plan_inputs.failed_before[v] = e.fingerprint;
  for (const auto& [v, e] : serving)
    if (e.failed_reload_fingerprint != 0)
      plan_inputs.failed_reload[v] = e.failed_reload_fingerprint;
  plan_inputs.selected = selection.selected;
  for (int64_t v : selection.selected) {
    auto fp = ModelFingerprint(LocalFileSystem(), dir, v);
    plan_inputs.fingerprints[v] = fp.ok() ? *fp : 0;
  }
  plan_inputs.force = force || config_override.has_value();
  const ReconcilePlan plan = PlanReconcile(plan_inputs);
  const std::map<int64_t, uint64_t>& fingerprints = plan_inputs.fingerprints;
  const std::vector<int64_t>& to_load = plan.to_load;
  {
    std::unique_lock lock(mu_);
    if (auto it = models_.find(dir.name); it != models_.end()) it->second.last_failure.clear();
  }
  if (plan.nothing_to_do()) {  // nothing changed but, maybe, traffic.json
    ForgetRevertedReloads(dir.name, fingerprints);
    ApplyTraffic(dir);
    return Status::Ok();
  }

  const std::shared_ptr<TrafficController> traffic = TrafficOf(dir.name);
  // New version numbers show as LOADING meanwhile; a reloading one stays READY.
  {
    std::unique_lock lock(mu_);
    ModelEntry& entry = models_[dir.name];
    entry.platform = std::string(loader_.PlatformFor(dir, config));
    entry.reason.clear();
    entry.unloaded = false;
    for (int64_t v : to_load)
      if (!serving.contains(v)) entry.versions[v] = VersionEntry{};
  }

  std::map<int64_t, VersionEntry> loaded;
  std::map<int64_t, uint64_t> failed_reloads;  // serving version -> the files it failed from
  std::map<int64_t, std::string> failed_reload_reasons;  // -> why
  Status first_failure = Status::Ok();
  // The loader names the config in its errors: a config override's are the request's
  // `parameters.config`, not the repository's config.pbtxt.
  ModelDirectory load_dir = dir;
  if (config_override) load_dir.config_path = "parameters.config";
  // An unload asked for meanwhile stops a configured warm-up between runs: it would otherwise
  // wait behind this load (one model's tasks run in order), however long the warm-up.
  const std::shared_ptr<std::atomic<bool>> unload_asked = LoadStarts(dir.name);
  for (int64_t v : to_load) {
    const Clock::time_point start = Clock::now();
    // A reload of a serving version counts on into its statistics (LoadedModel::Options::stats).
    std::shared_ptr<ModelStats> stats;
    if (auto it = serving.find(v); it != serving.end() && it->second.model != nullptr)
      stats = it->second.model->stats();
    auto result = loader_.LoadVersion(load_dir, config, v, traffic, unload_asked.get(), stats);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (result.ok()) {
      const bool warmed = result->warmup_failure.empty();
      if (warmed) {
        spdlog::info("model '{}' version {} READY (loaded and warmed up in {:.1f} ms)", dir.name, v,
                     ms);
      } else {
        spdlog::warn(
            "model '{}' version {} READY (loaded in {:.1f} ms), but its default warm-up failed: "
            "{}; its first request may be slower (a model_warmup in config.pbtxt replaces it)",
            dir.name, v, ms, result->warmup_failure);
      }
      loaded[v] = {
          ModelState::kReady, "",   std::move(result->model), ms / 1000.0, warmed ? 0u : 1u,
          fingerprints.at(v), files};
      continue;
    }
    if (first_failure.ok()) first_failure = result.status();
    if (serving.contains(v)) {
      spdlog::error("model '{}' version {} failed to reload: {}; the loaded one goes on serving",
                    dir.name, v, result.status().message());
      failed_reloads[v] = fingerprints.at(v);
      // Shown in the index for the repository's files; a config override's failure is its
      // request's answer.
      if (!config_override)
        failed_reload_reasons[v] = client_paths_.Rewrite(result.status().message());
      continue;
    }
    spdlog::error("model '{}' version {} is UNAVAILABLE: {}", dir.name, v,
                  result.status().message());
    loaded[v] = {ModelState::kUnavailable,
                 client_paths_.Rewrite(result.status().message()),
                 nullptr,
                 ms / 1000.0,
                 0,
                 fingerprints.at(v),
                 nullptr};
  }
  LoadEnds(dir.name, unload_asked);
  // A load leaves ONNX Runtime's temporaries freed in glibc's arenas (the parsed model, the
  // initializers before optimization: about twice a model's size); they stay for the next load
  // up to a budget, then go back to the system (freed_memory.h, docs/model-lifecycle.md).
  if (!to_load.empty()) freed_memory_.AfterLoad();

  // The swap: one exclusive section; what it replaces is retired after it.
  std::vector<std::shared_ptr<LoadedModel>> replaced;
  // A version whose directory was removed while it loaded is not swapped in: the repository
  // no longer has it, and what serves goes on serving. Swapped in, it retired the version it
  // replaced, and the next poll loaded that one again (probe 35).
  if (!files) {
    std::vector<std::shared_ptr<LoadedModel>> vanished;
    for (auto it = loaded.begin(); it != loaded.end();) {
      std::error_code error;
      if (std::filesystem::is_directory(std::filesystem::path(dir.path) / std::to_string(it->first),
                                        error)) {
        ++it;
        continue;
      }
      spdlog::warn("model '{}' version {}: its directory was removed while it loaded; not served",
                   dir.name, it->first);
      const std::string why =
          "version " + std::to_string(it->first) + "'s directory was removed while it loaded";
      if (first_failure.ok()) first_failure = NotFound(why);
      if (it->second.model) vanished.push_back(std::move(it->second.model));
      if (serving.empty()) {
        // Nothing serves: an UNAVAILABLE row with the reason. (It stayed LOADING for good in
        // explicit mode, its load answered 200; probe 37.)
        it->second.state = ModelState::kUnavailable;
        it->second.reason = why;
        it->second.fingerprint = 0;  // tried again when its directory is back
        ++it;
      } else {
        it = loaded.erase(it);  // what serves goes on serving, and the index shows it
      }
    }
    Retire(std::move(vanished), /*unload=*/false);  // never served: nothing holds them
  }
  // The override directories of the replaced versions: removed after they retire.
  std::vector<std::shared_ptr<const OverrideDirectory>> replaced_files;
  std::vector<int64_t> reloaded;  // serving versions replaced by a new instance
  {
    std::unique_lock lock(mu_);
    ModelEntry& entry = models_[dir.name];
    std::map<int64_t, VersionEntry> versions;
    for (int64_t v : selection.missing) {
      const std::string reason = "version " + std::to_string(v) +
                                 " is named by the version policy but has no directory in " +
                                 dir.path;
      spdlog::error("model '{}' version {} is UNAVAILABLE: {}", dir.name, v, reason);
      versions[v] = {ModelState::kUnavailable, client_paths_.Rewrite(reason), nullptr};
    }
    for (int64_t v : selection.selected) {
      auto fresh = loaded.find(v);
      auto old = serving.find(v);
      if (fresh != loaded.end()) {
        versions[v] = std::move(fresh->second);
        if (old != serving.end()) {
          reloaded.push_back(v);
          replaced.push_back(old->second.model);
          replaced_files.push_back(old->second.files);
        }
      } else if (old != serving.end()) {
        versions[v] = old->second;
        if (auto f = failed_reloads.find(v); f != failed_reloads.end()) {
          versions[v].failed_reload_fingerprint = f->second;
          versions[v].failed_reload_reason = failed_reload_reasons[v];
        } else if (fingerprints.contains(v) && fingerprints.at(v) == old->second.fingerprint) {
          versions[v].failed_reload_fingerprint = 0;  // its files are back to what serves
          versions[v].failed_reload_reason.clear();
        }
      } else if (auto failed = failed_before.find(v); failed != failed_before.end()) {
        versions[v] = failed->second;  // failed before, from the same files: not retried
      }
    }
    // The versions the policy no longer selects retire only when every selected version
    // serves from what this reconcile meant it to: a new version that fails (now or at an
    // earlier poll) leaves the old ones serving, and so does a serving version that failed to
    // reload from these files, now or at an earlier poll that this one does not retry (it
    // serves on from its old files, under a config that did not load: nothing that serves
    // changes for a failed load, however many polls meet it).
    std::set<int64_t> ready;
    for (const auto& [v, e] : versions)
      if (e.state == ModelState::kReady) ready.insert(v);
    bool reload_failed = !failed_reloads.empty();
    for (int64_t v : selection.selected) {
      auto it = versions.find(v);
      auto fp = fingerprints.find(v);
      if (it != versions.end() && fp != fingerprints.end() &&
          it->second.failed_reload_fingerprint != 0 &&
          it->second.failed_reload_fingerprint == fp->second) {
        reload_failed = true;
      }
    }
    const bool keep_deselected = !RetireDeselected(selection.selected, ready) || reload_failed;
    for (const auto& [v, e] : serving) {
      if (versions.contains(v)) continue;  // selected: kept or replaced above
      if (keep_deselected) {
        if (!to_load.empty())
          spdlog::warn("model '{}' version {} goes on serving: the version(s) to replace it failed",
                       dir.name, v);
        versions[v] = e;
      } else {
        replaced.push_back(e.model);
        replaced_files.push_back(e.files);
      }
    }
    // The policy follows the versions in the same exclusive section: a request routed by a
    // policy never meets a version that has left (Route() decides under the shared lock).
    const std::vector<int64_t> serving_after = ReadyIn(versions);
    if (!entry.traffic) entry.traffic = std::make_shared<TrafficController>(dir.name);
    if (auto dropped = entry.traffic->OnVersionsChanged(serving_after)) {
      spdlog::warn("model '{}': {}", dir.name, *dropped);
      if (entry.traffic_file.in_force) entry.traffic_file.waits = true;
    }
    // A breaker judged the instance a reload replaced: the new one starts closed.
    for (int64_t v : reloaded) entry.traffic->OnVersionReplaced(v);
    entry.versions = std::move(versions);
    entry.unloaded = false;
  }
  for (const auto& m : replaced)
    spdlog::info("model '{}' version {}: retiring the replaced instance", dir.name, m->version());
  serving.clear();  // its references would hold up the retirement's wait for handles
  ApplyTraffic(dir);
  Retire(std::move(replaced), /*unload=*/false);
  replaced_files.clear();  // the last references, unless a version still serves from one
  return first_failure;
}

std::shared_ptr<TrafficController> ModelRepositoryManagerImpl::TrafficOf(const std::string& name) {
  std::unique_lock lock(mu_);
  ModelEntry& entry = models_[name];
  if (!entry.traffic) entry.traffic = std::make_shared<TrafficController>(name);
  return entry.traffic;
}

std::vector<int64_t> ModelRepositoryManagerImpl::ReadyVersions(std::string_view name) const {
  std::shared_lock lock(mu_);
  auto it = models_.find(name);
  return it == models_.end() ? std::vector<int64_t>() : ReadyIn(it->second.versions);
}

void ModelRepositoryManagerImpl::ApplyTraffic(const ModelDirectory& dir) {
  const std::shared_ptr<TrafficController> traffic = TrafficOf(dir.name);
  const std::vector<int64_t> ready = ReadyVersions(dir.name);
  const std::string path = dir.path + "/traffic.json";
  const FileStamp stamp = StampOf(path);
  // Read only when the file changed, or when its policy waits for versions (named one that did
  // not serve, or was dropped when one left) and the versions changed: a poll of a model whose
  // file stays as it was reads nothing.
  bool retry = false;
  {
    std::unique_lock lock(mu_);
    ModelEntry& entry = models_[dir.name];
    retry = entry.traffic_file.waits && entry.traffic_file.ready != ready;
    if (stamp == entry.traffic_file.stamp && !retry) return;
    entry.traffic_file.stamp = stamp;
    entry.traffic_file.ready = ready;
  }
  std::string content;
  if (stamp.present) {
    if (stamp.size > kMaxTrafficFileBytes) {
      spdlog::error("model '{}': {} not applied: it is {} bytes; a traffic policy is at most {}",
                    dir.name, client_paths_.Rewrite(path), stamp.size, kMaxTrafficFileBytes);
      return;
    }
    auto read = LocalFileSystem().ReadFile(path);
    if (!read.ok()) {
      spdlog::error("model '{}': {}", dir.name, read.status().message());
      return;
    }
    content = std::move(read).value();
  }
  {
    std::unique_lock lock(mu_);
    ModelEntry& entry = models_[dir.name];
    if (entry.traffic_file.content == content && !retry) return;  // touched, not changed
    entry.traffic_file.content = content;
    entry.traffic_file.waits = false;
    entry.traffic_file.in_force = false;
  }
  if (content.empty()) {
    traffic->ClearPolicy();
    spdlog::info("model '{}': traffic.json removed; requests go to the latest version", dir.name);
    return;
  }
  auto policy = ParseTrafficPolicy(content);
  if (!policy.ok()) {
    spdlog::error("model '{}': {} not applied: {}", dir.name, client_paths_.Rewrite(path),
                  policy.status().message());
    return;
  }
  // Under the lock that the versions change under: checked against the versions that serve
  // when it is installed, not a moment before.
  std::unique_lock lock(mu_);
  ModelEntry& entry = models_[dir.name];
  if (Status set = traffic->SetPolicy(*policy, ReadyIn(entry.versions)); !set.ok()) {
    // A version it names does not serve (yet): tried again when the versions change.
    entry.traffic_file.waits = true;
    spdlog::error("model '{}': {} not applied: {}; tried again when the served versions change",
                  dir.name, client_paths_.Rewrite(path), set.message());
    return;
  }
  entry.traffic_file.in_force = true;
}

StatusOr<std::shared_ptr<ServableModel>> ModelRepositoryManagerImpl::Route(
    std::string_view name, std::optional<int64_t> version, const RequestHeaders& headers) {
  if (version) return Get(name, version);  // a version in the URL is always honoured
  std::optional<int64_t> forced;
  for (const auto& [field, value] : headers) {
    if (field != "x-harrier-model-version") continue;
    if (forced) return InvalidArgument("X-Harrier-Model-Version is given more than once");
    int64_t v = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    // Written as a policy writes it: "1", not "01".
    if (ec != std::errc() || end != value.data() + value.size() || v <= 0 || value[0] == '0')
      return InvalidArgument("X-Harrier-Model-Version must be a version number, got '" +
                             value.substr(0, 64) + "'");
    forced = v;
  }
  // One lookup: the version itself without a policy (the common case), else the controller.
  // All under one shared lock: the versions and the policy change together under the exclusive
  // one (Reconcile, SetTrafficPolicy, Unload), so the version a policy picks is there to serve.
  std::shared_ptr<TrafficController> traffic;
  std::shared_lock lock(mu_);
  auto model = GetLocked(name, forced, &traffic);
  if (!traffic) return model;
  StatusOr<RouteDecision> decision = traffic->Route(forced, headers);
  // Cleared since active() said otherwise (DELETE .../traffic): routed as without one.
  if (!decision.ok() && !traffic->active()) return GetLocked(name, forced, nullptr);
  if (!decision.ok()) return decision.status();
  ASSIGN_OR_RETURN(std::shared_ptr<ServableModel> answering,
                   GetLocked(name, decision->version, nullptr));
  // A version the client forced feeds its breaker, not a rollout's guard (docs/routing.md).
  if (decision->forced) {
    return std::shared_ptr<ServableModel>(
        std::make_shared<ForcedVersionModel>(std::static_pointer_cast<LoadedModel>(answering)));
  }
  if (!decision->shadow_version) return answering;
  auto shadow = GetLocked(name, *decision->shadow_version, nullptr);
  lock.unlock();
  if (!shadow.ok()) return answering;
  return std::shared_ptr<ServableModel>(
      std::make_shared<ShadowedModel>(std::static_pointer_cast<LoadedModel>(answering),
                                      std::static_pointer_cast<LoadedModel>(*shadow), traffic));
}

StatusOr<std::string> ModelRepositoryManagerImpl::TrafficJson(std::string_view name) {
  std::shared_ptr<TrafficController> traffic;
  {
    std::shared_lock lock(mu_);
    ASSIGN_OR_RETURN(const ModelEntry* entry, FindModel(name));
    traffic = entry->traffic;
  }
  // A model that never had a controller reads as a fresh one: no policy, nothing recorded.
  if (!traffic) return TrafficController(std::string(name)).StateJson();
  return traffic->StateJson();
}

Status ModelRepositoryManagerImpl::SetTrafficPolicy(std::string_view name, std::string_view json) {
  {
    std::shared_lock lock(mu_);
    RETURN_IF_ERROR(FindModel(name).status());
  }
  ASSIGN_OR_RETURN(TrafficPolicy policy, ParseTrafficPolicy(json));
  // Checked and installed under the lock that the versions change under: a reload that retires
  // a version the policy names either runs before (and the policy is refused) or after (and
  // drops it); never between the check and the install.
  std::unique_lock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return FindModel(name).status();
  ModelEntry& entry = it->second;
  if (!entry.traffic) entry.traffic = std::make_shared<TrafficController>(std::string(name));
  RETURN_IF_ERROR(entry.traffic->SetPolicy(policy, ReadyIn(entry.versions)));
  entry.traffic_file.in_force = false;  // the API's policy stands until the file changes
  entry.traffic_file.waits = false;
  return Status::Ok();
}

Status ModelRepositoryManagerImpl::ClearTrafficPolicy(std::string_view name) {
  std::unique_lock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return FindModel(name).status();
  ModelEntry& entry = it->second;
  if (entry.traffic) entry.traffic->ClearPolicy();
  entry.traffic_file.in_force = false;
  entry.traffic_file.waits = false;
  return Status::Ok();
}

void ModelRepositoryManagerImpl::ForgetRevertedReloads(const std::string& name,
                                                       const std::map<int64_t, uint64_t>& files) {
  std::unique_lock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return;
  for (auto& [v, e] : it->second.versions) {
    auto fp = files.find(v);
    if (e.failed_reload_fingerprint == 0 || fp == files.end() || fp->second != e.fingerprint)
      continue;
    e.failed_reload_fingerprint = 0;
    e.failed_reload_reason.clear();
  }
}

void ModelRepositoryManagerImpl::Retire(std::vector<std::shared_ptr<LoadedModel>> models,
                                        bool unload) {
  for (auto& model : models) {
    const std::string which = model->label();
    const Status why = Unavailable(unload ? which + " was unloaded"
                                          : which +
                                                " was retired (a reload replaced it, or its "
                                                "version policy no longer selects it)");
    // An unloaded model's generations that wait for a sequence could start only when a running
    // one ends, and would be failed at the bound below if none did: they end now (probe 28
    // F6). A reload's go on waiting, since the running ones on the old version may end soon.
    if (unload) model->EndWaitingGenerations(why);
    // Ours is the last reference the manager holds; every other is a request's handle.
    const auto deadline = Clock::now() + options_.unload_timeout;
    while (model.use_count() > 1 && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (model.use_count() > 1) {
      spdlog::warn(
          "model '{}' version {}: {} handle(s) still held after {} ms; shutting it down anyway "
          "(their requests are refused)",
          model->name(), model->version(), model.use_count() - 1, options_.unload_timeout.count());
    }
    // Finishes what is queued or running, joins the workers; a generation still running (past
    // the bound above) ends with this reason, which its client reads.
    model->Shutdown(why);
    model.reset();      // the last reference (unless a late request still holds one)
  }
  // glibc keeps freed chunks in its arenas (the version's weights, ONNX Runtime's buffers, the
  // worker threads' arenas). An unload gives them back to the system; a version replaced or
  // deselected leaves them for the next load, up to the budget (freed_memory.h).
  if (models.empty()) return;
  if (unload) {
    freed_memory_.AfterUnload();
  } else {
    freed_memory_.AfterLoad();
  }
}

Status ModelRepositoryManagerImpl::ModelControlAllowed() const {
  if (options_.control_mode != ModelControlMode::kExplicit) {
    // Triton's words.
    return Unavailable(
        "explicit model load / unload is not allowed if polling is enabled (this server runs "
        "with --model-control-mode " +
        std::string(options_.control_mode == ModelControlMode::kPoll ? "poll" : "none") +
        "; use explicit)");
  }
  return Status::Ok();
}

// A load's own failure, in Triton's words ("failed to load 'm': ..."). An engine's
// RESOURCE_EXHAUSTED here means the model does not fit what the machine has (a llama.cpp context
// it cannot allocate), not a busy server: it is answered as INVALID_ARGUMENT (400), as Triton
// answers a failed load, never as a 429 whose Retry-After a client would obey in vain.
Status LoadFailed(const std::string& name, StatusCode code, const std::string& why) {
  if (code == StatusCode::kResourceExhausted) code = StatusCode::kInvalidArgument;
  return Status(code, "failed to load '" + name + "': " + why);
}

// The most lifecycle tasks (loads, unloads) queued for one model that a load may join: a load
// past it is refused. A load with overrides carries its files (up to --max-body-bytes) while it
// waits, and plain loads join the one queued, so this bounds what a client can queue.
constexpr size_t kMaxQueuedLoads = 8;

// `seconds`: about how long the queued tasks take (the Retry-After the 429 carries).
Status TooManyQueued(std::string_view name, int64_t seconds) {
  return ResourceExhausted("failed to load '" + std::string(name) +
                           "': " + std::to_string(kMaxQueuedLoads) +
                           " loads and unloads of it are queued already; ask again once they "
                           "are done; retry after " +
                           std::to_string(std::max<int64_t>(seconds, 1)) + " s");
}

Status ValidateModelName(std::string_view name) {
  const bool control = std::any_of(name.begin(), name.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  // A name starting with '.' is a hidden directory, which the repository scan skips.
  // UTF-8, as the repository scan wants: a name goes into JSON and metric labels (probe 29; the
  // explicit index's listing of new directories let one through again, probe 37).
  if (name.empty() || name.front() == '.' || name.find('/') != std::string_view::npos || control ||
      name.size() > 255 || !IsValidUtf8(name)) {
    return InvalidArgument(
        "a model name is one a repository directory could have: one path component, not "
        "starting with '.', at most 255 bytes, UTF-8, no control characters");
  }
  return Status::Ok();
}

void ModelRepositoryManagerImpl::LoadModel(std::string_view name, ModelLoadOptions options,
                                           std::function<void(Status)> done) {
  if (Status allowed = ModelControlAllowed(); !allowed.ok()) return done(allowed);
  // Checked here, before anything is written or queued: a bad request changes nothing. A name
  // is one a repository directory could have, and printable: with file overrides it need not
  // exist, and it goes into log lines, the index and metrics as it is.
  if (Status named = ValidateModelName(name); !named.ok()) return done(named);
  if (auto checked = ValidateFileOverrides(options.files, options.config_json.has_value());
      !checked.ok()) {
    return done(checked.status());
  }
  std::optional<inference::ModelConfig> override;
  if (options.config_json) {
    auto parsed = ParseModelConfigJson(*options.config_json);
    if (!parsed.ok()) {
      // Triton's words: its model-control example looks for "failed to load" in the answer, its
      // QA test for "Invalid config override" in the server log.
      spdlog::error("model '{}': Invalid config override: {}", name, parsed.status().message());
      return done(Status(parsed.status().code(), "failed to load '" + std::string(name) +
                                                     "': Invalid config override: "
                                                     "parameters.config: " +
                                                     std::string(parsed.status().message())));
    }
    override = std::move(parsed).value();
  }
  if (!override && options.files.empty()) return LoadPlain(std::string(name), std::move(done));
  if (lifecycle_.Queued(name) >= kMaxQueuedLoads)
    return done(TooManyQueued(name, QueuedLoadsSeconds(name)));
  const bool posted = PostAfterPlainLoads(
      std::string(name),
      [this, name = std::string(name), override = std::move(override),
       files = std::move(options.files), done] {
        if (!files.empty()) return done(LoadFromOverrides(name, *override, files));
        done(LoadFromRepository(name, override));
      },
      [done] { done(Unavailable("the server is shutting down")); });
  if (!posted) done(Unavailable("the server is shutting down"));
}

void ModelRepositoryManagerImpl::LoadPlain(std::string name, std::function<void(Status)> done) {
  auto load = std::make_shared<QueuedLoad>();
  // Out of the map: no waiter joins after this, so they are read without the lock.
  auto take = [this, name, load] {
    std::lock_guard lock(queued_loads_mu_);
    if (auto it = queued_loads_.find(name); it != queued_loads_.end() && it->second == load)
      queued_loads_.erase(it);
  };
  auto answer = [load](const Status& status) {
    for (const auto& waiter : load->waiters) waiter(status);
  };
  bool queued = false, posted = false;
  {
    // Posted under the lock that PostAfterPlainLoads takes too: a task is queued in the order
    // its request joined or left the map.
    std::lock_guard lock(queued_loads_mu_);
    if (auto it = queued_loads_.find(name); it != queued_loads_.end()) {
      it->second->waiters.push_back(std::move(done));
      return;
    }
    if (lifecycle_.Queued(name) < kMaxQueuedLoads) {
      queued = true;
      load->waiters.push_back(std::move(done));
      posted = lifecycle_.Post(
          name,
          [this, name, take, answer] {
            take();
            answer(LoadFromRepository(name, std::nullopt));
          },
          [take, answer] {
            take();
            answer(Unavailable("the server is shutting down"));
          });
      if (posted) queued_loads_.emplace(name, load);
    }
  }
  if (!queued) return done(TooManyQueued(name, QueuedLoadsSeconds(name)));
  if (!posted) answer(Unavailable("the server is shutting down"));
}

int64_t ModelRepositoryManagerImpl::QueuedLoadsSeconds(std::string_view name) const {
  // Each queued task taken as long as the model's slowest version took to load: the generic
  // Retry-After of 1 s had clients that honour it ask again every second (probe 37).
  double load_seconds = 0;
  {
    std::shared_lock lock(mu_);
    if (auto it = models_.find(name); it != models_.end()) {
      for (const auto& [v, e] : it->second.versions)
        load_seconds = std::max(load_seconds, e.load_seconds);
    }
  }
  return static_cast<int64_t>(std::ceil(load_seconds * static_cast<double>(kMaxQueuedLoads)));
}

bool ModelRepositoryManagerImpl::PostAfterPlainLoads(const std::string& name,
                                                     std::function<void()> task,
                                                     std::function<void()> dropped) {
  std::lock_guard lock(queued_loads_mu_);
  // A plain load asked after this task must run after it (a load after an unload loads).
  queued_loads_.erase(name);
  return lifecycle_.Post(name, std::move(task), std::move(dropped));
}

Status ModelRepositoryManagerImpl::LoadFromRepository(
    const std::string& name, const std::optional<inference::ModelConfig>& override) {
  auto dirs = ScanRepository(options_.repository_path);
  if (!dirs.ok()) return dirs.status();
  for (const ModelDirectory& dir : *dirs) {
    if (dir.name != name) continue;
    Status s = Reconcile(dir, true, override, nullptr);
    return s.ok() ? s : LoadFailed(name, s.code(), client_paths_.Rewrite(s.message()));
  }
  return NotFound("failed to load '" + name + "': the repository has no model directory '" + name +
                  "'");
}

Status ModelRepositoryManagerImpl::LoadFromOverrides(const std::string& name,
                                                     const inference::ModelConfig& config,
                                                     const std::vector<ModelFileOverride>& files) {
  auto made = OverrideDirectory::Create(options_.override_parent_directory, files);
  if (!made.ok()) {
    spdlog::error("model '{}': file overrides not written: {}", name, made.status().message());
    return LoadFailed(name, made.status().code(), std::string(made.status().message()));
  }
  // Shared with the versions that load from it; this reference goes at the end of the load, so
  // a load that fails leaves no directory behind.
  std::shared_ptr<const OverrideDirectory> overrides = std::move(made).value();
  spdlog::info("model '{}': loading from {} file override(s) written to {}", name, files.size(),
               overrides->path());
  bool known = false;
  {
    std::shared_lock lock(mu_);
    known = models_.contains(name);
  }
  ModelDirectory dir;
  dir.name = name;
  dir.path = overrides->path();
  dir.versions = overrides->versions();
  Status s = Reconcile(dir, true, config, overrides);
  if (s.ok()) return s;
  // Paths inside the private directory mean nothing to the client: say "file:<path>" instead,
  // in the answer and in the reasons the index shows.
  const std::string prefix = overrides->path() + "/";
  auto client_text = [&prefix](std::string text) {
    for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at))
      text.replace(at, prefix.size(), "file:");
    return text;
  };
  {
    std::unique_lock lock(mu_);
    auto it = models_.find(name);
    if (it != models_.end()) {
      const bool serves =
          std::any_of(it->second.versions.begin(), it->second.versions.end(),
                      [](const auto& v) { return v.second.state == ModelState::kReady; });
      if (!known && !serves) {
        models_.erase(it);  // a new name that did not load leaves no index row, no unready server
      } else {
        for (auto& [v, e] : it->second.versions) e.reason = client_text(std::move(e.reason));
      }
    }
  }
  return LoadFailed(name, s.code(), client_text(std::string(s.message())));
}

std::shared_ptr<std::atomic<bool>> ModelRepositoryManagerImpl::LoadStarts(const std::string& name) {
  auto flag = std::make_shared<std::atomic<bool>>(false);
  std::lock_guard lock(unload_asked_mu_);
  unload_asked_[name] = flag;
  return flag;
}

void ModelRepositoryManagerImpl::LoadEnds(const std::string& name,
                                          const std::shared_ptr<std::atomic<bool>>& flag) {
  std::lock_guard lock(unload_asked_mu_);
  auto it = unload_asked_.find(name);
  if (it != unload_asked_.end() && it->second == flag) unload_asked_.erase(it);
}

void ModelRepositoryManagerImpl::UnloadModel(std::string_view name,
                                             std::function<void(Status)> done) {
  if (Status allowed = ModelControlAllowed(); !allowed.ok()) return done(allowed);
  {
    std::lock_guard lock(unload_asked_mu_);
    if (auto it = unload_asked_.find(name); it != unload_asked_.end()) it->second->store(true);
  }
  const bool posted = PostAfterPlainLoads(
      std::string(name), [this, name = std::string(name), done] { Unload(name, false, done); },
      [done] { done(Unavailable("the server is shutting down")); });
  if (!posted) done(Unavailable("the server is shutting down"));
}

void ModelRepositoryManagerImpl::Unload(const std::string& name, bool forget,
                                        const std::function<void(Status)>& done) {
  std::vector<std::shared_ptr<LoadedModel>> retiring;
  // Its file overrides' directories, if loaded from some: removed once the versions retired.
  std::vector<std::shared_ptr<const OverrideDirectory>> files;
  {
    std::unique_lock lock(mu_);
    auto it = models_.find(name);
    if (it == models_.end()) {
      lock.unlock();
      if (!done) return;
      // A directory of the repository that was never loaded (explicit mode: added since the
      // start) is unloaded already, as Triton answers.
      std::error_code error;
      if (ValidateModelName(name).ok() &&
          std::filesystem::is_directory(std::filesystem::path(options_.repository_path) / name,
                                        error)) {
        return done(Status::Ok());
      }
      done(NotFound("failed to unload '" + name + "': no such model in the repository"));
      return;
    }
    ModelEntry& entry = it->second;
    entry.unloaded = true;
    // Out of rotation with its versions: a request is answered as for an unloaded model, not
    // routed to an UNLOADING version. A later load reads traffic.json afresh.
    if (entry.traffic) entry.traffic->ClearPolicy();
    entry.traffic_file = {};
    for (auto& [v, e] : entry.versions) {
      e.state = e.model ? ModelState::kUnloading : ModelState::kUnavailable;
      e.reason = e.model ? "unloading" : "unloaded";
      if (e.model) retiring.push_back(std::move(e.model));
      if (e.files) files.push_back(std::move(e.files));
    }
    if (entry.versions.empty()) entry.reason = "unloaded";
  }
  spdlog::info("model '{}': unloading {} version(s)", name, retiring.size());
  if (done) done(Status::Ok());  // out of rotation: no new request reaches it
  // A model that exists only through file overrides is forgotten once unloaded: no plain load
  // can bring it back, and each name a pipeline loaded under (one per build) stayed in the index
  // and the metrics for good (probe 28, F5).
  std::error_code ec;
  const bool overrides_only =
      !files.empty() && !std::filesystem::is_directory(options_.repository_path + "/" + name, ec);
  Retire(std::move(retiring), /*unload=*/true);
  files.clear();
  std::unique_lock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end() || !it->second.unloaded) return;  // loaded again meanwhile
  if (forget || overrides_only) {
    models_.erase(it);
    spdlog::info("model '{}' {}", name,
                 forget ? "removed from the repository: unloaded"
                        : "unloaded and forgotten (it was loaded from file overrides only)");
    return;
  }
  for (auto& [v, e] : it->second.versions) {
    e.state = ModelState::kUnavailable;
    e.reason = "unloaded";
  }
  spdlog::info("model '{}' unloaded", name);
}

void ModelRepositoryManagerImpl::PollNow() {
  lifecycle_.Post(std::string(kPollKey), [this] { Poll(); });
}

void ModelRepositoryManagerImpl::Poll() {
  auto dirs = ScanRepository(options_.repository_path);
  if (!dirs.ok()) {
    spdlog::error("model repository poll: {}", dirs.status().message());
    return;
  }
  std::vector<std::string> known;
  {
    std::shared_lock lock(mu_);
    if (shut_down_) return;
    for (const auto& [name, entry] : models_) known.push_back(name);
  }
  // Each model's part runs under its key, behind what was posted for it before: models apply in
  // parallel, each one's plan in order (the new version serves, then the old one retires).
  std::vector<std::string> removed;
  for (const std::string& name : known) {
    const bool present = std::any_of(dirs->begin(), dirs->end(),
                                     [&](const ModelDirectory& d) { return d.name == name; });
    if (!present) removed.push_back(name);
  }
  for (ModelDirectory& dir : *dirs) {
    std::string name = dir.name;
    lifecycle_.Post(std::move(name), [this, dir = std::move(dir)] { PollModel(dir); });
  }
  for (const std::string& name : removed)
    lifecycle_.Post(name, [this, name] { PollRemoved(name); });
}

void ModelRepositoryManagerImpl::PollModel(const ModelDirectory& dir) {
  {
    std::shared_lock lock(mu_);
    if (shut_down_) return;
    auto it = models_.find(dir.name);
    if (it != models_.end() && it->second.unloaded) return;
    if (it != models_.end() && FromOverrides(it->second)) return;
    if (it == models_.end()) spdlog::info("model '{}' appeared in the repository", dir.name);
  }
  (void)Reconcile(dir, false, std::nullopt, nullptr);
}

void ModelRepositoryManagerImpl::PollRemoved(const std::string& name) {
  {
    std::shared_lock lock(mu_);
    auto it = models_.find(name);
    if (it == models_.end() || FromOverrides(it->second)) return;
  }
  Unload(name, true, nullptr);
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
  return GetLocked(name, version, nullptr);
}

StatusOr<std::shared_ptr<ServableModel>> ModelRepositoryManagerImpl::GetLocked(
    std::string_view name, std::optional<int64_t> version,
    std::shared_ptr<TrafficController>* traffic) const {
  ASSIGN_OR_RETURN(const ModelEntry* entry, FindModel(name));
  if (traffic != nullptr && entry->traffic && entry->traffic->active()) {
    *traffic = entry->traffic;
    return std::shared_ptr<ServableModel>();  // the caller routes
  }
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
  // Explicit mode: a model directory that neither the start nor a load has seen (added since)
  // is listed as unloaded, as Triton's index lists every model a load could load (probe 35).
  // Only the root is listed (one readdir; d_type, a stat only for a symbolic link): a scan of
  // every model directory cost 26 ms a call with 3,000 models (probe 37), and /v1/models asks.
  std::vector<std::string> on_disk;
  if (options_.control_mode == ModelControlMode::kExplicit) {
    std::error_code error;
    for (std::filesystem::directory_iterator it(options_.repository_path, error), end;
         !error && it != end; it.increment(error)) {
      std::string name = it->path().filename().string();
      std::error_code type_error;
      // The scan's rules: no hidden directory, no name a model could not have.
      if (!ValidateModelName(name).ok() || !it->is_directory(type_error)) continue;
      on_disk.push_back(std::move(name));
    }
  }
  std::shared_lock lock(mu_);
  std::vector<ModelVersionState> rows;
  bool unseen = false;
  for (std::string& name : on_disk) {
    if (models_.contains(name)) continue;
    rows.push_back({std::move(name), 0, ModelState::kUnavailable, "unloaded"});
    unseen = true;
  }
  for (const auto& [name, entry] : models_) {
    if (entry.versions.empty()) {
      rows.push_back({name, 0,
                      entry.reason.empty() ? ModelState::kLoading : ModelState::kUnavailable,
                      entry.reason});
      continue;
    }
    for (const auto& [v, e] : entry.versions) {
      // A READY version whose repository content failed to load (poll mode, or a load request)
      // says so: it serves on from what it was loaded from, and the failure was only in the
      // log (probe 29). Triton leaves a READY row's reason empty; clients read the state.
      std::string reason = e.reason;
      if (e.state == ModelState::kReady && reason.empty()) {
        if (!entry.last_failure.empty()) {
          reason = "serving what was loaded before; the model's new content failed to load: " +
                   entry.last_failure;
        } else if (e.failed_reload_fingerprint != 0 && !e.failed_reload_reason.empty()) {
          reason = "serving what was loaded before; its new files failed to load: " +
                   e.failed_reload_reason;
        }
      }
      rows.push_back({name, v, e.state, std::move(reason)});
    }
  }
  if (unseen) {
    std::stable_sort(
        rows.begin(), rows.end(),
        [](const ModelVersionState& a, const ModelVersionState& b) { return a.name < b.name; });
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
    if (entry.unloaded) continue;  // unloaded on purpose: not expected to serve
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
  std::vector<std::shared_ptr<TrafficController>> controllers;
  {
    std::shared_lock lock(mu_);
    for (const auto& [name, entry] : models_) {
      if (entry.traffic) controllers.push_back(entry.traffic);
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
    sample.queue_depth = v.model->queue_depth();
    if (const ModelAdmission* admission = v.model->admission()) {
      if (auto wait = admission->PredictedQueueWait())
        sample.predicted_queue_wait_seconds = std::chrono::duration<double>(*wait).count();
    }
    GenerationStats generation;
    if (GenerativeModel* g = v.model->generative()) {
      generation = g->Stats();
      sample.generation = &generation;
    }
    AppendModelVersionMetrics(sample, out);
  }
  AppendUnroutedFailures(unrouted_failures_, out);
  for (const auto& traffic : controllers) {
    const auto shadows = traffic->shadow_figures();
    if (!traffic->active() && traffic->rollbacks() == 0 && shadows.empty()) continue;
    TrafficSample sample;
    sample.model = traffic->model();
    for (const auto& [v, w] : traffic->weights()) sample.weights.emplace_back(v, w);
    sample.rollbacks = traffic->rollbacks();
    sample.breaker_panics = traffic->breaker_panics();
    for (const auto& [v, f] : shadows) {
      sample.shadows.push_back({v, f.compared, f.errors, f.shed, f.mismatched, f.top1_agreed,
                                f.top1_compared, f.last_max_abs_difference});
    }
    for (const auto& [v, state] : traffic->breaker_states()) {
      TrafficSample::Breaker breaker{v, {}};
      for (auto s : {CircuitBreaker::State::kClosed, CircuitBreaker::State::kOpen,
                     CircuitBreaker::State::kHalfOpen}) {
        breaker.states.emplace_back(BreakerStateName(s), s == state);
      }
      sample.breakers.push_back(std::move(breaker));
    }
    AppendTrafficMetrics(sample, out);
  }
  for (const Version& v : versions)
    AppendModelState(v.state, v.load_seconds, v.warmup_failures, out);
}

std::vector<DashboardVersion> ModelRepositoryManagerImpl::DashboardVersions() const {
  // As in CollectMetrics(): pinned under the lock, read outside it.
  std::vector<std::pair<DashboardVersion, std::shared_ptr<LoadedModel>>> pinned;
  std::vector<std::shared_ptr<TrafficController>> controllers;
  {
    std::shared_lock lock(mu_);
    for (const auto& [name, entry] : models_) {
      if (entry.traffic && entry.traffic->active()) controllers.push_back(entry.traffic);
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
  // The traffic notes, outside the manager's lock (each controller has its own).
  std::map<std::string, std::map<int64_t, std::string>, std::less<>> notes;
  for (const auto& c : controllers) notes[c->model()] = c->VersionNotes();
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
      row.queue_depth = model->queue_depth();
      row.in_flight = m.in_flight.load(std::memory_order_relaxed);
      row.request_duration = m.request_duration.Snapshot();
      if (model->generative() != nullptr) {
        row.generative = true;
        row.generated_tokens = m.generated_tokens.load(std::memory_order_relaxed);
        row.time_to_first_token = m.time_to_first_token.Snapshot();
      }
    }
    if (auto m = notes.find(row.state.name); m != notes.end()) {
      if (auto n = m->second.find(row.state.version); n != m->second.end()) row.traffic = n->second;
    }
    out.push_back(std::move(row));
  }
  return out;
}

void ModelRepositoryManagerImpl::BeginShutdown() {
  stopping_.store(true, std::memory_order_relaxed);
  lifecycle_.Close();  // queued loads and unloads are answered 503 now, polls dropped
}

void ModelRepositoryManagerImpl::Shutdown() {
  BeginShutdown();
  lifecycle_.Stop();  // the loads in progress finish first (a warm-up stops between runs)
  std::vector<std::shared_ptr<LoadedModel>> loaded;
  std::vector<std::shared_ptr<const OverrideDirectory>> files;
  {
    std::unique_lock lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    for (auto& [name, entry] : models_) {
      for (auto& [v, e] : entry.versions) {
        if (e.model) loaded.push_back(e.model);
        if (e.files) files.push_back(std::move(e.files));
      }
    }
  }
  // Outside the lock: draining runs the queued requests' callbacks.
  for (auto& m : loaded) m->Shutdown(Unavailable("the server is shutting down"));
  files.clear();  // the server leaves none of the files it wrote behind
}

}  // namespace

StatusOr<std::unique_ptr<ModelRepositoryManager>> ModelRepositoryManager::Create(
    const Options& options) {
  if (options.backends == nullptr || options.backends->default_tensor_backend() == nullptr)
    return InvalidArgument("ModelRepositoryManager needs a backend");
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
