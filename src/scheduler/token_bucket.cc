#include "scheduler/token_bucket.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace harrier {
namespace {

constexpr double kMaxPerSecond = 1e9;  // one token per nanosecond
constexpr int64_t kMaxBurst = 1'000'000'000;

int64_t ToNs(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::string FormatRate(double per_second) {
  char buf[32];
  if (per_second == std::floor(per_second) && per_second < 1e15) {
    std::snprintf(buf, sizeof(buf), "%.0f", per_second);
  } else {
    std::snprintf(buf, sizeof(buf), "%g", per_second);
  }
  return buf;
}

}  // namespace

int64_t RateLimit::DefaultBurst(double per_second) {
  return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(per_second)), 1, kMaxBurst);
}

std::string RateLimit::ToString() const {
  if (!enabled()) return "no limit";
  std::string s = FormatRate(per_second) + " req/s";
  if (burst != DefaultBurst(per_second)) s += ", burst " + std::to_string(burst);
  return s;
}

StatusOr<RateLimit> ParseRateLimit(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument("rate limit '" + std::string(text) + "': " + std::string(why) +
                           " (expected RPS or RPS:BURST, e.g. 50 or 50:100; 0 or off: no limit)");
  };
  if (text == "off" || text == "0") return RateLimit{};
  const size_t colon = text.find(':');
  const std::string rate_text(text.substr(0, colon));
  // std::from_chars for double is in GCC 11+; strtod would accept locale-dependent forms.
  double rate = 0;
  auto [end, ec] = std::from_chars(rate_text.data(), rate_text.data() + rate_text.size(), rate);
  if (ec != std::errc() || end != rate_text.data() + rate_text.size() || rate_text.empty())
    return bad("the rate is not a number");
  if (!std::isfinite(rate) || rate < 0) return bad("the rate must be a positive number");
  if (rate > kMaxPerSecond) return bad("the rate is over 1e9 per second");
  if (rate == 0) {
    if (colon != std::string_view::npos) return bad("a zero rate takes no burst");
    return RateLimit{};
  }
  RateLimit limit{rate, RateLimit::DefaultBurst(rate)};
  if (colon != std::string_view::npos) {
    std::string_view burst_text = text.substr(colon + 1);
    int64_t burst = 0;
    auto [bend, bec] =
        std::from_chars(burst_text.data(), burst_text.data() + burst_text.size(), burst);
    if (bec != std::errc() || bend != burst_text.data() + burst_text.size() || burst_text.empty())
      return bad("the burst is not a whole number");
    if (burst < 1 || burst > kMaxBurst) return bad("the burst must be between 1 and 1e9");
    limit.burst = burst;
  }
  return limit;
}

TokenBucket::TokenBucket(const RateLimit& limit)
    : limit_(limit),
      interval_ns_(
          std::max<int64_t>(1, static_cast<int64_t>(std::llround(1e9 / limit.per_second)))),
      tolerance_ns_(limit.burst * interval_ns_) {}

bool TokenBucket::TryAcquire(Clock::time_point now, Clock::duration* retry_after) {
  const int64_t now_ns = ToNs(now);
  int64_t tat = tat_ns_.load(std::memory_order_relaxed);
  while (true) {
    // Each token pushes TAT one interval further; the bucket is empty when TAT would run more
    // than `burst` intervals ahead of now.
    const int64_t next = std::max(tat, now_ns) + interval_ns_;
    if (next - now_ns > tolerance_ns_) {
      if (retry_after != nullptr)
        *retry_after = std::chrono::duration_cast<Clock::duration>(
            std::chrono::nanoseconds(next - now_ns - tolerance_ns_));
      return false;
    }
    if (tat_ns_.compare_exchange_weak(tat, next, std::memory_order_relaxed)) return true;
  }
}

bool TokenBucket::WouldAcquire(Clock::time_point now, Clock::duration* retry_after) const {
  const int64_t now_ns = ToNs(now);
  const int64_t next = std::max(tat_ns_.load(std::memory_order_relaxed), now_ns) + interval_ns_;
  if (next - now_ns <= tolerance_ns_) return true;
  if (retry_after != nullptr)
    *retry_after = std::chrono::duration_cast<Clock::duration>(
        std::chrono::nanoseconds(next - now_ns - tolerance_ns_));
  return false;
}

void TokenBucket::Refund() {
  tat_ns_.fetch_sub(interval_ns_, std::memory_order_relaxed);
}

bool TokenBucket::IsFull(Clock::time_point now) const {
  return tat_ns_.load(std::memory_order_relaxed) <= ToNs(now);
}

int64_t TokenBucket::Available(Clock::time_point now) const {
  const int64_t now_ns = ToNs(now);
  const int64_t ahead = std::max<int64_t>(0, tat_ns_.load(std::memory_order_relaxed) - now_ns);
  return std::clamp<int64_t>((tolerance_ns_ - ahead) / interval_ns_, 0, limit_.burst);
}

}  // namespace harrier
