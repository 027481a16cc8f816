#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <thread>

#include "lifecycle/model_repository_manager_impl.h"
#include "repository/file_system.h"

namespace harrier {

namespace {

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

}  // namespace

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
  for (const auto& [name, entry] : models_) AppendIndexRows(name, entry, &rows);
  if (unseen) {
    std::stable_sort(
        rows.begin(), rows.end(),
        [](const ModelVersionState& a, const ModelVersionState& b) { return a.name < b.name; });
  }
  return rows;
}

std::vector<ModelVersionState> ModelRepositoryManagerImpl::IndexOf(std::string_view name) const {
  // A model no start or load has seen is not listed: its directory is not looked for (that is
  // the caller's unknown model, which Index() would list as unloaded in explicit mode).
  std::vector<ModelVersionState> rows;
  std::shared_lock lock(mu_);
  if (auto it = models_.find(name); it != models_.end())
    AppendIndexRows(it->first, it->second, &rows);
  return rows;
}

void ModelRepositoryManagerImpl::AppendIndexRows(const std::string& name, const ModelEntry& entry,
                                                 std::vector<ModelVersionState>* rows) {
  if (entry.versions.empty()) {
    rows->push_back({name, 0,
                     entry.reason.empty() ? ModelState::kLoading : ModelState::kUnavailable,
                     entry.reason});
    return;
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
    rows->push_back({name, v, e.state, std::move(reason)});
  }
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

RepositorySnapshot ModelRepositoryManagerImpl::Snapshot() const {
  RepositorySnapshot snapshot;
  std::shared_lock lock(mu_);
  for (const auto& [name, entry] : models_) {
    if (entry.traffic) snapshot.traffic.push_back(entry.traffic);
    if (entry.versions.empty()) {
      PinnedVersion row;
      row.state = {name, 0, entry.reason.empty() ? ModelState::kLoading : ModelState::kUnavailable,
                   entry.reason};
      snapshot.versions.push_back(std::move(row));
    }
    for (const auto& [v, e] : entry.versions) {
      snapshot.versions.push_back(
          {{name, v, e.state, e.reason}, e.load_seconds, e.warmup_failures, e.model});
    }
  }
  return snapshot;
}

void ModelRepositoryManagerImpl::CollectMetrics(TextExposition* out) const {
  AppendRepositoryMetrics(Snapshot(), unrouted_failures_, out);
}

std::vector<DashboardVersion> ModelRepositoryManagerImpl::DashboardVersions() const {
  return DashboardRows(Snapshot());
}

void ModelRepositoryManagerImpl::BeginShutdown() {
  stopping_.store(true, std::memory_order_relaxed);
  lifecycle_.Close();  // queued loads and unloads are answered 503 now, polls dropped
}

void ModelRepositoryManagerImpl::EndGenerations(const Status& why) {
  std::vector<std::shared_ptr<LoadedModel>> loaded;
  {
    std::shared_lock lock(mu_);
    for (const auto& [name, entry] : models_) {
      for (const auto& [v, e] : entry.versions)
        if (e.model && e.model->generative() != nullptr) loaded.push_back(e.model);
    }
  }
  if (loaded.empty()) return;
  // Counted for the log only: every generative engine stops (a generation asked for after
  // this is refused with `why`), but the line names what was cut, and nothing when nothing
  // was (probe 48: an idle stop said versions' generations were ended).
  int64_t running = 0, waiting = 0;
  for (const auto& m : loaded) {
    const GenerationStats stats = m->generative()->Stats();
    running += stats.active_sequences;
    waiting += stats.waiting_requests;
  }
  if (running + waiting > 0) {
    spdlog::info("ending {} generation(s) still running and {} waiting: {}", running, waiting,
                 why.message());
  }
  // Outside the lock: an engine's shutdown joins its thread.
  for (const auto& m : loaded) m->EndGenerations(why);
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
