// TokenBucket: a lock-free token bucket (rate per second, burst) for rate limits, and RateLimit,
// its configuration value ("RPS[:BURST]").
//
// The bucket is kept as GCRA (the generic cell rate algorithm): one atomic "theoretical arrival
// time" (TAT) instead of a token count and a refill timestamp, so taking a token is one load and
// one compare-and-swap, with no lock and no background refill. A bucket that has been idle long
// enough to be full holds TAT <= now, which is what a fresh bucket holds: forgetting it loses
// nothing (ClientRateLimiter relies on this when it evicts).
//
// Time comes from the caller (`now`), so tests drive it with a fake clock.
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "harrier/clock.h"
#include "harrier/status.h"

namespace harrier {

// A rate limit: `per_second` requests per second on average, up to `burst` at once.
// per_second == 0 means "no limit".
struct RateLimit {
  double per_second = 0;
  int64_t burst = 0;  // >= 1 when per_second > 0

  bool enabled() const { return per_second > 0; }
  // "50 req/s" or "50 req/s, burst 100" (the burst only when it is not the default).
  std::string ToString() const;
  // The default burst for a rate: one second's worth, at least 1.
  static int64_t DefaultBurst(double per_second);
};

// Parses "RPS" or "RPS:BURST" (e.g. "50", "0.5:1", "200:400"); "0" and "off" mean no limit.
// kInvalidArgument for anything else (negative, not a number, rate over 1e9/s, burst < 1).
StatusOr<RateLimit> ParseRateLimit(std::string_view text);

class TokenBucket {
 public:
  // REQUIRES: limit.enabled(). The bucket starts full.
  explicit TokenBucket(const RateLimit& limit);

  TokenBucket(const TokenBucket&) = delete;
  TokenBucket& operator=(const TokenBucket&) = delete;

  // Takes one token. Returns false, without taking anything, when the bucket is empty; then
  // `*retry_after` (if not null) is set to the time until a token is available.
  bool TryAcquire(Clock::time_point now, Clock::duration* retry_after = nullptr);

  // Would TryAcquire(now) succeed? Takes nothing; `*retry_after` as for TryAcquire.
  bool WouldAcquire(Clock::time_point now, Clock::duration* retry_after = nullptr) const;

  // Gives back a token taken by TryAcquire (when a later check rejected the same request).
  // Never raises the bucket above its burst.
  void Refund();

  // Forgets all use: the bucket is full again.
  void Reset() { tat_ns_.store(kEmptyHistory, std::memory_order_relaxed); }

  // True when the bucket is full at `now` (nothing to remember).
  bool IsFull(Clock::time_point now) const;

  // Whole tokens available at `now` (0..burst); for tests and statistics.
  int64_t Available(Clock::time_point now) const;

  const RateLimit& limit() const { return limit_; }

 private:
  static constexpr int64_t kEmptyHistory = INT64_MIN / 2;

  // Constant after construction.
  const RateLimit limit_;
  const int64_t interval_ns_;   // 1e9 / per_second: the cost of one token
  const int64_t tolerance_ns_;  // burst * interval_ns_: how far TAT may run ahead of now

  std::atomic<int64_t> tat_ns_{kEmptyHistory};  // theoretical arrival time, clock ns
};

}  // namespace harrier
