#include "scheduler/rate_limiter.h"

#include <algorithm>
#include <functional>

namespace harrier {
namespace {

// Small tables use one shard so that the bound is exact; large ones spread the locks.
constexpr size_t kShardsForLargeTables = 16;
constexpr size_t kLargeTable = 1024;

}  // namespace

ClientRateLimiter::ClientRateLimiter(const Options& options) : options_(options) {
  const size_t max_clients = std::max<size_t>(1, options_.max_clients);
  const size_t shards = max_clients >= kLargeTable ? kShardsForLargeTables : 1;
  per_shard_capacity_ = (max_clients + shards - 1) / shards;
  shards_.reserve(shards);
  for (size_t i = 0; i < shards; ++i) {
    shards_.push_back(std::make_unique<Shard>());
    shards_.back()->index.reserve(std::min<size_t>(per_shard_capacity_, 4096));
  }
}

ClientRateLimiter::Shard& ClientRateLimiter::ShardFor(std::string_view client) const {
  if (shards_.size() == 1) return *shards_[0];
  // The index hashes the key again; the shard picks bits the table's own hash is unlikely to
  // correlate with by mixing once more.
  const size_t h = std::hash<std::string_view>{}(client);
  return *shards_[(h ^ (h >> 29)) % shards_.size()];
}

bool ClientRateLimiter::TryAcquire(std::string_view client, Clock::time_point now,
                                   Clock::duration* retry_after) {
  Shard& shard = ShardFor(client);
  std::lock_guard lock(shard.mu);
  auto it = shard.index.find(client);
  if (it != shard.index.end()) {
    shard.lru.splice(shard.lru.begin(), shard.lru, it->second);
    return it->second->bucket.TryAcquire(now, retry_after);
  }
  if (shard.lru.size() >= per_shard_capacity_) {
    // Reuse the least recently used entry for the new key: no allocation for the list node.
    auto victim = std::prev(shard.lru.end());
    shard.index.erase(victim->key);
    ++shard.evictions;
    victim->key.assign(client);
    victim->bucket.Reset();
    shard.lru.splice(shard.lru.begin(), shard.lru, victim);
  } else {
    shard.lru.emplace_front(options_.limit);
    shard.lru.front().key.assign(client);
  }
  shard.index.emplace(shard.lru.front().key, shard.lru.begin());
  return shard.lru.front().bucket.TryAcquire(now, retry_after);
}

bool ClientRateLimiter::WouldAcquire(std::string_view client, Clock::time_point now,
                                     Clock::duration* retry_after) const {
  Shard& shard = ShardFor(client);
  std::lock_guard lock(shard.mu);
  auto it = shard.index.find(client);
  return it == shard.index.end() || it->second->bucket.WouldAcquire(now, retry_after);
}

void ClientRateLimiter::Refund(std::string_view client) {
  Shard& shard = ShardFor(client);
  std::lock_guard lock(shard.mu);
  auto it = shard.index.find(client);
  if (it != shard.index.end()) it->second->bucket.Refund();
}

size_t ClientRateLimiter::size() const {
  size_t n = 0;
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->mu);
    n += shard->lru.size();
  }
  return n;
}

uint64_t ClientRateLimiter::evictions() const {
  uint64_t n = 0;
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->mu);
    n += shard->evictions;
  }
  return n;
}

}  // namespace harrier
