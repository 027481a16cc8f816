#include "routing/guard.h"

#include <gtest/gtest.h>

#include <string>

namespace harrier {
namespace {

using Outcome = GuardVerdict::Outcome;

WindowSnapshot Window(int64_t requests, int64_t errors, int64_t p99_us) {
  WindowSnapshot s;
  s.requests = requests;
  s.errors = errors;
  s.error_rate = requests > 0 ? static_cast<double>(errors) / static_cast<double>(requests) : 0;
  s.p99_us = p99_us;
  return s;
}

GuardConfig Guard(std::optional<double> max_p99_ratio, std::optional<double> max_error_rate,
                  std::optional<int64_t> max_p99_us, int64_t min_requests = 50) {
  GuardConfig g;
  g.window_seconds = 60;
  g.min_requests = min_requests;
  g.max_p99_ratio = max_p99_ratio;
  g.max_error_rate = max_error_rate;
  g.max_p99_us = max_p99_us;
  return g;
}

TEST(EvaluateGuardTest, Table) {
  const std::nullopt_t none = std::nullopt;
  struct Case {
    const char* name;
    GuardConfig guard;
    WindowSnapshot candidate, baseline;
    Outcome outcome;
    const char* reason;  // the exact reason
  };
  const Case cases[] = {
      {"candidate below min_requests", Guard(1.5, 0.01, none), Window(49, 49, 90000),
       Window(1000, 0, 800), Outcome::kInsufficientData,
       "candidate has 49 requests in the window, fewer than min_requests 50"},
      {"p99 ratio breached", Guard(1.5, none, none), Window(500, 0, 1520), Window(500, 0, 800),
       Outcome::kBreached, "candidate p99 1520 us is 1.90x baseline 800 us > max_p99_ratio 1.5"},
      {"p99 ratio at the limit holds", Guard(1.5, none, none), Window(500, 0, 1200),
       Window(500, 0, 800), Outcome::kHolds,
       "candidate error rate 0.00% (0 of 500) <= baseline 0.00% + max_error_rate 5.00% "
       "(default); candidate p99 1200 us is 1.50x baseline 800 us <= max_p99_ratio 1.5"},
      {"p99 ratio needs a baseline", Guard(1.5, none, none), Window(500, 0, 5000),
       Window(10, 0, 800), Outcome::kInsufficientData,
       "candidate error rate 0.00% (0 of 500) <= max_error_rate 5.00% (default); p99 ratio not "
       "judged: baseline has 10 requests in the window, fewer than min_requests 50"},
      {"error rate breached", Guard(none, 0.01, none), Window(500, 16, 800), Window(0, 0, 0),
       Outcome::kBreached, "candidate error rate 3.20% (16 of 500) > max_error_rate 1.00%"},
      {"error rate at the limit holds", Guard(none, 0.01, none), Window(500, 5, 800),
       Window(0, 0, 0), Outcome::kHolds,
       "candidate error rate 1.00% (5 of 500) <= max_error_rate 1.00%"},
      {"zero error rate allowed: one error breaches", Guard(none, 0.0, none), Window(50, 1, 800),
       Window(0, 0, 0), Outcome::kBreached,
       "candidate error rate 2.00% (1 of 50) > max_error_rate 0.00%"},
      {"absolute p99 breached", Guard(none, none, 1000), Window(60, 0, 1001), Window(0, 0, 0),
       Outcome::kBreached, "candidate p99 1001 us > max_p99_us 1000"},
      {"absolute p99 holds", Guard(none, none, 1000), Window(60, 0, 1000), Window(0, 0, 0),
       Outcome::kHolds,
       "candidate error rate 0.00% (0 of 60) <= max_error_rate 5.00% (default); candidate p99 "
       "1000 us <= max_p99_us 1000"},
      // An absolute breach counts even when the ratio cannot be judged yet.
      {"breach wins over an unjudged ratio", Guard(1.5, 0.01, none), Window(500, 50, 900),
       Window(3, 0, 800), Outcome::kBreached,
       "candidate error rate 10.00% (50 of 500) > max_error_rate 1.00%"},
      {"every breach is reported", Guard(1.5, 0.01, 1000), Window(100, 2, 2000),
       Window(100, 0, 1000), Outcome::kBreached,
       "candidate error rate 2.00% (2 of 100) > baseline 0.00% + max_error_rate 1.00%; "
       "candidate p99 2000 us > "
       "max_p99_us 1000; candidate p99 2000 us is 2.00x baseline 1000 us > max_p99_ratio 1.5"},
      {"every limit holds", Guard(1.5, 0.01, 1000), Window(100, 0, 820), Window(100, 0, 800),
       Outcome::kHolds,
       "candidate error rate 0.00% (0 of 100) <= baseline 0.00% + max_error_rate 1.00%; "
       "candidate p99 820 us <= "
       "max_p99_us 1000; candidate p99 820 us is 1.02x baseline 800 us <= max_p99_ratio 1.5"},
      {"a faster candidate holds", Guard(1.1, none, none, 1), Window(1, 0, 400), Window(1, 0, 800),
       Outcome::kHolds,
       "candidate error rate 0.00% (0 of 1) <= baseline 0.00% + max_error_rate 5.00% (default); "
       "candidate p99 400 us is 0.50x baseline 800 us <= max_p99_ratio 1.1"},
      {"a zero baseline p99 counts as 1 us", Guard(1.5, none, none, 1), Window(5, 0, 2),
       Window(5, 0, 0), Outcome::kBreached,
       "candidate p99 2 us is 2.00x baseline 0 us > max_p99_ratio 1.5"},
      // probe12 F5: the error limit is an allowance over the baseline's own rate.
      {"an equally failing baseline holds", Guard(none, 0.1, none), Window(100, 100, 800),
       Window(100, 100, 800), Outcome::kHolds,
       "candidate error rate 100.00% (100 of 100) <= baseline 100.00% + max_error_rate 10.00%"},
      {"within the allowance over the baseline holds", Guard(none, 0.1, none), Window(100, 15, 800),
       Window(100, 10, 800), Outcome::kHolds,
       "candidate error rate 15.00% (15 of 100) <= baseline 10.00% + max_error_rate 10.00%"},
      {"past the allowance over the baseline breaches", Guard(none, 0.1, none),
       Window(100, 25, 800), Window(100, 10, 800), Outcome::kBreached,
       "candidate error rate 25.00% (25 of 100) > baseline 10.00% + max_error_rate 10.00%"},
      {"a baseline below min_requests counts as failing nothing", Guard(none, 0.1, none),
       Window(100, 15, 800), Window(10, 10, 800), Outcome::kBreached,
       "candidate error rate 15.00% (15 of 100) > max_error_rate 10.00%"},
      // probe12 F11: errors are judged even by a guard that sets no max_error_rate.
      {"a latency-only guard rolls back an all-failing candidate", Guard(2.0, none, none, 5),
       Window(8, 8, 378), Window(32, 0, 189), Outcome::kBreached,
       "candidate error rate 100.00% (8 of 8) > baseline 0.00% + max_error_rate 5.00% "
       "(default)"},
      {"within the default allowance holds", Guard(none, none, 1000), Window(100, 5, 800),
       Window(100, 1, 800), Outcome::kHolds,
       "candidate error rate 5.00% (5 of 100) <= baseline 1.00% + max_error_rate 5.00% "
       "(default); candidate p99 800 us <= max_p99_us 1000"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const GuardVerdict v = EvaluateGuard(c.guard, c.candidate, c.baseline);
    EXPECT_EQ(GuardOutcomeName(v.outcome), std::string(GuardOutcomeName(c.outcome)));
    EXPECT_EQ(v.reason, c.reason);
    EXPECT_EQ(v.candidate, c.candidate);
    EXPECT_EQ(v.baseline, c.baseline);
  }
}

}  // namespace
}  // namespace harrier
