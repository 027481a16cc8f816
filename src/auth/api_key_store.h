// ApiKeyStore: the API keys in force (from --api-key-file), looked up by the key a client
// presents, and re-read when the file changes so that keys rotate without a restart.
//
// A presented key is hashed (SHA-256) and its digest compared with every key's digest, each
// comparison in constant time (DigestsEqual, CRYPTO_memcmp) and with no early exit, so that
// neither the time of a refusal nor its position in the file tells a client anything about the
// digests. Keys are served from an immutable snapshot (KeySet) that a reload replaces whole: a
// request sees the old keys or the new ones, never a mixture.
//
// Reload: CheckForChange() stats the file (inode, size, modification time) and re-reads it when
// any of them moved — an editor's in-place write and an atomic rename (`mv new keys.json`, or a
// Kubernetes Secret's symlink swap) alike. A file that does not parse, or cannot be read, keeps
// the keys in force and logs why (once per change of the file); a later good file replaces
// them. With Options::poll_interval > 0, a thread of the store's own calls it at that period.
// Per-key state survives a reload: the token bucket of a key whose id and rate limit are
// unchanged, and its counters by id.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "auth/api_key_file.h"
#include "harrier/status.h"
#include "scheduler/token_bucket.h"

namespace harrier::auth {

// Per-key request counts (harrier_auth_requests_total{key,outcome}).
struct KeyCounters {
  std::atomic<uint64_t> allowed{0};
  std::atomic<uint64_t> forbidden{0};     // the key lacks the route's scope (403)
  std::atomic<uint64_t> rate_limited{0};  // over the key's own rate_limit (429)
};

// The largest API key file read: far above 100,000 keys (~200 bytes each).
inline constexpr std::size_t kMaxApiKeyFileBytes = std::size_t{64} << 20;

// The keys of the file at `path`: a regular file of at most kMaxApiKeyFileBytes, parsed by
// ParseApiKeyFile. kNotFound when it cannot be read; kInvalidArgument naming the path or what
// is wrong with it.
StatusOr<std::vector<ApiKeyEntry>> ReadApiKeyFile(const std::string& path);

class ApiKeyStore {
 public:
  struct Options {
    std::string path;  // the key file (JSON, api_key_file.h)
    // How often the file is checked for a change; 0: never by the store itself (the caller
    // calls CheckForChange(), as the unit tests do). Default 2 s.
    std::chrono::milliseconds poll_interval{2000};
  };

  // One key as served now.
  struct Key {
    ApiKeyEntry entry;
    std::shared_ptr<TokenBucket> bucket;  // null: no rate limit of its own
    std::shared_ptr<KeyCounters> counters;
  };
  // The keys of one snapshot, in the file's order, indexed by digest.
  struct KeySet {
    std::vector<Key> keys;
    // Digest -> index in `keys`. The first bytes of a SHA-256 digest hash it well enough.
    struct DigestHash {
      size_t operator()(const Sha256Digest& d) const {
        size_t h = 0;
        std::memcpy(&h, d.data(), sizeof(h));
        return h;
      }
    };
    std::unordered_map<Sha256Digest, size_t, DigestHash> by_digest;

    const Key& at(size_t i) const { return keys.at(i); }
    size_t size() const { return keys.size(); }
  };

  // Reads and parses the file. kInvalidArgument for a file that does not parse (the message
  // says where), kNotFound for one that cannot be read. Starts the polling thread.
  static StatusOr<std::unique_ptr<ApiKeyStore>> Create(const Options& options);
  ~ApiKeyStore();  // stops the polling thread
  ApiKeyStore(const ApiKeyStore&) = delete;
  ApiKeyStore& operator=(const ApiKeyStore&) = delete;

  // The keys in force. Hold the snapshot only for the length of one request's check.
  std::shared_ptr<const KeySet> keys() const { return keys_.load(std::memory_order_acquire); }

  // The key of `keys` whose digest is SHA-256(presented), or null: one hash lookup, whatever
  // the number of keys (probe 47: a comparison with every key cost 1 ms a request at 30,000
  // keys). What its time depends on is the digest of the presented bytes, which tells an
  // attacker nothing about any key's (SHA-256 is one-way); the match is confirmed with a
  // constant-time comparison.
  static const Key* Find(const KeySet& keys, std::string_view presented);

  // Re-reads the file if it changed since the last look. Returns true when the keys were
  // replaced; false when the file is unchanged, or changed and failed (logged, old keys kept).
  bool CheckForChange();

  // Successful reloads after the first read, and failed ones (harrier_auth_key_file_reloads_total).
  uint64_t reloads() const { return reloads_.load(std::memory_order_relaxed); }
  uint64_t failed_reloads() const { return failed_reloads_.load(std::memory_order_relaxed); }
  // Every key id seen since start with its counters, in id order (for the metrics).
  std::vector<std::pair<std::string, std::shared_ptr<KeyCounters>>> AllCounters() const;
  const std::string& path() const { return options_.path; }

 private:
  struct FileStamp {
    ino_t inode = 0;
    off_t size = -1;
    int64_t mtime_ns = 0;
    bool operator==(const FileStamp&) const = default;
  };

  explicit ApiKeyStore(const Options& options);
  // Reads, parses and installs the file; the old keys stay on failure.
  Status Load();
  void Poll();

  // Constant after construction.
  const Options options_;

  std::atomic<std::shared_ptr<const KeySet>> keys_;
  std::atomic<uint64_t> reloads_{0};
  std::atomic<uint64_t> failed_reloads_{0};

  mutable std::mutex mu_;  // serializes Load(); guards the fields below
  FileStamp stamp_;        // guarded by mu_: what the last look saw
  std::map<std::string, std::shared_ptr<KeyCounters>, std::less<>> counters_;  // guarded by mu_
  bool stop_ = false;                                                          // guarded by mu_
  std::condition_variable stop_cv_;
  std::thread poller_;
};

}  // namespace harrier::auth
