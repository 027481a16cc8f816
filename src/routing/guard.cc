#include "routing/guard.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/json_writer.h"

namespace harrier {
namespace {

// "3.2%": a rate as a percent, to 0.01%.
std::string Percent(double rate) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f%%", rate * 100);
  return buf;
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (!out.empty()) out += "; ";
    out += p;
  }
  return out;
}

}  // namespace

const char* GuardOutcomeName(GuardVerdict::Outcome outcome) {
  switch (outcome) {
    case GuardVerdict::Outcome::kInsufficientData: return "insufficient data";
    case GuardVerdict::Outcome::kHolds: return "holds";
    case GuardVerdict::Outcome::kBreached: return "breached";
  }
  return "unknown";
}

GuardVerdict EvaluateGuard(const GuardConfig& guard, const WindowSnapshot& candidate,
                           const WindowSnapshot& baseline) {
  using Outcome = GuardVerdict::Outcome;
  GuardVerdict v;
  v.candidate = candidate;
  v.baseline = baseline;
  if (candidate.requests < guard.min_requests) {
    v.outcome = Outcome::kInsufficientData;
    v.reason = "candidate has " + std::to_string(candidate.requests) +
               " requests in the window, fewer than min_requests " +
               std::to_string(guard.min_requests);
    return v;
  }
  std::vector<std::string> breaches, holds;
  bool unjudged = false;
  {
    // Always judged, with the default allowance when the guard sets none: a candidate failing
    // far more than its baseline is never promoted, whatever limits the operator chose. The
    // allowance is over the baseline's own rate, so a baseline failing as much (a bad input
    // stream, a shared dependency down) does not roll the candidate back; a baseline with too
    // few requests to judge counts as failing nothing.
    const double limit = guard.max_error_rate.value_or(kDefaultGuardMaxErrorRate);
    const std::string limit_text =
        "max_error_rate " + Percent(limit) + (guard.max_error_rate ? "" : " (default)");
    const bool baseline_judged = baseline.requests >= guard.min_requests;
    const double baseline_rate = baseline_judged ? baseline.error_rate : 0;
    const std::string allowed =
        baseline_judged ? "baseline " + Percent(baseline_rate) + " + " + limit_text : limit_text;
    const std::string figures = "candidate error rate " + Percent(candidate.error_rate) + " (" +
                                std::to_string(candidate.errors) + " of " +
                                std::to_string(candidate.requests) + ")";
    if (candidate.error_rate > baseline_rate + limit) {
      breaches.push_back(figures + " > " + allowed);
    } else {
      holds.push_back(figures + " <= " + allowed);
    }
  }
  if (guard.max_p99_us) {
    const std::string figures = "candidate p99 " + std::to_string(candidate.p99_us) + " us";
    if (candidate.p99_us > *guard.max_p99_us) {
      breaches.push_back(figures + " > max_p99_us " + std::to_string(*guard.max_p99_us));
    } else {
      holds.push_back(figures + " <= max_p99_us " + std::to_string(*guard.max_p99_us));
    }
  }
  if (guard.max_p99_ratio) {
    if (baseline.requests < guard.min_requests) {
      unjudged = true;
      holds.push_back("p99 ratio not judged: baseline has " + std::to_string(baseline.requests) +
                      " requests in the window, fewer than min_requests " +
                      std::to_string(guard.min_requests));
    } else {
      const double ratio = static_cast<double>(candidate.p99_us) /
                           static_cast<double>(std::max<int64_t>(1, baseline.p99_us));
      char ratio_text[32];
      std::snprintf(ratio_text, sizeof(ratio_text), "%.2f", ratio);
      const std::string figures = "candidate p99 " + std::to_string(candidate.p99_us) + " us is " +
                                  ratio_text + "x baseline " + std::to_string(baseline.p99_us) +
                                  " us";
      if (ratio > *guard.max_p99_ratio) {
        breaches.push_back(figures + " > max_p99_ratio " + JsonNumber(*guard.max_p99_ratio));
      } else {
        holds.push_back(figures + " <= max_p99_ratio " + JsonNumber(*guard.max_p99_ratio));
      }
    }
  }
  if (!breaches.empty()) {
    v.outcome = Outcome::kBreached;
    v.reason = Join(breaches);
  } else {
    v.outcome = unjudged ? Outcome::kInsufficientData : Outcome::kHolds;
    v.reason = Join(holds);
  }
  return v;
}

}  // namespace harrier
