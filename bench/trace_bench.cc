// The tracer's cost on the request path (OtlpTracer::Start and Submit) and on the export thread
// (OtlpTraceJson per record). docs/tracing.md quotes the figures.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "harrier/trace.h"
#include "observability/otlp_json.h"
#include "observability/otlp_tracer.h"

namespace harrier {
namespace {

std::unique_ptr<OtlpTracer> MakeTracer(double ratio, size_t max_queue) {
  OtlpTracer::Options options;
  options.sample_ratio = ratio;
  options.max_queue = max_queue;
  options.post = [](const std::string& body) {
    benchmark::DoNotOptimize(body.data());
    return true;
  };
  return std::move(OtlpTracer::Create(std::move(options))).value();
}

RequestTrace Record() {
  RequestTrace t;
  t.server.trace_id.fill(0x11);
  t.server.span_id.fill(0x22);
  t.server.flags = SpanContext::kSampled;
  t.name = "POST /v2/models/{model}/infer";
  t.protocol = "http";
  t.transport = "HTTP/1.1";
  t.target = "/v2/models/resnet50/infer";
  t.request_id = "0123456789abcdef0123";
  t.model = "resnet50";
  t.model_version = 1;
  t.status = 200;
  t.request_bytes = 602'112;
  t.response_bytes = 4'000;
  const auto base = std::chrono::steady_clock::now();
  auto at = [&](int us) { return base + std::chrono::microseconds(us); };
  t.received = at(0);
  t.body_received = at(40);
  t.decoded = at(90);
  t.batch_start = at(400);
  t.infer_start = at(410);
  t.infer_end = at(3400);
  t.batch_end = at(3450);
  t.encoded = at(3500);
  t.sent = at(3530);
  t.batch_size = 4;
  t.batch_requests = 4;
  return t;
}

void BM_StartUntraced(benchmark::State& state) {
  auto tracer = MakeTracer(0.0, 16);
  for (auto _ : state) benchmark::DoNotOptimize(tracer->Start(std::nullopt));
}
BENCHMARK(BM_StartUntraced);

void BM_StartTraced(benchmark::State& state) {
  auto tracer = MakeTracer(1.0, 16);
  for (auto _ : state) benchmark::DoNotOptimize(tracer->Start(std::nullopt));
}
BENCHMARK(BM_StartTraced);

void BM_StartWithSampledParent(benchmark::State& state) {
  auto tracer = MakeTracer(0.0, 16);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        tracer->Start(ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")));
  }
}
BENCHMARK(BM_StartWithSampledParent);

// What building the record costs the front end (its strings are copied here): Submit's figure
// below includes it.
void BM_CopyRecord(benchmark::State& state) {
  const RequestTrace record = Record();
  for (auto _ : state) {
    RequestTrace copy = record;
    benchmark::DoNotOptimize(copy);
  }
}
BENCHMARK(BM_CopyRecord);

// Submit into a queue that has room, from 1 and 2 threads sharing one tracer, the export thread
// running (a wake every 4096 records; it builds the JSON and discards it). Each run submits a
// fixed number of records into a fresh tracer whose two queue halves were grown beforehand, so
// no Submit reallocates and none is dropped ("dropped_spans" says so).
constexpr int kSubmitsPerThread = 1 << 16;
std::unique_ptr<OtlpTracer> submit_tracer;

void BM_Submit(benchmark::State& state) {
  const RequestTrace record = Record();
  if (state.thread_index() == 0) {
    OtlpTracer::Options options;
    options.sample_ratio = 1.0;
    options.max_queue = 4 * kSubmitsPerThread;
    options.max_export_batch = 4096;
    options.export_interval = std::chrono::hours(1);
    options.post = [](const std::string& body) {
      benchmark::DoNotOptimize(body.data());
      return true;
    };
    submit_tracer = std::move(OtlpTracer::Create(std::move(options))).value();
    for (int round = 0; round < 2; ++round) {
      for (int i = 0; i < 2 * kSubmitsPerThread; ++i) submit_tracer->Submit(record);
      submit_tracer->Flush(std::chrono::seconds(60));
    }
  }
  // The loop starts and ends on a barrier of all threads.
  for (auto _ : state) submit_tracer->Submit(record);
  if (state.thread_index() == 0) {
    TextExposition metrics;
    submit_tracer->AppendMetrics(&metrics);
    const std::string text = metrics.Text();
    const std::string key = "harrier_trace_spans_dropped_total{reason=\"queue_full\"} ";
    const size_t at = text.find(key);
    state.counters["dropped_spans"] =
        at == std::string::npos ? -1 : std::stod(text.substr(at + key.size()));
    submit_tracer.reset();
  }
}
BENCHMARK(BM_Submit)->Iterations(kSubmitsPerThread)->Threads(1)->Threads(2)->UseRealTime();

// The export thread's work per record: 8 spans of OTLP JSON.
void BM_OtlpTraceJson(benchmark::State& state) {
  const std::vector<RequestTrace> records(static_cast<size_t>(state.range(0)), Record());
  OtlpTracer::Options resource;
  resource.service_instance_id = "host-1";
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string json = OtlpTraceJson(records, resource, 1'700'000'000'000'000'000);
    bytes = json.size();
    benchmark::DoNotOptimize(json.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["bytes_per_record"] = static_cast<double>(bytes) / state.range(0);
}
BENCHMARK(BM_OtlpTraceJson)->Arg(256);

}  // namespace
}  // namespace harrier

BENCHMARK_MAIN();
