#include "observability/dashboard_summary.h"

#include <cmath>
#include <limits>
#include <string_view>
#include <utility>

#include "core/json_writer.h"

namespace harrier {
namespace {

constexpr double kNsPerSecond = 1e9;

// A number, or null for NaN (JSON has no NaN).
void AppendNumberOrNull(std::string* out, double value) {
  if (std::isnan(value)) {
    out->append("null");
  } else {
    AppendJsonNumber(out, value);
  }
}

// `,"<prefix>p50_seconds":..,"<prefix>p99_seconds":..` of a histogram in nanoseconds: null
// without observations, or when `counts` is not a histogram over `bounds` (a version not loaded).
void AppendP50AndP99(std::string* out, std::string_view prefix, std::span<const uint64_t> counts,
                     std::span<const uint64_t> bounds) {
  const bool has_histogram = counts.size() == bounds.size() + 1;
  for (const auto& [name, q] : {std::pair{"p50_seconds", 0.5}, std::pair{"p99_seconds", 0.99}}) {
    out->append(",\"");
    out->append(prefix);
    out->append(name);
    out->append("\":");
    AppendNumberOrNull(out, has_histogram ? HistogramQuantile(q, bounds, counts) / kNsPerSecond
                                          : std::numeric_limits<double>::quiet_NaN());
  }
}

}  // namespace

double HistogramQuantile(double q, std::span<const uint64_t> upper_bounds,
                         std::span<const uint64_t> counts) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  if (!(q >= 0 && q <= 1) || counts.size() != upper_bounds.size() + 1) return kNaN;
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  if (total == 0) return kNaN;
  const double rank = q * static_cast<double>(total);
  uint64_t below = 0;  // observations in the buckets before i
  for (size_t i = 0; i < counts.size(); ++i) {
    const uint64_t cumulative = below + counts[i];
    if (static_cast<double>(cumulative) >= rank && counts[i] > 0) {
      if (i == upper_bounds.size()) return static_cast<double>(upper_bounds.back());
      const double lower = i == 0 ? 0.0 : static_cast<double>(upper_bounds[i - 1]);
      const double upper = static_cast<double>(upper_bounds[i]);
      return lower +
             (upper - lower) * (rank - static_cast<double>(below)) / static_cast<double>(counts[i]);
    }
    below = cumulative;
  }
  return upper_bounds.empty() ? kNaN : static_cast<double>(upper_bounds.back());
}

std::string DashboardSummaryJson(const std::vector<DashboardVersion>& versions,
                                 std::span<const uint64_t> latency_bounds) {
  std::string out = "{\"latency_bounds_seconds\":[";
  for (size_t i = 0; i < latency_bounds.size(); ++i) {
    if (i) out.push_back(',');
    AppendJsonNumber(&out, static_cast<double>(latency_bounds[i]) / kNsPerSecond);
  }
  out.append("],\"versions\":[");
  for (size_t i = 0; i < versions.size(); ++i) {
    const DashboardVersion& v = versions[i];
    if (i) out.push_back(',');
    out.append("{\"name\":");
    AppendJsonString(&out, v.state.name);
    out.append(",\"version\":");
    AppendJsonNumber(&out, v.state.version);
    out.append(",\"state\":");
    AppendJsonString(&out, ModelStateName(v.state.state));
    out.append(",\"reason\":");
    AppendJsonString(&out, v.state.reason);
    out.append(",\"success\":");
    AppendJsonNumber(&out, v.success_count);
    out.append(",\"failure\":");
    AppendJsonNumber(&out, v.failure_count);
    out.append(",\"queue_depth\":");
    AppendJsonNumber(&out, v.queue_depth);
    out.append(",\"in_flight\":");
    AppendJsonNumber(&out, v.in_flight);
    out.append(",\"traffic\":");
    AppendJsonString(&out, v.traffic);
    const std::span<const uint64_t> counts =
        v.loaded ? v.request_duration.bucket_counts : std::span<const uint64_t>();
    const bool has_histogram = counts.size() == latency_bounds.size() + 1;
    AppendP50AndP99(&out, "", counts, latency_bounds);
    if (v.loaded && v.generative) {
      out.append(",\"generated_tokens\":");
      AppendJsonNumber(&out, v.generated_tokens);
      AppendP50AndP99(&out, "ttft_", v.time_to_first_token.bucket_counts, latency_bounds);
    }
    out.append(",\"duration_buckets\":[");
    if (has_histogram) {
      for (size_t b = 0; b < counts.size(); ++b) {
        if (b) out.push_back(',');
        AppendJsonNumber(&out, counts[b]);
      }
    }
    out.append("]}");
  }
  out.append("]}");
  return out;
}

}  // namespace harrier
