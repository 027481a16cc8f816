#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "lifecycle/model_repository_manager_impl.h"
#include "lifecycle/reconcile_plan.h"
#include "repository/config_validation.h"
#include "repository/file_system.h"
#include "repository/model_config_parser.h"
#include "repository/model_fingerprint.h"
#include "repository/version_policy.h"

namespace harrier {

namespace {

using SteadyClock = std::chrono::steady_clock;

}  // namespace

ModelRepositoryManagerImpl::Pinned ModelRepositoryManagerImpl::PinVersions(
    const std::string& name) const {
  Pinned pinned;
  std::shared_lock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return pinned;
  for (const auto& [v, e] : it->second.versions) {
    if (e.state == ModelState::kReady) pinned.serving[v] = e;
    if (e.state == ModelState::kUnavailable && e.fingerprint != 0) pinned.failed_before[v] = e;
  }
  return pinned;
}

Status ModelRepositoryManagerImpl::ModelFailed(const ModelDirectory& dir, bool polled,
                                               bool overridden, bool serving, const Status& s) {
  const std::string reason = client_paths_.Rewrite(s.message());
  bool repeated = false;
  {
    std::shared_lock lock(mu_);
    auto it = models_.find(dir.name);
    repeated = polled && it != models_.end() && it->second.last_failure == reason;
  }
  if (!repeated) {
    spdlog::error(
        "model '{}'{}: {}", dir.name,
        serving ? " was not reloaded (its serving versions go on serving)" : " is UNAVAILABLE",
        s.message());
  }
  if (serving) {
    // Beside READY in the index until the repository's content loads (Index). A load refused
    // for its own config override changed nothing in the repository: its request's answer says
    // why, and the index does not (probe 33).
    if (!overridden) {
      std::unique_lock lock(mu_);
      models_[dir.name].last_failure = reason;
    }
    return s;
  }
  {
    // An unloaded model stays unloaded: its rows, its traffic figures, and the server's
    // readiness (which unloaded models do not count against) as they were. Replaced by a failed
    // entry, one refused load of a model nobody serves made the server unready until someone
    // unloaded it again (probe 28, F4).
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
  return s;
}

StatusOr<VersionSelection> ModelRepositoryManagerImpl::SelectVersionsOf(
    const ModelDirectory& dir, const inference::ModelConfig& config, bool overridden) {
  // The policy's own mistakes first, in its own words (a specific policy listing nothing read
  // as "no version directories", and -1 as a version without a directory; probe 29).
  if (Status policy = ValidateVersionPolicy(config.version_policy()); !policy.ok())
    return policy.WithContext(overridden ? "config override" : dir.config_path);
  VersionSelection selection = SelectVersions(config.version_policy(), dir.versions);
  if (selection.selected.empty() && selection.missing.empty())
    return NotFound("no version directories (numeric names such as '1') in " + dir.path);
  if (!selection.selected.empty()) return selection;
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
  return overridden ? InvalidArgument(what) : NotFound(what);
}

ModelRepositoryManagerImpl::Loads ModelRepositoryManagerImpl::LoadVersions(
    const ModelDirectory& dir, const inference::ModelConfig& config, bool overridden,
    const std::vector<int64_t>& to_load, const std::map<int64_t, uint64_t>& fingerprints,
    const Pinned& pinned, const std::shared_ptr<const OverrideDirectory>& files) {
  const std::shared_ptr<TrafficController> traffic = TrafficOf(dir.name);
  // New version numbers show as LOADING meanwhile; a reloading one stays READY.
  {
    std::unique_lock lock(mu_);
    ModelEntry& entry = models_[dir.name];
    entry.platform = std::string(loader_.PlatformFor(dir, config));
    entry.reason.clear();
    entry.unloaded = false;
    for (int64_t v : to_load)
      if (!pinned.serving.contains(v)) entry.versions[v] = VersionEntry{};
  }
  Loads loads;
  // The loader names the config in its errors: a config override's are the request's
  // `parameters.config`, not the repository's config.pbtxt.
  ModelDirectory load_dir = dir;
  if (overridden) load_dir.config_path = "parameters.config";
  // An unload asked for meanwhile stops a configured warm-up between runs: it would otherwise
  // wait behind this load (one model's tasks run in order), however long the warm-up.
  const std::shared_ptr<std::atomic<bool>> unload_asked = LoadStarts(dir.name);
  for (int64_t v : to_load) {
    const SteadyClock::time_point start = SteadyClock::now();
    // A reload of a serving version counts on into its statistics (LoadedModel::Options::stats).
    std::shared_ptr<ModelStats> stats;
    auto serving = pinned.serving.find(v);
    if (serving != pinned.serving.end() && serving->second.model != nullptr)
      stats = serving->second.model->stats();
    auto result = loader_.LoadVersion(load_dir, config, v, traffic, unload_asked.get(), stats);
    const double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
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
      loads.loaded[v] = {
          ModelState::kReady, "",   std::move(result->model), ms / 1000.0, warmed ? 0u : 1u,
          fingerprints.at(v), files};
      continue;
    }
    if (loads.first_failure.ok()) loads.first_failure = result.status();
    if (serving != pinned.serving.end()) {
      spdlog::error("model '{}' version {} failed to reload: {}; the loaded one goes on serving",
                    dir.name, v, result.status().message());
      loads.failed_reloads[v] = fingerprints.at(v);
      // Shown in the index for the repository's files; a config override's failure is its
      // request's answer.
      if (!overridden)
        loads.failed_reload_reasons[v] = client_paths_.Rewrite(result.status().message());
      continue;
    }
    spdlog::error("model '{}' version {} is UNAVAILABLE: {}", dir.name, v,
                  result.status().message());
    loads.loaded[v] = {ModelState::kUnavailable,
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
  return loads;
}

void ModelRepositoryManagerImpl::DropVanished(const ModelDirectory& dir, bool serving,
                                              Loads* loads) {
  std::vector<std::shared_ptr<LoadedModel>> vanished;
  for (auto it = loads->loaded.begin(); it != loads->loaded.end();) {
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
    if (loads->first_failure.ok()) loads->first_failure = NotFound(why);
    if (it->second.model) vanished.push_back(std::move(it->second.model));
    if (!serving) {
      // Nothing serves: an UNAVAILABLE row with the reason. (It stayed LOADING for good in
      // explicit mode, its load answered 200; probe 37.)
      it->second.state = ModelState::kUnavailable;
      it->second.reason = why;
      it->second.fingerprint = 0;  // tried again when its directory is back
      ++it;
    } else {
      it = loads->loaded.erase(it);  // what serves goes on serving, and the index shows it
    }
  }
  Retire(std::move(vanished), /*unload=*/false);  // never served: nothing holds them
}

ModelRepositoryManagerImpl::Replaced ModelRepositoryManagerImpl::SwapIn(
    const ModelDirectory& dir, const VersionSelection& selection,
    const std::map<int64_t, uint64_t>& fingerprints, bool loaded_any, const Pinned& pinned,
    Loads loads) {
  Replaced replaced;
  std::vector<int64_t> reloaded;  // serving versions replaced by a new instance
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
    auto fresh = loads.loaded.find(v);
    auto old = pinned.serving.find(v);
    if (fresh != loads.loaded.end()) {
      versions[v] = std::move(fresh->second);
      if (old != pinned.serving.end()) {
        reloaded.push_back(v);
        replaced.models.push_back(old->second.model);
        replaced.files.push_back(old->second.files);
      }
    } else if (old != pinned.serving.end()) {
      versions[v] = old->second;
      if (auto f = loads.failed_reloads.find(v); f != loads.failed_reloads.end()) {
        versions[v].failed_reload_fingerprint = f->second;
        versions[v].failed_reload_reason = loads.failed_reload_reasons[v];
      } else if (fingerprints.contains(v) && fingerprints.at(v) == old->second.fingerprint) {
        versions[v].failed_reload_fingerprint = 0;  // its files are back to what serves
        versions[v].failed_reload_reason.clear();
      }
    } else if (auto failed = pinned.failed_before.find(v); failed != pinned.failed_before.end()) {
      versions[v] = failed->second;  // failed before, from the same files: not retried
    }
  }
  // The versions the policy no longer selects retire only when every selected version serves
  // from what this reconcile meant it to: a new version that fails (now or at an earlier poll)
  // leaves the old ones serving, and so does a serving version that failed to reload from these
  // files, now or at an earlier poll that this one does not retry (it serves on from its old
  // files, under a config that did not load: nothing that serves changes for a failed load,
  // however many polls meet it).
  std::set<int64_t> ready;
  for (const auto& [v, e] : versions)
    if (e.state == ModelState::kReady) ready.insert(v);
  bool reload_failed = !loads.failed_reloads.empty();
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
  for (const auto& [v, e] : pinned.serving) {
    if (versions.contains(v)) continue;  // selected: kept or replaced above
    if (keep_deselected) {
      if (loaded_any)
        spdlog::warn("model '{}' version {} goes on serving: the version(s) to replace it failed",
                     dir.name, v);
      versions[v] = e;
    } else {
      replaced.models.push_back(e.model);
      replaced.files.push_back(e.files);
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
  return replaced;
}

Status ModelRepositoryManagerImpl::Reconcile(
    const ModelDirectory& dir, bool force,
    const std::optional<inference::ModelConfig>& config_override,
    const std::shared_ptr<const OverrideDirectory>& files) {
  // What serves now, pinned so that it keeps serving through the load, and what failed before.
  Pinned pinned = PinVersions(dir.name);
  // A failure before any version: with versions serving, they go on serving. Logged once while
  // a poll keeps meeting it (a symbolic-link loop, a broken config.pbtxt).
  const bool polled = !force && !config_override;
  const bool overridden = config_override.has_value();
  auto fail = [&](const Status& s) {
    return ModelFailed(dir, polled, overridden, !pinned.serving.empty(), s);
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
  auto selection = SelectVersionsOf(dir, config, overridden);
  if (!selection.ok()) return fail(selection.status());

  // Which versions to load, which to retire (reconcile_plan.h).
  ReconcileInputs plan_inputs;
  for (const auto& [v, e] : pinned.serving) {
    plan_inputs.serving[v] = e.fingerprint;
    if (e.failed_reload_fingerprint != 0)
      plan_inputs.failed_reload[v] = e.failed_reload_fingerprint;
  }
  for (const auto& [v, e] : pinned.failed_before) plan_inputs.failed_before[v] = e.fingerprint;
  plan_inputs.selected = selection->selected;
  for (int64_t v : selection->selected) {
    auto fp = ModelFingerprint(LocalFileSystem(), dir, v);
    plan_inputs.fingerprints[v] = fp.ok() ? *fp : UnreadableFingerprint(fp.status());
  }
  plan_inputs.force = force || overridden;
  const ReconcilePlan plan = PlanReconcile(plan_inputs);
  const std::map<int64_t, uint64_t>& fingerprints = plan_inputs.fingerprints;
  {
    std::unique_lock lock(mu_);
    if (auto it = models_.find(dir.name); it != models_.end()) it->second.last_failure.clear();
  }
  if (plan.nothing_to_do()) {  // nothing changed but, maybe, traffic.json
    ForgetRevertedReloads(dir.name, fingerprints);
    ApplyTraffic(dir);
    return Status::Ok();
  }

  Loads loads = LoadVersions(dir, config, overridden, plan.to_load, fingerprints, pinned, files);
  // A version whose directory was removed while it loaded is not swapped in: the repository no
  // longer has it, and what serves goes on serving. Swapped in, it retired the version it
  // replaced, and the next poll loaded that one again (probe 35).
  if (!files) DropVanished(dir, !pinned.serving.empty(), &loads);
  const Status first_failure = loads.first_failure;
  // The swap: one exclusive section; what it replaces is retired after it.
  Replaced replaced =
      SwapIn(dir, *selection, fingerprints, !plan.to_load.empty(), pinned, std::move(loads));
  for (const auto& m : replaced.models)
    spdlog::info("model '{}' version {}: retiring the replaced instance", dir.name, m->version());
  pinned = {};  // its references would hold up the retirement's wait for handles
  ApplyTraffic(dir);
  Retire(std::move(replaced.models), /*unload=*/false);
  replaced.files.clear();  // the last references, unless a version still serves from one
  return first_failure;
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
    const auto deadline = SteadyClock::now() + options_.unload_timeout;
    while (model.use_count() > 1 && SteadyClock::now() < deadline)
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
    model.reset();  // the last reference (unless a late request still holds one)
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

}  // namespace harrier
