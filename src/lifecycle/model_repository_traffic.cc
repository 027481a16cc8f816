#include <spdlog/spdlog.h>

#include <charconv>
#include <filesystem>

#include "lifecycle/forced_version_model.h"
#include "lifecycle/model_repository_manager_impl.h"
#include "lifecycle/shadowed_model.h"
#include "repository/file_system.h"
#include "routing/traffic_policy.h"

namespace harrier {

namespace {

// A traffic.json larger than this is not read (a policy is a few hundred bytes; PUT's body has
// --max-body-bytes): a stray large file costs one stat per poll and one log line.
constexpr uint64_t kMaxTrafficFileBytes = 1 << 20;

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

}  // namespace

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

}  // namespace harrier
