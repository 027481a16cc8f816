#include "auth/api_key_store.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/file_read.h"
#include "server/sha256.h"

namespace harrier::auth {

StatusOr<std::unique_ptr<ApiKeyStore>> ApiKeyStore::Create(const Options& options) {
  std::unique_ptr<ApiKeyStore> store(new ApiKeyStore(options));
  {
    std::lock_guard lock(store->mu_);
    if (Status loaded = store->Load(); !loaded.ok()) return loaded;
  }
  if (options.poll_interval.count() > 0)
    store->poller_ = std::thread([s = store.get()] { s->Poll(); });
  return store;
}

ApiKeyStore::ApiKeyStore(const Options& options)
    : options_(options), keys_(std::make_shared<const KeySet>()) {}

ApiKeyStore::~ApiKeyStore() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

const ApiKeyStore::Key* ApiKeyStore::Find(const KeySet& keys, std::string_view presented) {
  const Sha256Digest digest = Sha256(presented);
  auto it = keys.by_digest.find(digest);
  if (it == keys.by_digest.end()) return nullptr;
  const Key& key = keys.keys[it->second];
  return DigestsEqual(key.entry.sha256, digest) ? &key : nullptr;
}

StatusOr<std::vector<ApiKeyEntry>> ReadApiKeyFile(const std::string& path) {
  // A regular file of a bounded size: /dev/zero, or a rotation's link swapped to it, grew the
  // process by hundreds of MB a second and then said "not JSON" (probe 74).
  StatusOr<std::string> text = ReadRegularFile(path, kMaxApiKeyFileBytes);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound)
      return NotFound("cannot read the API key file '" + path + "'");
    return text.status().WithContext("API key file");
  }
  StatusOr<std::vector<ApiKeyEntry>> parsed = ParseApiKeyFile(*text);
  if (!parsed.ok()) return parsed.status().WithContext(path);
  return parsed;
}

Status ApiKeyStore::Load() {
  struct stat st {};
  if (::stat(options_.path.c_str(), &st) != 0) {
    return NotFound("cannot read the API key file '" + options_.path + "'");
  }
  stamp_ = {st.st_ino, st.st_size,
            int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + int64_t{st.st_mtim.tv_nsec}};
  StatusOr<std::vector<ApiKeyEntry>> parsed = ReadApiKeyFile(options_.path);
  if (!parsed.ok()) return parsed.status();

  const std::shared_ptr<const KeySet> old = keys_.load(std::memory_order_acquire);
  std::unordered_map<std::string_view, const Key*> old_by_id;
  old_by_id.reserve(old->keys.size());
  for (const Key& was : old->keys) old_by_id.emplace(was.entry.id, &was);
  auto next = std::make_shared<KeySet>();
  next->keys.reserve(parsed->size());
  next->by_digest.reserve(parsed->size());
  for (ApiKeyEntry& entry : *parsed) {
    Key key;
    // The same id with the same limit keeps its bucket: a rotation does not hand a burst back.
    if (entry.rate_limit.enabled()) {
      auto was = old_by_id.find(entry.id);
      if (was != old_by_id.end() && was->second->bucket &&
          was->second->entry.rate_limit.per_second == entry.rate_limit.per_second &&
          was->second->entry.rate_limit.burst == entry.rate_limit.burst) {
        key.bucket = was->second->bucket;
      }
      if (!key.bucket) key.bucket = std::make_shared<TokenBucket>(entry.rate_limit);
    }
    auto& counters = counters_[entry.id];
    if (!counters) counters = std::make_shared<KeyCounters>();
    key.counters = counters;
    key.entry = std::move(entry);
    next->by_digest.emplace(key.entry.sha256, next->keys.size());  // unique: the parser checks
    next->keys.push_back(std::move(key));
  }
  // A key removed from the file takes its series with it: ids that come and go across
  // rotations must not add series forever. (One that comes back starts again from 0, a counter
  // reset Prometheus' rate() handles.)
  std::unordered_set<std::string_view> ids;
  ids.reserve(next->keys.size());
  for (const Key& k : next->keys) ids.insert(k.entry.id);
  std::erase_if(counters_, [&ids](const auto& entry) { return !ids.contains(entry.first); });
  const size_t count = next->keys.size();
  keys_.store(std::move(next), std::memory_order_release);
  spdlog::info("auth: {} API key(s) from '{}'", count, options_.path);
  return Status::Ok();
}

bool ApiKeyStore::CheckForChange() {
  std::lock_guard lock(mu_);
  struct stat st {};
  FileStamp now;
  if (::stat(options_.path.c_str(), &st) == 0) {
    now = {st.st_ino, st.st_size,
           int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + int64_t{st.st_mtim.tv_nsec}};
  }
  if (now == stamp_) return false;
  if (Status loaded = Load(); !loaded.ok()) {
    stamp_ = now;  // logged once per change of the file, not on every poll
    failed_reloads_.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("auth: the API key file changed but is not used, the previous keys stay: {}",
                  loaded.message());
    return false;
  }
  reloads_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

std::vector<std::pair<std::string, std::shared_ptr<KeyCounters>>> ApiKeyStore::AllCounters() const {
  std::lock_guard lock(mu_);
  return {counters_.begin(), counters_.end()};
}

void ApiKeyStore::Poll() {
  std::unique_lock lock(mu_);
  while (!stop_cv_.wait_for(lock, options_.poll_interval, [this] { return stop_; })) {
    lock.unlock();
    CheckForChange();
    lock.lock();
  }
}

}  // namespace harrier::auth
