// The status page's data (docs/dashboard.md): GET /v2/dashboard/summary answers
// DashboardSummaryJson() of every model version the repository index lists.
//
// Read from the objects the Prometheus exposition reads (ModelMetrics' histograms and
// counters, Triton's statistics counters, the scheduler's queue depth), when the page asks;
// nothing is recorded for it on the request path.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "harrier/model_manager.h"
#include "observability/histogram.h"

namespace harrier {

// One row of the summary: a version's state and, when it is loaded, its cumulative figures.
struct DashboardVersion {
  ModelVersionState state;
  bool loaded = false;                 // false: only `state` is meaningful
  uint64_t success_count = 0;          // harrier_request_success_total
  uint64_t failure_count = 0;          // harrier_request_failure_total, all reasons
  uint64_t queue_depth = 0;            // harrier_queue_depth
  int64_t in_flight = 0;               // harrier_inflight_requests
  HistogramSnapshot request_duration;  // harrier_request_duration_seconds, in nanoseconds
  std::string traffic;  // the traffic policy's note for the version (docs/routing.md); "" = none
  // A version that generates text (docs/generation.md): its engine's token counter and the
  // time-to-first-token histogram (harrier_generated_tokens_total,
  // harrier_time_to_first_token_seconds; the same bounds as request_duration).
  bool generative = false;
  uint64_t generated_tokens = 0;
  HistogramSnapshot time_to_first_token;
};

// Prometheus' histogram_quantile() over one histogram: `counts` per bucket (not cumulative,
// the last one +Inf), `upper_bounds` the finite bounds (one fewer). Linear interpolation inside
// the bucket the rank falls in, from 0 for the first bucket; a rank in the +Inf bucket gives
// the highest finite bound. NaN when there are no observations or `q` is outside [0, 1].
double HistogramQuantile(double q, std::span<const uint64_t> upper_bounds,
                         std::span<const uint64_t> counts);

// {"latency_bounds_seconds":[..],"versions":[{"name":..,"version":..,"state":..,"reason":..,
//  "success":..,"failure":..,"queue_depth":..,"in_flight":..,"traffic":..,"p50_seconds":..,
//  "p99_seconds":..,"duration_buckets":[..]},..]}: cumulative counters since the version
// loaded, P50/P99 over its lifetime (null without observations), and the per-bucket counts so
// that the page computes P50/P99 over its polling interval from their differences. A version
// that generates text adds "generated_tokens" (the page's tokens/s), "ttft_p50_seconds" and
// "ttft_p99_seconds" (lifetime; null without observations).
// `latency_bounds` are the request-duration histogram's bounds in nanoseconds.
std::string DashboardSummaryJson(const std::vector<DashboardVersion>& versions,
                                 std::span<const uint64_t> latency_bounds);

}  // namespace harrier
