// Admission control micro-benchmarks: what Admit + OnComplete + Release costs per request, on
// one thread and with threads contending for the same model (the server-wide in-flight counter
// and the model's overload limiter are shared atomics; a per-client limit adds a sharded lock).
//
//   build/bench/admission_bench --benchmark_min_time=0.3
//
// Uses the real steady clock, as the server does.

#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "scheduler/admission_controller.h"
#include "scheduler/token_bucket.h"

namespace harrier {
namespace {

struct Setup {
  std::unique_ptr<AdmissionController> controller;
  std::unique_ptr<ModelAdmission> model;
};

Setup Make(AdmissionController::Options options, std::map<std::string, std::string> params) {
  Setup s;
  s.controller = std::move(AdmissionController::Create(options)).value();
  AdmissionController::ModelSpec spec;
  spec.name = "tiny";
  spec.instance_count = 2;
  spec.parameters = std::move(params);
  s.model = std::move(s.controller->ForModel(spec)).value();
  return s;
}

// The default server: overload protection on, in-flight limit 1024, no rate limits.
Setup& Defaults() {
  static Setup s = Make({}, {});
  return s;
}

// Every limit on: model rate, per-client rate per model and server-wide (rates high enough
// never to refuse, so that the cost measured is the admitted path).
Setup& AllLimits() {
  static Setup s = [] {
    AdmissionController::Options o;
    o.per_client = {1e9, 1'000'000'000};
    return Make(o, {{"harrier.rate_limit.rps", "1000000000"},
                    {"harrier.rate_limit.per_client_rps", "1000000000"}});
  }();
  return s;
}

void AdmitComplete(benchmark::State& state, Setup& s, const std::string& client) {
  int64_t refused = 0;
  for (auto _ : state) {
    auto ticket = s.model->Admit(client);
    if (!ticket.ok()) {
      ++refused;
      continue;
    }
    ticket->OnComplete(20'000, 5'000);  // a tiny model's queue delay and service time
  }
  state.counters["refused"] = benchmark::Counter(static_cast<double>(refused));
}

void BM_AdmitComplete_Defaults(benchmark::State& state) {
  AdmitComplete(state, Defaults(), "");
}
BENCHMARK(BM_AdmitComplete_Defaults)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();

void BM_AdmitComplete_AllLimits_OwnClient(benchmark::State& state) {
  AdmitComplete(state, AllLimits(), "client-" + std::to_string(state.thread_index()));
}
BENCHMARK(BM_AdmitComplete_AllLimits_OwnClient)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();

// Every thread is the same client: its bucket's shard lock is contended.
void BM_AdmitComplete_AllLimits_SameClient(benchmark::State& state) {
  AdmitComplete(state, AllLimits(), "one-client");
}
BENCHMARK(BM_AdmitComplete_AllLimits_SameClient)->Threads(2)->Threads(4)->UseRealTime();

// The cost of saying no: a model at its concurrency limit (the message is built each time).
void BM_RefuseOverloaded(benchmark::State& state) {
  static Setup s = Make({}, {});
  static std::vector<AdmissionTicket> held = [] {
    std::vector<AdmissionTicket> v;
    while (true) {
      auto t = s.model->Admit("");
      if (!t.ok()) break;
      v.push_back(std::move(t).value());
    }
    return v;
  }();
  for (auto _ : state) {
    auto ticket = s.model->Admit("");
    benchmark::DoNotOptimize(ticket);
  }
}
BENCHMARK(BM_RefuseOverloaded)->Threads(1)->Threads(2)->UseRealTime();

void BM_TokenBucket(benchmark::State& state) {
  static TokenBucket bucket({1e9, 1'000'000'000});
  const Clock& clock = SteadyClock();
  for (auto _ : state) benchmark::DoNotOptimize(bucket.TryAcquire(clock.Now()));
}
BENCHMARK(BM_TokenBucket)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace harrier

BENCHMARK_MAIN();
