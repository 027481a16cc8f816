#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>

#include "core/utf8.h"
#include "lifecycle/model_repository_manager_impl.h"
#include "repository/config_json.h"
#include "repository/config_validation.h"

namespace harrier {

namespace {

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

}  // namespace

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
    if (dirs.status().message() != poll_failure_) {
      poll_failure_ = dirs.status().message();
      spdlog::error(
          "model repository poll: {} (the models go on serving; logged again if this "
          "changes)",
          poll_failure_);
    }
    return;
  }
  if (!poll_failure_.empty()) {
    spdlog::info("model repository poll: the repository can be listed again");
    poll_failure_.clear();
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

}  // namespace harrier
