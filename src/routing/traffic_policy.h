// TrafficPolicy: how one model's requests are shared between its versions — the value behind
// issue 12's traffic policy document (docs/routing.md describes every field).
//
//   {"weights": {"1": 90, "2": 10},              version -> weight (the split)
//    "sticky_header": "x-user-id",               same header value -> same version
//    "shadow": {"version": 3, "percent": 0.5},   copy 0.5% of requests to version 3
//    "rollout": {"candidate": 2, "steps": [1, 10, 50, 100], "dwell_seconds": 300},
//    "guard": {"window_seconds": 60, "max_p99_ratio": 1.5, "max_error_rate": 0.01},
//    "breaker": {"failure_threshold": 5, "open_seconds": 30}}
//
// ParseTrafficPolicy checks the document on its own (types, ranges, the rules between fields)
// and fills the defaults in, so that a parsed policy is complete: TrafficPolicyToJson writes
// every field, and parsing that text gives an equal policy. Whether the versions named exist is
// a separate question (ValidateAgainstVersions), asked against the model's served versions.
//
// Value types; no thread safety of their own (copy them).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harrier/status.h"

namespace harrier {

// Version number -> weight. A version's share of the traffic is its weight over the sum of the
// weights; weight 0 names a version that gets no traffic.
using VersionWeights = std::map<int64_t, int64_t>;

// Mirrors a share of the requests to another version; its answers are discarded.
struct ShadowConfig {
  int64_t version = 0;
  double percent = 0;  // 0..100, fractions allowed (0.5 = one request in 200)

  bool operator==(const ShadowConfig&) const = default;
};

// A staged rollout of `candidate`: it gets steps_percent[i] of the traffic and the versions of
// `weights` (the baseline) the rest, in their proportions; each step lasts dwell_seconds
// (rollout.h has the state machine).
struct RolloutConfig {
  int64_t candidate = 0;
  std::vector<double> steps_percent;  // strictly increasing, in (0, 100], last = 100
  int64_t dwell_seconds = 0;          // > 0

  bool operator==(const RolloutConfig&) const = default;
};

// When a rollout's candidate is worse than its baseline (guard.h has the rules). The figures
// come from a sliding window of window_seconds per version (sliding_window.h).
struct GuardConfig {
  int64_t window_seconds = 0;  // > 0, at most 3600
  int64_t min_requests = 50;   // requests needed in a window before it is judged
  // At least one of the three limits is set.
  std::optional<double> max_p99_ratio;  // > 1: candidate p99 / baseline p99
  // 0..1: candidate errors / requests above the baseline's; unset: the guard still judges the
  // error rate, with kDefaultGuardMaxErrorRate (guard.h).
  std::optional<double> max_error_rate;
  std::optional<int64_t> max_p99_us;  // > 0: candidate p99, absolute

  bool operator==(const GuardConfig&) const = default;
};

// A circuit breaker per version (circuit_breaker.h). It opens when the failures in the last
// window_seconds reach failure_threshold, or when they are at least failure_rate of at least
// min_requests requests; whichever is set (both may be). Without either in the document,
// failure_threshold is 5.
struct BreakerConfig {
  static constexpr int64_t kDefaultFailureThreshold = 5;

  int64_t failure_threshold = kDefaultFailureThreshold;  // >= 1; 0 = not used
  std::optional<double> failure_rate;                    // (0, 1]
  int64_t min_requests = 20;                             // >= 1; for failure_rate only
  int64_t window_seconds = 10;                           // > 0, at most 3600
  int64_t open_seconds = 30;     // > 0: refuses everything this long, then half-open
  int64_t half_open_probes = 1;  // >= 1: requests let through while half-open

  bool operator==(const BreakerConfig&) const = default;
};

struct TrafficPolicy {
  VersionWeights weights;     // at least one weight > 0
  std::string sticky_header;  // lower case; empty = not sticky
  std::optional<ShadowConfig> shadow;
  std::optional<RolloutConfig> rollout;
  std::optional<GuardConfig> guard;  // only with a rollout
  std::optional<BreakerConfig> breaker;

  bool operator==(const TrafficPolicy&) const = default;
};

// Limits on a document, so that weight arithmetic (rollout.h scales weights by 10,000) cannot
// overflow and a policy stays small.
inline constexpr int64_t kMaxVersionWeight = 1'000'000;
inline constexpr size_t kMaxWeightedVersions = 100;
inline constexpr size_t kMaxRolloutSteps = 100;
inline constexpr int64_t kMaxWindowSeconds = 3600;

// Parses and checks a traffic policy document. kInvalidArgument, with a message that names the
// field ("traffic policy: rollout.steps[2]: ..."), for: JSON that does not parse, a field that
// is unknown, repeated or of the wrong type, a version key that is not a positive integer in
// canonical form ("1", not "01" or "+1"), a weight out of 0..kMaxVersionWeight, weights that
// are all zero, a value out of its range, rollout steps that do not increase or do not end at
// 100, a rollout without a baseline (a version other than the candidate with weight > 0), a
// guard without a rollout or without a limit. Defaults are filled in (see the structs above).
StatusOr<TrafficPolicy> ParseTrafficPolicy(std::string_view json);

// The document, every field written (defaults included), versions ascending.
// ParseTrafficPolicy(TrafficPolicyToJson(p)) == p for every parsed p.
std::string TrafficPolicyToJson(const TrafficPolicy& policy);

// Checks that every version the policy sends traffic to is one of `available` (the model's
// served versions): every version with weight > 0, the shadow version and the rollout
// candidate. kInvalidArgument naming the field and the served versions otherwise.
Status ValidateAgainstVersions(const TrafficPolicy& policy, const std::vector<int64_t>& available);

}  // namespace harrier
