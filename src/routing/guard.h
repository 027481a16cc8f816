// EvaluateGuard: is a rollout's candidate doing worse than its baseline? A pure function of the
// guard's configuration and the two versions' window figures (sliding_window.h), so its test
// is a table.
//
// Rules, in order:
//   1. The candidate needs guard.min_requests requests in its window, or the verdict is
//      kInsufficientData: nothing is judged on a handful of requests (the circuit breaker, not
//      the guard, handles a version that fails outright).
//   2. kBreached when any limit set is passed:
//        candidate error_rate > baseline error_rate + max_error_rate — always judged, with
//        kDefaultGuardMaxErrorRate when the guard sets no max_error_rate; the baseline's rate
//        counts as 0 while the baseline has fewer than min_requests requests;
//        candidate p99_us > max_p99_us;
//        candidate p99 / baseline p99 > max_p99_ratio — judged only when the baseline also has
//        min_requests requests (a baseline p99 below 1 µs counts as 1 µs).
//      All breaches found are reported, not only the first.
//   3. Otherwise kHolds — unless the ratio could not be judged for want of baseline requests,
//      which is kInsufficientData: a guard holds only when every limit it sets was checked.
// Errors are server-side failures only (RequestOutcome::server_failure): engine failures and
// timeouts, not a client's bad request.
// `reason` gives the figures either way, e.g. "candidate p99 1520 us is 1.90x baseline 800 us
// > max_p99_ratio 1.5", for the rollout's record and for the operator.
//
// Pure; any thread.
#pragma once

#include <string>

#include "routing/sliding_window.h"
#include "routing/traffic_policy.h"

namespace harrier {

// The error allowance of a guard without max_error_rate: a candidate whose server-side error
// rate is 5 points above its baseline's is rolled back even by a guard on latency alone.
inline constexpr double kDefaultGuardMaxErrorRate = 0.05;

struct GuardVerdict {
  enum class Outcome { kInsufficientData, kHolds, kBreached };

  Outcome outcome = Outcome::kInsufficientData;
  std::string reason;
  // The figures judged, kept with a rollback.
  WindowSnapshot candidate;
  WindowSnapshot baseline;
};

GuardVerdict EvaluateGuard(const GuardConfig& guard, const WindowSnapshot& candidate,
                           const WindowSnapshot& baseline);

// "insufficient data", "holds", "breached".
const char* GuardOutcomeName(GuardVerdict::Outcome outcome);

}  // namespace harrier
