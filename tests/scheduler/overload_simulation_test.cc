// Overload protection against a simulated model: open-loop Poisson arrivals at several times
// the model's capacity, a FIFO queue, N instances, service times that vary ±20%. Time is a fake
// clock driven by a discrete-event loop, so a simulated minute runs in milliseconds and the
// result is the same on every machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <random>
#include <vector>

#include "scheduler/overload_limiter.h"
#include "util/fake_clock.h"

namespace harrier {
namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using testing::FakeClock;

struct SimResult {
  double p50_ms = 0;
  double p99_ms = 0;
  double goodput = 0;   // completions per second
  double capacity = 0;  // instances / mean service time
  double rejected = 0;  // fraction of arrivals refused
  int final_limit = 0;
};

// `load`: arrival rate as a multiple of capacity. Latencies are recorded after `warmup`.
SimResult Simulate(double load, nanoseconds service, int instances, bool protect,
                   nanoseconds duration, nanoseconds warmup, OverloadLimiter::Options options = {},
                   uint32_t seed = 7) {
  FakeClock clock;
  const Clock::time_point start = clock.Now();
  options.enabled = protect;
  options.instance_count = instances;
  OverloadLimiter limiter(options, start);

  std::mt19937_64 rng(seed);
  const double service_s = std::chrono::duration<double>(service).count();
  const double capacity = instances / service_s;
  std::exponential_distribution<double> gap(load * capacity);
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  auto next_gap = [&] {
    return duration_cast<nanoseconds>(std::chrono::duration<double>(gap(rng)));
  };

  struct Running {
    Clock::time_point arrived, started, done;
  };
  std::vector<Running> running;  // at most `instances`
  std::deque<Clock::time_point> queue;
  std::vector<double> latencies_ms;
  uint64_t arrivals = 0, refused = 0, completed_after_warmup = 0;

  auto start_run = [&](Clock::time_point arrived, Clock::time_point now) {
    const auto s = duration_cast<nanoseconds>(service * jitter(rng));
    running.push_back({arrived, now, now + s});
  };

  Clock::time_point next_arrival = start + next_gap();
  const Clock::time_point end = start + duration;
  while (true) {
    auto first_done = std::min_element(running.begin(), running.end(),
                                       [](auto& a, auto& b) { return a.done < b.done; });
    const bool completion_next = first_done != running.end() && first_done->done <= next_arrival;
    const Clock::time_point now = completion_next ? first_done->done : next_arrival;
    if (now >= end) break;
    clock.Set(now);
    if (completion_next) {
      const Running r = *first_done;
      running.erase(first_done);
      limiter.OnComplete(now, static_cast<uint64_t>((r.started - r.arrived).count()),
                         static_cast<uint64_t>((r.done - r.started).count()));
      limiter.Release();
      if (now - start >= warmup) {
        latencies_ms.push_back(std::chrono::duration<double, std::milli>(now - r.arrived).count());
        ++completed_after_warmup;
      }
      if (!queue.empty()) {
        start_run(queue.front(), now);
        queue.pop_front();
      }
    } else {
      ++arrivals;
      if (!limiter.TryAcquire()) {
        ++refused;
      } else if (static_cast<int>(running.size()) < instances) {
        start_run(now, now);
      } else {
        queue.push_back(now);
      }
      next_arrival = now + next_gap();
    }
  }
  std::sort(latencies_ms.begin(), latencies_ms.end());
  SimResult r;
  if (!latencies_ms.empty()) {
    r.p50_ms = latencies_ms[latencies_ms.size() / 2];
    r.p99_ms = latencies_ms[latencies_ms.size() * 99 / 100];
  }
  r.goodput = completed_after_warmup / std::chrono::duration<double>(duration - warmup).count();
  r.capacity = capacity;
  r.rejected = arrivals == 0 ? 0 : static_cast<double>(refused) / arrivals;
  r.final_limit = limiter.snapshot().limit;
  return r;
}

void Print(const char* what, const SimResult& r) {
  std::printf(
      "%-44s p50 %8.2f ms  p99 %8.2f ms  goodput %6.3f of capacity  refused %5.1f%%  "
      "limit %d\n",
      what, r.p50_ms, r.p99_ms, r.goodput / r.capacity, 100 * r.rejected, r.final_limit);
}

struct Case {
  const char* what;
  nanoseconds service;
  int instances;
};

class OverloadSimulationTest : public ::testing::TestWithParam<Case> {};

// The bar: at several times the capacity, with no configuration, admitted requests'
// p99 stays near the unloaded p99, and the model stays busy.
TEST_P(OverloadSimulationTest, FourTimesCapacityKeepsP99NearUnloaded) {
  const Case& c = GetParam();
  const nanoseconds duration = c.service * 3000;  // ~3000 service times per instance
  const nanoseconds warmup = duration / 10;
  const SimResult unloaded = Simulate(0.3, c.service, c.instances, true, duration, warmup);
  const SimResult unprotected = Simulate(4.0, c.service, c.instances, false, duration, warmup);
  const SimResult protected_ = Simulate(4.0, c.service, c.instances, true, duration, warmup);
  std::printf("%s\n", c.what);
  Print("  30% load", unloaded);
  Print("  4x capacity, overload protection off", unprotected);
  Print("  4x capacity, overload protection on", protected_);

  // Light load is (almost) never refused: only Poisson bursts that would queue past the target.
  EXPECT_LT(unloaded.rejected, 0.005);
  // Without protection the queue just grows.
  EXPECT_GT(unprotected.p99_ms, 20 * unloaded.p99_ms);
  // With it, admitted requests stay within ~3 service times (plus the 1 ms floor of the
  // target, which is what bounds a fast model's queue), and the model stays busy: the excess,
  // three quarters of the arrivals, is what gets refused.
  const double service_p99_ms = 1.2 * std::chrono::duration<double, std::milli>(c.service).count();
  EXPECT_LT(protected_.p99_ms, 3 * service_p99_ms + 1.2);
  EXPECT_LT(protected_.p99_ms, std::max(1.0, 2 * unloaded.p99_ms) + 0.2);
  EXPECT_GT(protected_.goodput, 0.95 * protected_.capacity);
  EXPECT_GT(protected_.rejected, 0.7);
}

INSTANTIATE_TEST_SUITE_P(
    Models, OverloadSimulationTest,
    ::testing::Values(Case{"slow model (20 ms), 1 instance", milliseconds(20), 1},
                      Case{"slow model (20 ms), 4 instances", milliseconds(20), 4},
                      Case{"fast model (50 us), 1 instance", microseconds(50), 1},
                      Case{"fast model (50 us), 2 instances", microseconds(50), 2}));

}  // namespace
}  // namespace harrier
