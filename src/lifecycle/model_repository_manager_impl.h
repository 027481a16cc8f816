// The ModelRepositoryManager's implementation (model_repository_manager.h), shared by the files
// that define its parts, one concept each:
//   model_repository_manager.cc   creation, the loads at start, lookup, the index, statistics
//                                 and reports, shutdown;
//   model_repository_reconcile.cc bringing one model to what its directory says: load and warm
//                                 the versions, swap them in, retire what they replace;
//   model_repository_control.cc   the load/unload API (Triton's model control) and the
//                                 repository poll, queued on the lifecycle threads;
//   model_repository_traffic.cc   the traffic policies: routing a request to a version,
//                                 traffic.json, the traffic API.
// The registry of models (models_, under mu_) is what they share. Only those files include
// this header; everyone else sees ModelRepositoryManager.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/cpu_quota.h"
#include "core/thread_spawner.h"
#include "lifecycle/freed_memory.h"
#include "lifecycle/lifecycle_executor.h"
#include "lifecycle/loaded_model.h"
#include "lifecycle/model_loader.h"
#include "lifecycle/model_repository_manager.h"
#include "lifecycle/repository_reports.h"
#include "observability/model_metrics.h"
#include "repository/override_directory.h"
#include "repository/repository_relative_paths.h"
#include "repository/repository_scan.h"
#include "repository/version_policy.h"
#include "routing/traffic_controller.h"

namespace harrier {

// The key the repository polls' scans (and, outside poll mode, the periodic return of kept
// memory) are posted under (lifecycle_executor.h): one scan at a time, so that the per-model
// work they post is queued in scan order. No model is named so: a model's name is a directory
// name, which holds no '/'.
inline constexpr std::string_view kPollKey = "/poll";

// Whether a regular file is at a path, with its size and modification time.
struct FileStamp {
  bool present = false;
  uint64_t size = 0;
  int64_t modified_ns = 0;
  friend bool operator==(const FileStamp&, const FileStamp&) = default;
};

// Whether `name` is one a repository directory could have (the scan's rules): one path
// component, not starting with '.', at most 255 bytes, UTF-8, no control characters.
Status ValidateModelName(std::string_view name);

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
  void EndGenerations(const Status& why) override;
  void Shutdown() override;
  StatusOr<std::shared_ptr<ServableModel>> Get(std::string_view name,
                                               std::optional<int64_t> version) override;
  StatusOr<ModelMetadata> Metadata(std::string_view name, std::optional<int64_t> version) override;
  std::vector<ModelVersionState> Index() const override;
  std::vector<ModelVersionState> IndexOf(std::string_view name) const override;
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

  // `entry`'s index rows (Index(), IndexOf()), appended to `rows`. Under mu_.
  static void AppendIndexRows(const std::string& name, const ModelEntry& entry,
                              std::vector<ModelVersionState>* rows);

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
  // Reconcile()'s steps, in order (model_repository_reconcile.cc).
  // What a reconcile starts from: the READY versions, pinned so that they keep serving through
  // the load, and the versions that failed to load from known files (a poll does not retry
  // them until the files change).
  struct Pinned {
    std::map<int64_t, VersionEntry> serving;
    std::map<int64_t, VersionEntry> failed_before;
  };
  Pinned PinVersions(const std::string& name) const;
  // A failure of the model as a whole (its directory, its config, its version policy): logged
  // (once while a poll keeps meeting it); with no version `serving`, the model's entry says it;
  // with some, they go on serving and the index says what failed. Returns `s`.
  Status ModelFailed(const ModelDirectory& dir, bool polled, bool overridden, bool serving,
                     const Status& s);
  // The versions `config`'s policy selects in `dir`, or why none can load.
  static StatusOr<VersionSelection> SelectVersionsOf(const ModelDirectory& dir,
                                                     const inference::ModelConfig& config,
                                                     bool overridden);
  struct Loads {
    std::map<int64_t, VersionEntry> loaded;      // READY or UNAVAILABLE
    std::map<int64_t, uint64_t> failed_reloads;  // serving version -> the files it failed from
    std::map<int64_t, std::string> failed_reload_reasons;  // -> why (the repository's files)
    Status first_failure = Status::Ok();
  };
  // Loads and warms each of `to_load`, while what serves goes on serving.
  Loads LoadVersions(const ModelDirectory& dir, const inference::ModelConfig& config,
                     bool overridden, const std::vector<int64_t>& to_load,
                     const std::map<int64_t, uint64_t>& fingerprints, const Pinned& pinned,
                     const std::shared_ptr<const OverrideDirectory>& files);
  // Drops (and retires) the versions loaded whose directory was removed meanwhile: with
  // versions `serving`, they go on serving; without, the version is UNAVAILABLE saying so.
  void DropVanished(const ModelDirectory& dir, bool serving, Loads* loads);
  // What a swap takes out of rotation, retired after it.
  struct Replaced {
    std::vector<std::shared_ptr<LoadedModel>> models;
    // The override directories they served from: removed once they retire.
    std::vector<std::shared_ptr<const OverrideDirectory>> files;
  };
  // In one exclusive section: the model's versions become the selected ones (the loaded, the
  // serving ones kept, the failed ones), deselected versions leave unless a replacement
  // failed, and the traffic policy follows the versions.
  Replaced SwapIn(const ModelDirectory& dir, const VersionSelection& selection,
                  const std::map<int64_t, uint64_t>& fingerprints, bool loaded_any,
                  const Pinned& pinned, Loads loads);
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
  // The repository's own failure at the last poll (it could not be listed), to log it once
  // while it lasts, as a model's failure is (probe 68: a line every poll). Poll's alone.
  std::string poll_failure_;
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

  // Every version of every model, pinned for reading outside the lock (repository_reports.h).
  RepositorySnapshot Snapshot() const;

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

}  // namespace harrier
