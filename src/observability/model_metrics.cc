#include "observability/model_metrics.h"

#include <string>

namespace harrier {
namespace {

using Type = TextExposition::Type;
constexpr double kNsPerSecond = 1e9;
constexpr double kNsPerMicrosecond = 1e3;

constexpr FailureReason kAllReasons[] = {FailureReason::kBadRequest, FailureReason::kNotFound,
                                         FailureReason::kTimeout,    FailureReason::kCancelled,
                                         FailureReason::kRejected,   FailureReason::kUnavailable,
                                         FailureReason::kInternal};
static_assert(std::size(kAllReasons) == kFailureReasonCount);

constexpr ModelState kAllStates[] = {ModelState::kLoading, ModelState::kReady,
                                     ModelState::kUnloading, ModelState::kUnavailable};

// Histograms: name, help, and which member of ModelMetrics.
struct HistogramFamily {
  std::string_view name;
  std::string_view help;
  Histogram ModelMetrics::*member;
  double unit_divisor;
};
constexpr HistogramFamily kHistograms[] = {
    {"harrier_request_duration_seconds",
     "Successful inference requests: time from receipt by the server to the response handed "
     "back to the connection",
     &ModelMetrics::request_duration, kNsPerSecond},
    {"harrier_queue_duration_seconds",
     "Successful inference requests: time waiting in the model's queue",
     &ModelMetrics::queue_duration, kNsPerSecond},
    {"harrier_compute_input_duration_seconds",
     "Successful inference requests: input validation, preparation and batch gathering",
     &ModelMetrics::compute_input_duration, kNsPerSecond},
    {"harrier_compute_infer_duration_seconds",
     "Successful inference requests: the model execution they ran in",
     &ModelMetrics::compute_infer_duration, kNsPerSecond},
    {"harrier_compute_output_duration_seconds",
     "Successful inference requests: output splitting and response encoding",
     &ModelMetrics::compute_output_duration, kNsPerSecond},
    {"harrier_batch_size", "Successful model executions: items (batch dimension) per execution",
     &ModelMetrics::batch_size, 1.0},
};

// Generation's histograms, for versions that generate text only.
constexpr HistogramFamily kGenerationHistograms[] = {
    {"harrier_time_to_first_token_seconds",
     "Generations: time from receipt by the server to the first token sampled",
     &ModelMetrics::time_to_first_token, kNsPerSecond},
    {"harrier_time_per_output_token_seconds",
     "Generations of two tokens or more: time per token after the first",
     &ModelMetrics::time_per_output_token, kNsPerSecond},
};

// Triton's cumulative-microsecond counters and the ModelVersionStats field each comes from.
struct TritonDuration {
  std::string_view name;
  std::string_view help;
  DurationStat ModelVersionStats::*field;
};
constexpr TritonDuration kTritonDurations[] = {
    {"nv_inference_request_duration_us",
     "Cumulative inference request duration in microseconds (successful requests; Triton's name)",
     &ModelVersionStats::success},
    {"nv_inference_queue_duration_us",
     "Cumulative inference queuing duration in microseconds (Triton's name)",
     &ModelVersionStats::queue},
    {"nv_inference_compute_input_duration_us",
     "Cumulative compute input duration in microseconds (Triton's name)",
     &ModelVersionStats::compute_input},
    {"nv_inference_compute_infer_duration_us",
     "Cumulative compute inference duration in microseconds (Triton's name)",
     &ModelVersionStats::compute_infer},
    {"nv_inference_compute_output_duration_us",
     "Cumulative inference compute output duration in microseconds (Triton's name)",
     &ModelVersionStats::compute_output},
};

}  // namespace

FailureReason FailureReasonFor(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kPayloadTooLarge:
    case StatusCode::kUnimplemented: return FailureReason::kBadRequest;
    case StatusCode::kNotFound: return FailureReason::kNotFound;
    case StatusCode::kDeadlineExceeded: return FailureReason::kTimeout;
    case StatusCode::kCancelled: return FailureReason::kCancelled;
    case StatusCode::kResourceExhausted: return FailureReason::kRejected;
    case StatusCode::kUnavailable: return FailureReason::kUnavailable;
    case StatusCode::kOk:
    case StatusCode::kInternal: return FailureReason::kInternal;
  }
  return FailureReason::kInternal;
}

std::string_view FailureReasonName(FailureReason reason) {
  switch (reason) {
    case FailureReason::kBadRequest: return "bad_request";
    case FailureReason::kNotFound: return "not_found";
    case FailureReason::kTimeout: return "timeout";
    case FailureReason::kCancelled: return "cancelled";
    case FailureReason::kRejected: return "rejected";
    case FailureReason::kUnavailable: return "unavailable";
    case FailureReason::kInternal: return "internal";
  }
  return "internal";
}

ModelMetrics::ModelMetrics()
    : request_duration(HistogramBuckets::Latency()),
      queue_duration(HistogramBuckets::Latency()),
      compute_input_duration(HistogramBuckets::Latency()),
      compute_infer_duration(HistogramBuckets::Latency()),
      compute_output_duration(HistogramBuckets::Latency()),
      batch_size(HistogramBuckets::BatchSize()),
      time_to_first_token(HistogramBuckets::Latency()),
      time_per_output_token(HistogramBuckets::Latency()) {}

void DeclareModelMetricFamilies(TextExposition* out) {
  for (const HistogramFamily& h : kHistograms) out->Declare(h.name, Type::kHistogram, h.help);
  out->Declare("harrier_request_success_total", Type::kCounter,
               "Inference requests answered successfully");
  out->Declare("harrier_request_failure_total", Type::kCounter,
               "Inference requests that failed, by reason; model=\"\" for requests that never "
               "reached a model version (unknown model or version, model not ready)");
  out->Declare("harrier_cancellations_total", Type::kCounter,
               "Inference requests cancelled because the client went away, by where they were: "
               "queued (removed without running) or running (execution stopped)");
  out->Declare("harrier_inference_total", Type::kCounter,
               "Inferences performed (a request with batch dimension n counts n)");
  out->Declare("harrier_execution_total", Type::kCounter,
               "Model executions (a dynamic batch of requests counts 1)");
  out->Declare("harrier_queue_depth", Type::kGauge,
               "Requests waiting in the model version's queue");
  out->Declare("harrier_inflight_requests", Type::kGauge,
               "Requests admitted to the model version and not yet answered (queued or running)");
  out->Declare("harrier_predicted_queue_wait_seconds", Type::kGauge,
               "Queue delay overload protection predicts for a request arriving now (versions "
               "with overload protection on)");
  out->Declare("harrier_model_state", Type::kGauge,
               "1 for the model version's current state (LOADING, READY, UNLOADING, "
               "UNAVAILABLE), 0 for the others");
  out->Declare("harrier_model_load_duration_seconds", Type::kGauge,
               "Time the model version took to load and warm up");
  out->Declare("harrier_model_warmup_failures_total", Type::kCounter,
               "Implicit (default zero-filled) warm-ups of the model version that failed; the "
               "version serves anyway");
  out->Declare("harrier_traffic_weight", Type::kGauge,
               "The traffic policy's current weight of the model version (docs/routing.md)");
  out->Declare("harrier_traffic_rollbacks_total", Type::kCounter,
               "Staged rollouts of the model that its guard rolled back");
  out->Declare("harrier_traffic_breaker_panics_total", Type::kCounter,
               "Requests routed to a model version although every version with traffic had its "
               "circuit breaker refusing (a panic: breakers never take the model out of service)");
  out->Declare("harrier_traffic_breaker_state", Type::kGauge,
               "1 for the model version's circuit breaker state now (closed, open, half-open), 0 "
               "for the others; versions under a traffic policy only (docs/routing.md)");
  out->Declare("harrier_shadow_requests_total", Type::kCounter,
               "Shadow copies of requests, by outcome: compared (answered and compared with the "
               "real answer), error (the shadow version failed), shed (not sent: it was busy), "
               "mismatched (an output missing, or of another type or shape)");
  out->Declare("harrier_shadow_top1_agreements_total", Type::kCounter,
               "Shadow answers to classifier-shaped outputs, by whether the shadow version picked "
               "the same top-1 class as the answering one");
  out->Declare("harrier_shadow_max_abs_difference", Type::kGauge,
               "The largest absolute output difference between the shadow version and the "
               "answering one, in the last comparison");
  for (const HistogramFamily& h : kGenerationHistograms)
    out->Declare(h.name, Type::kHistogram, h.help);
  out->Declare("harrier_prompt_tokens_total", Type::kCounter,
               "Generations: prompt tokens read (reused ones from the prefix cache included)");
  out->Declare("harrier_prompt_tokens_reused_total", Type::kCounter,
               "Generations: prompt tokens taken from the prefix cache instead of decoded");
  out->Declare("harrier_generated_tokens_total", Type::kCounter, "Generations: tokens generated");
  out->Declare("harrier_generation_active_sequences", Type::kGauge,
               "Generations: sequences being decoded now");
  out->Declare("harrier_generation_waiting_requests", Type::kGauge,
               "Generations: requests waiting for a free sequence");
  out->Declare("harrier_generation_compute_threads", Type::kGauge,
               "Generations: compute threads the engine gives a decode step (fewer than "
               "configured while the machine's cores are contended)");
  out->Declare("harrier_kv_cache_cells", Type::kGauge,
               "Generations: the engine's KV cache cells: used (by generations and the prefix "
               "cache), cached (of used: free sequences' prefix cache), total");
  out->Declare("nv_inference_request_success", Type::kCounter,
               "Number of successful inference requests, all batch sizes (Triton's name)");
  out->Declare("nv_inference_request_failure", Type::kCounter,
               "Number of failed inference requests, all batch sizes (Triton's name)");
  out->Declare("nv_inference_count", Type::kCounter,
               "Number of inferences performed (Triton's name)");
  out->Declare("nv_inference_exec_count", Type::kCounter,
               "Number of model executions performed (Triton's name)");
  for (const TritonDuration& t : kTritonDurations) out->Declare(t.name, Type::kCounter, t.help);
  out->Declare("nv_inference_pending_request_count", Type::kGauge,
               "Instantaneous number of pending requests awaiting execution (Triton's name)");
}

void AppendModelVersionMetrics(const ModelVersionSample& sample, TextExposition* out) {
  const ModelVersionStats& s = *sample.stats;
  const ModelMetrics& m = *sample.metrics;
  const std::string version = std::to_string(s.version);
  const TextExposition::Labels labels = {{"model", s.name}, {"version", version}};

  for (const HistogramFamily& h : kHistograms) {
    const Histogram& histogram = m.*h.member;
    out->AddHistogram(h.name, labels, histogram.upper_bounds(), histogram.Snapshot(),
                      h.unit_divisor);
  }
  out->Add("harrier_request_success_total", labels, s.success.count);
  for (FailureReason reason : kAllReasons) {
    out->Add("harrier_request_failure_total",
             {{"model", s.name}, {"version", version}, {"reason", FailureReasonName(reason)}},
             m.failures.Read(reason));
  }
  out->Add("harrier_cancellations_total",
           {{"model", s.name}, {"version", version}, {"stage", "queued"}},
           m.cancellations[static_cast<size_t>(CancellationStage::kQueued)].load(
               std::memory_order_relaxed));
  out->Add("harrier_cancellations_total",
           {{"model", s.name}, {"version", version}, {"stage", "running"}},
           m.cancellations[static_cast<size_t>(CancellationStage::kRunning)].load(
               std::memory_order_relaxed));
  out->Add("harrier_inference_total", labels, s.inference_count);
  out->Add("harrier_execution_total", labels, s.execution_count);
  out->Add("harrier_queue_depth", labels, sample.queue_depth);
  out->Add("harrier_inflight_requests", labels,
           static_cast<double>(m.in_flight.load(std::memory_order_relaxed)));
  if (sample.predicted_queue_wait_seconds) {
    out->Add("harrier_predicted_queue_wait_seconds", labels, *sample.predicted_queue_wait_seconds);
  }

  if (sample.generation != nullptr) {
    const GenerationStats& g = *sample.generation;
    for (const HistogramFamily& h : kGenerationHistograms) {
      const Histogram& histogram = m.*h.member;
      out->AddHistogram(h.name, labels, histogram.upper_bounds(), histogram.Snapshot(),
                        h.unit_divisor);
    }
    out->Add("harrier_prompt_tokens_total", labels,
             m.prompt_tokens.load(std::memory_order_relaxed));
    out->Add("harrier_prompt_tokens_reused_total", labels,
             m.reused_prompt_tokens.load(std::memory_order_relaxed));
    out->Add("harrier_generated_tokens_total", labels,
             m.generated_tokens.load(std::memory_order_relaxed));
    out->Add("harrier_generation_active_sequences", labels,
             static_cast<double>(g.active_sequences));
    out->Add("harrier_generation_waiting_requests", labels,
             static_cast<double>(g.waiting_requests));
    out->Add("harrier_generation_compute_threads", labels, static_cast<double>(g.compute_threads));
    out->Add("harrier_kv_cache_cells", {{"model", s.name}, {"version", version}, {"state", "used"}},
             static_cast<double>(g.kv_cells_used));
    out->Add("harrier_kv_cache_cells",
             {{"model", s.name}, {"version", version}, {"state", "cached"}},
             static_cast<double>(g.kv_cells_cached));
    out->Add("harrier_kv_cache_cells",
             {{"model", s.name}, {"version", version}, {"state", "total"}},
             static_cast<double>(g.kv_cells_total));
  }

  out->Add("nv_inference_request_success", labels, s.success.count);
  out->Add("nv_inference_request_failure", labels, s.fail.count);
  out->Add("nv_inference_count", labels, s.inference_count);
  out->Add("nv_inference_exec_count", labels, s.execution_count);
  for (const TritonDuration& t : kTritonDurations)
    out->Add(t.name, labels, (s.*t.field).ns / static_cast<uint64_t>(kNsPerMicrosecond));
  out->Add("nv_inference_pending_request_count", labels, sample.queue_depth);
}

void AppendUnroutedFailures(const FailureCounters& failures, TextExposition* out) {
  for (FailureReason reason : kAllReasons) {
    out->Add("harrier_request_failure_total",
             {{"model", ""}, {"version", ""}, {"reason", FailureReasonName(reason)}},
             failures.Read(reason));
  }
}

void AppendModelState(const ModelVersionState& state, double load_seconds, uint64_t warmup_failures,
                      TextExposition* out) {
  const std::string version = std::to_string(state.version);
  for (ModelState s : kAllStates) {
    out->Add("harrier_model_state",
             {{"model", state.name}, {"version", version}, {"state", ModelStateName(s)}},
             uint64_t{s == state.state ? 1u : 0u});
  }
  if (load_seconds >= 0) {
    out->Add("harrier_model_load_duration_seconds", {{"model", state.name}, {"version", version}},
             load_seconds);
  }
  if (state.state == ModelState::kReady) {
    out->Add("harrier_model_warmup_failures_total", {{"model", state.name}, {"version", version}},
             warmup_failures);
  }
}

void AppendTrafficMetrics(const TrafficSample& sample, TextExposition* out) {
  for (const auto& [version, weight] : sample.weights) {
    const std::string v = std::to_string(version);
    out->Add("harrier_traffic_weight", {{"model", sample.model}, {"version", v}},
             static_cast<double>(weight));
  }
  out->Add("harrier_traffic_rollbacks_total", {{"model", sample.model}}, sample.rollbacks);
  if (!sample.breakers.empty() || sample.breaker_panics != 0) {  // once counted, for good
    out->Add("harrier_traffic_breaker_panics_total", {{"model", sample.model}},
             sample.breaker_panics);
  }
  for (const TrafficSample::Breaker& b : sample.breakers) {
    const std::string v = std::to_string(b.version);
    for (const auto& [state, current] : b.states) {
      out->Add("harrier_traffic_breaker_state",
               {{"model", sample.model}, {"version", v}, {"state", state}}, current ? 1.0 : 0.0);
    }
  }
  for (const TrafficSample::Shadow& s : sample.shadows) {
    const std::string v = std::to_string(s.version);
    out->Add("harrier_shadow_requests_total",
             {{"model", sample.model}, {"version", v}, {"outcome", "compared"}}, s.compared);
    out->Add("harrier_shadow_requests_total",
             {{"model", sample.model}, {"version", v}, {"outcome", "error"}}, s.errors);
    out->Add("harrier_shadow_requests_total",
             {{"model", sample.model}, {"version", v}, {"outcome", "shed"}}, s.shed);
    out->Add("harrier_shadow_requests_total",
             {{"model", sample.model}, {"version", v}, {"outcome", "mismatched"}}, s.mismatched);
    out->Add("harrier_shadow_top1_agreements_total",
             {{"model", sample.model}, {"version", v}, {"agree", "true"}}, s.top1_agreed);
    out->Add("harrier_shadow_top1_agreements_total",
             {{"model", sample.model}, {"version", v}, {"agree", "false"}},
             s.top1_compared - s.top1_agreed);
    out->Add("harrier_shadow_max_abs_difference", {{"model", sample.model}, {"version", v}},
             s.last_max_abs_difference);
  }
}

}  // namespace harrier
