// ModelMetrics: one model version's Prometheus histograms and counters, resolved once when the
// version loads (ModelStats in src/lifecycle/ owns one and records into it at the points where
// it records Triton's statistics), so the request path never looks a label up.
//
// Also the names: every per-model family Harrier exposes — its own harrier_* ones and Triton's
// nv_inference_* ones, which are computed at scrape time from the Triton statistics counters
// and cost nothing per request — is written here (AppendModelVersionMetrics and friends), so
// docs/metrics.md has one file to agree with.
//
// Thread safety: the Record* members and the histograms from any thread (relaxed atomics);
// Append* from the scraping thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string_view>

#include "harrier/generation.h"
#include "harrier/model_manager.h"
#include "harrier/status.h"
#include "observability/histogram.h"
#include "observability/text_exposition.h"

namespace harrier {

// harrier_request_failure_total's `reason` label: a bounded set, whatever the client sends.
enum class FailureReason {
  kBadRequest,   // kInvalidArgument, kPayloadTooLarge, kUnimplemented (400, 413, 501)
  kNotFound,     // kNotFound (404)
  kTimeout,      // kDeadlineExceeded (504)
  kCancelled,    // kCancelled (the client went away)
  kRejected,     // kResourceExhausted (429: admission control, rate limits, a full queue)
  kUnavailable,  // kUnavailable (503)
  kInternal,     // kInternal and anything else (500)
};
inline constexpr size_t kFailureReasonCount = 7;
FailureReason FailureReasonFor(StatusCode code);
std::string_view FailureReasonName(FailureReason reason);  // "bad_request", ...

// Where a cancelled request was when its client went away.
enum class CancellationStage {
  kQueued,   // taken out of the queue (or never queued) without running
  kRunning,  // its execution was stopped (ONNX Runtime's terminate flag)
};

// Failures by reason: relaxed atomic counters.
class FailureCounters {
 public:
  void Add(FailureReason reason) {
    counts_[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t Read(FailureReason reason) const {
    return counts_[static_cast<size_t>(reason)].load(std::memory_order_relaxed);
  }

 private:
  std::array<std::atomic<uint64_t>, kFailureReasonCount> counts_{};
};

struct ModelMetrics {
  ModelMetrics();

  // Durations in nanoseconds, of successful requests only (failures are counted by reason).
  Histogram request_duration;  // receipt by the server to the response handed back
  Histogram queue_duration;
  Histogram compute_input_duration;
  Histogram compute_infer_duration;
  Histogram compute_output_duration;
  Histogram batch_size;  // items per successful execution
  // Text generation only (docs/generation.md), exposed for versions that generate.
  Histogram time_to_first_token;    // receipt to the first token sampled
  Histogram time_per_output_token;  // after the first: (last - first) / (tokens - 1)

  FailureCounters failures;
  std::array<std::atomic<uint64_t>, 2> cancellations{};  // by CancellationStage
  std::atomic<int64_t> in_flight{0};                     // admitted and not yet answered
  // Text generation: the prompt tokens of the generations that got a sequence (of them, those
  // taken from a cached prefix), and the tokens sampled. Counted by the version's requests, not
  // read from its engine: a load's warm-up is not in them, and a reload keeps them.
  std::atomic<uint64_t> prompt_tokens{0};
  std::atomic<uint64_t> reused_prompt_tokens{0};
  std::atomic<uint64_t> generated_tokens{0};

  void RecordCancellation(CancellationStage stage) {
    cancellations[static_cast<size_t>(stage)].fetch_add(1, std::memory_order_relaxed);
  }
};

// What the scrape knows of one ready model version besides its ModelMetrics.
struct ModelVersionSample {
  const ModelVersionStats* stats = nullptr;  // Triton's counters (name and version set)
  const ModelMetrics* metrics = nullptr;
  uint64_t queue_depth = 0;  // requests waiting in the scheduler's queue
  // A version that generates text: its engine's figures (and its generation histograms are
  // exposed); null for a tensor model.
  const GenerationStats* generation = nullptr;
  // Overload protection's predicted queue delay for a request arriving now; unset when the
  // version has no overload protection (then no harrier_predicted_queue_wait_seconds sample).
  std::optional<double> predicted_queue_wait_seconds = std::nullopt;
};

// Declares every family below (HELP and TYPE), in the order docs/metrics.md lists them. Call
// once per exposition before the Append* functions.
void DeclareModelMetricFamilies(TextExposition* out);
// The per-version families: histograms, success/failure/cancellation/inference/execution
// counters, queue depth and in-flight gauges, and Triton's nv_inference_* names.
void AppendModelVersionMetrics(const ModelVersionSample& sample, TextExposition* out);
// Failures of requests that never reached a model version (unknown model or version, a model
// that is not ready): labelled model="" version="", so that client input never becomes a label.
void AppendUnroutedFailures(const FailureCounters& failures, TextExposition* out);
// harrier_model_state{state=...} (1 for the current state, 0 for the others) for every
// version the repository index lists, its load duration when it finished loading (a
// negative load_seconds: not known), and, for a version that loaded, how many of its implicit
// warm-ups failed.
void AppendModelState(const ModelVersionState& state, double load_seconds, uint64_t warmup_failures,
                      TextExposition* out);

// A model's traffic policy as the scrape sees it (routing/traffic_controller.h), for models that
// have one.
struct TrafficSample {
  std::string model;
  std::vector<std::pair<int64_t, int64_t>> weights;  // version, weight
  uint64_t rollbacks = 0;
  uint64_t breaker_panics = 0;
  struct Shadow {
    int64_t version = 0;
    uint64_t compared = 0, errors = 0, shed = 0, mismatched = 0, top1_agreed = 0, top1_compared = 0;
    double last_max_abs_difference = 0;
  };
  std::vector<Shadow> shadows;
  // Each served version's circuit breaker: every state's name, and whether it is the current.
  struct Breaker {
    int64_t version = 0;
    std::vector<std::pair<std::string, bool>> states;
  };
  std::vector<Breaker> breakers;
};
// harrier_traffic_weight, harrier_traffic_rollbacks_total, harrier_traffic_breaker_state,
// harrier_traffic_breaker_panics_total and
// the harrier_shadow_* families.
void AppendTrafficMetrics(const TrafficSample& sample, TextExposition* out);

}  // namespace harrier
