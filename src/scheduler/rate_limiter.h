// ClientRateLimiter: one TokenBucket per client key (X-Client-Id), in a table of bounded size.
//
// Client keys come from the network, so the table must not grow with them: it holds at most
// `max_clients` keys and evicts the least recently seen one to make room. Evicting a key whose
// bucket has refilled loses nothing (a fresh bucket is full); evicting one that is still
// draining hands that client a fresh burst — the documented price of a bounded table. A client
// that mints a new key per request is not held back by any per-key limit; the per-model limit,
// the in-flight limit and overload protection still are.
//
// The table is split into shards, each with its own short lock, so that concurrent requests
// from different clients rarely wait for each other. A lookup of a known key allocates nothing.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "harrier/clock.h"
#include "scheduler/token_bucket.h"

namespace harrier {

class ClientRateLimiter {
 public:
  struct Options {
    RateLimit limit;             // per client key; REQUIRES limit.enabled()
    size_t max_clients = 65536;  // keys remembered at once (>= 1)
  };

  explicit ClientRateLimiter(const Options& options);
  ClientRateLimiter(const ClientRateLimiter&) = delete;
  ClientRateLimiter& operator=(const ClientRateLimiter&) = delete;

  // Takes a token from `client`'s bucket (created full on first sight). On false,
  // `*retry_after` (if not null) is the time until the client has a token again.
  bool TryAcquire(std::string_view client, Clock::time_point now,
                  Clock::duration* retry_after = nullptr);

  // Would TryAcquire(client, now) succeed? Takes nothing, creates no entry and leaves the
  // recency order alone (an unknown client has a full bucket: true).
  bool WouldAcquire(std::string_view client, Clock::time_point now,
                    Clock::duration* retry_after = nullptr) const;

  // Gives back a token TryAcquire took for `client` (a later check rejected the request).
  // Does nothing if the key was evicted meanwhile.
  void Refund(std::string_view client);

  const RateLimit& limit() const { return options_.limit; }
  // Keys held now (<= max_clients) and keys evicted so far; for statistics and tests.
  size_t size() const;
  uint64_t evictions() const;

 private:
  struct Entry {
    explicit Entry(const RateLimit& limit) : bucket(limit) {}
    std::string key;
    TokenBucket bucket;
  };
  struct Shard {
    mutable std::mutex mu;
    // Most recently used first. std::list: entries never move, so `index` may point at keys.
    std::list<Entry> lru;                                                    // guarded by mu
    std::unordered_map<std::string_view, std::list<Entry>::iterator> index;  // guarded by mu
    uint64_t evictions = 0;                                                  // guarded by mu
  };

  Shard& ShardFor(std::string_view client) const;

  // Constant after construction.
  const Options options_;
  size_t per_shard_capacity_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace harrier
