// ModelStats: a model version's counters for Triton's statistics extension, and the one place
// that records its Prometheus metrics too (observability/model_metrics.h): each Record* call
// below feeds both, so there is one set of timing code.
//
// Lock-free: every field is a relaxed atomic (the histograms are sharded relaxed atomics), so
// recording costs a few atomic adds on the request path and a reader (GET .../stats, a
// scrape) sees each counter consistently but not a snapshot across counters, which is what
// Triton's statistics promise too.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "harrier/model_manager.h"
#include "harrier/status.h"
#include "observability/model_metrics.h"

namespace harrier {

class ModelStats {
 public:
  // Batch statistics are kept for sizes 1..max(1, max_batch_size).
  explicit ModelStats(int64_t max_batch_size = 0);

  // The max_batch_size it was made for: a reload whose config changes it counts into new ones.
  int64_t max_batch_size() const { return max_batch_size_; }

  // Per request (Triton's inference_stats).
  struct Durations {
    uint64_t queue_ns = 0;
    uint64_t compute_input_ns = 0;
    uint64_t compute_infer_ns = 0;
    uint64_t compute_output_ns = 0;
    uint64_t total_ns = 0;  // from receipt to the response being handed back
  };

  // A request succeeded; `batch_size` is its own item count (inference_count += it). Called
  // before the response is handed back, so that a client that has its answer sees it counted;
  // the time spent handing it back is added by AddOutputTime().
  void RecordSuccess(const Durations& d, int64_t batch_size);
  // Adds the time the response took to hand back (encoding) to compute_output and success,
  // and records the request's compute_output and end-to-end (`total_ns`, receipt to handed
  // back) histograms.
  void AddOutputTime(uint64_t compute_output_ns, uint64_t total_ns);
  // A request failed with `code` (counted by FailureReasonFor(code)).
  void RecordFailure(uint64_t total_ns, StatusCode code);
  // A cancelled request (also recorded by RecordFailure with kCancelled): where it was.
  void RecordCancellation(CancellationStage stage) { metrics_.RecordCancellation(stage); }
  // Requests admitted and not yet answered (harrier_inflight_requests).
  void RequestStarted() { metrics_.in_flight.fetch_add(1, std::memory_order_relaxed); }
  void RequestFinished() { metrics_.in_flight.fetch_sub(1, std::memory_order_relaxed); }
  // One model execution of `batch_size` items (execution_count += 1, batch_stats), recorded
  // before its requests are answered; AddBatchOutputTime() adds the answering time after.
  void RecordExecution(int64_t batch_size, uint64_t compute_input_ns, uint64_t compute_infer_ns);
  void AddBatchOutputTime(int64_t batch_size, uint64_t compute_output_ns);
  // Text generation: receipt to the first token, and the time per token after it.
  void RecordTimeToFirstToken(uint64_t ns) { metrics_.time_to_first_token.Observe(ns); }
  void RecordTimePerOutputToken(uint64_t ns) { metrics_.time_per_output_token.Observe(ns); }
  // A generation got its sequence: its prompt's tokens, `reused` of them from a cached prefix.
  void RecordPromptTokens(uint64_t prompt, uint64_t reused) {
    metrics_.prompt_tokens.fetch_add(prompt, std::memory_order_relaxed);
    metrics_.reused_prompt_tokens.fetch_add(reused, std::memory_order_relaxed);
  }
  // A generation sampled one token.
  void RecordGeneratedToken() { metrics_.generated_tokens.fetch_add(1, std::memory_order_relaxed); }

  // Fills the counter fields of `out` (name and version are left to the caller).
  void Snapshot(ModelVersionStats* out) const;
  const ModelMetrics& metrics() const { return metrics_; }

 private:
  struct Counter {
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> ns{0};
    void Add(uint64_t n) {
      count.fetch_add(1, std::memory_order_relaxed);
      ns.fetch_add(n, std::memory_order_relaxed);
    }
    void AddNs(uint64_t n) { ns.fetch_add(n, std::memory_order_relaxed); }
    DurationStat Read() const {
      return {count.load(std::memory_order_relaxed), ns.load(std::memory_order_relaxed)};
    }
  };
  struct BatchCounters {
    Counter compute_input, compute_infer, compute_output;
  };

  Counter success_, fail_, queue_, compute_input_, compute_infer_, compute_output_;
  std::atomic<uint64_t> inference_count_{0};
  std::atomic<uint64_t> execution_count_{0};
  std::atomic<uint64_t> last_inference_ms_{0};
  const int64_t max_batch_size_;                  // constant after construction
  const int64_t max_batch_stat_;                  // constant after construction
  const std::unique_ptr<BatchCounters[]> batch_;  // index = batch size; [0] unused
  ModelMetrics metrics_;
};

}  // namespace harrier
