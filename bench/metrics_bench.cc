// Metrics micro-benchmarks (issue 5): what recording costs on the request path, on one thread
// and with two threads recording into the same model version (the contended case), against a
// mutex-per-observation histogram like prometheus-cpp 1.0's Histogram::Observe; and what one
// scrape of ten model versions costs.
//
//   build/bench/metrics_bench --benchmark_min_time=0.3

#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lifecycle/model_stats.h"
#include "observability/histogram.h"
#include "observability/model_metrics.h"
#include "observability/text_exposition.h"

namespace harrier {
namespace {

// Durations spread over the interesting buckets (30 us .. 20 ms), so that the bucket search is
// not always the same branch path.
std::vector<uint64_t> Durations() {
  std::vector<uint64_t> v;
  for (uint64_t ns = 30'000; ns < 20'000'000; ns = ns * 9 / 8) v.push_back(ns);
  return v;
}

// The baseline: one lock per observation (what prometheus-cpp 1.0 does).
class MutexHistogram {
 public:
  explicit MutexHistogram(const HistogramBuckets& b)
      : bounds_(b.upper_bounds), counts_(bounds_.size() + 1) {}
  void Observe(uint64_t v) {
    const size_t i =
        static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
    std::lock_guard lock(mu_);
    ++counts_[i];
    sum_ += v;
  }

 private:
  const std::vector<uint64_t> bounds_;
  std::mutex mu_;
  std::vector<uint64_t> counts_;
  uint64_t sum_ = 0;
};

void BM_HistogramObserve(benchmark::State& state) {
  static Histogram histogram(HistogramBuckets::Latency());
  const std::vector<uint64_t> values = Durations();
  size_t i = state.thread_index();
  for (auto _ : state) {
    histogram.Observe(values[i]);
    if (++i == values.size()) i = 0;
  }
}
BENCHMARK(BM_HistogramObserve)->Threads(1)->Threads(2)->UseRealTime();

void BM_MutexHistogramObserve(benchmark::State& state) {
  static MutexHistogram histogram(HistogramBuckets::Latency());
  const std::vector<uint64_t> values = Durations();
  size_t i = state.thread_index();
  for (auto _ : state) {
    histogram.Observe(values[i]);
    if (++i == values.size()) i = 0;
  }
}
BENCHMARK(BM_MutexHistogramObserve)->Threads(1)->Threads(2)->UseRealTime();

// Everything one successful request of batch 1 records: RecordExecution (Triton's batch stats
// and the batch-size histogram), RecordSuccess (Triton's counters and three histograms),
// AddOutputTime (two more histograms), plus the in-flight gauge. All threads record into the
// same model version.
void BM_RecordSuccessfulRequest(benchmark::State& state) {
  static ModelStats stats(8);
  const std::vector<uint64_t> values = Durations();
  size_t i = state.thread_index();
  for (auto _ : state) {
    const uint64_t ns = values[i];
    stats.RequestStarted();
    stats.RecordExecution(1, ns / 8, ns / 2);
    ModelStats::Durations d;
    d.queue_ns = ns / 4;
    d.compute_input_ns = ns / 8;
    d.compute_infer_ns = ns / 2;
    d.total_ns = ns;
    stats.RecordSuccess(d, 1);
    stats.RequestFinished();
    stats.AddOutputTime(ns / 16, ns + ns / 16);
    stats.AddBatchOutputTime(1, ns / 16);
    if (++i == values.size()) i = 0;
  }
}
BENCHMARK(BM_RecordSuccessfulRequest)->Threads(1)->Threads(2)->UseRealTime();

// Only what issue 5 added per successful request of batch 1: five duration observations, one
// batch-size observation and the in-flight gauge's two adds, into one model version's
// ModelMetrics from every thread.
void BM_MetricsPerRequest(benchmark::State& state) {
  static ModelMetrics metrics;
  const std::vector<uint64_t> values = Durations();
  size_t i = state.thread_index();
  for (auto _ : state) {
    const uint64_t ns = values[i];
    metrics.in_flight.fetch_add(1, std::memory_order_relaxed);
    metrics.batch_size.Observe(1);
    metrics.queue_duration.Observe(ns / 4);
    metrics.compute_input_duration.Observe(ns / 8);
    metrics.compute_infer_duration.Observe(ns / 2);
    metrics.in_flight.fetch_sub(1, std::memory_order_relaxed);
    metrics.compute_output_duration.Observe(ns / 16);
    metrics.request_duration.Observe(ns);
    if (++i == values.size()) i = 0;
  }
}
BENCHMARK(BM_MetricsPerRequest)->Threads(1)->Threads(2)->UseRealTime();

// One scrape's text for ten model versions with every histogram populated.
void BM_ScrapeTenModels(benchmark::State& state) {
  std::vector<std::unique_ptr<ModelStats>> models;
  std::vector<ModelVersionStats> snapshots(10);
  for (int m = 0; m < 10; ++m) {
    models.push_back(std::make_unique<ModelStats>(8));
    for (uint64_t ns : Durations()) {
      models.back()->RecordExecution(1, ns, ns);
      models.back()->RecordSuccess({ns, ns, ns, 0, ns}, 1);
      models.back()->AddOutputTime(ns, ns);
    }
  }
  size_t bytes = 0;
  for (auto _ : state) {
    TextExposition e;
    DeclareModelMetricFamilies(&e);
    for (int m = 0; m < 10; ++m) {
      snapshots[m].name = "model_" + std::to_string(m);
      snapshots[m].version = 1;
      models[m]->Snapshot(&snapshots[m]);
      AppendModelVersionMetrics({&snapshots[m], &models[m]->metrics(), 0}, &e);
    }
    std::string text = e.Text();
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_ScrapeTenModels);

}  // namespace
}  // namespace harrier

BENCHMARK_MAIN();
