#include "lifecycle/model_stats.h"

namespace harrier {
namespace {

uint64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void ModelStats::RecordSuccess(const Durations& d, int64_t batch_size) {
  success_.Add(d.total_ns);
  queue_.Add(d.queue_ns);
  compute_input_.Add(d.compute_input_ns);
  compute_infer_.Add(d.compute_infer_ns);
  compute_output_.Add(d.compute_output_ns);
  inference_count_.fetch_add(static_cast<uint64_t>(batch_size), std::memory_order_relaxed);
  execution_count_.fetch_add(1, std::memory_order_relaxed);
  last_inference_ms_.store(NowMs(), std::memory_order_relaxed);
}

void ModelStats::RecordFailure(uint64_t total_ns) {
  fail_.Add(total_ns);
  last_inference_ms_.store(NowMs(), std::memory_order_relaxed);
}

void ModelStats::Snapshot(ModelVersionStats* out) const {
  out->last_inference_ms = last_inference_ms_.load(std::memory_order_relaxed);
  out->inference_count = inference_count_.load(std::memory_order_relaxed);
  out->execution_count = execution_count_.load(std::memory_order_relaxed);
  out->success = success_.Read();
  out->fail = fail_.Read();
  out->queue = queue_.Read();
  out->compute_input = compute_input_.Read();
  out->compute_infer = compute_infer_.Read();
  out->compute_output = compute_output_.Read();
}

}  // namespace harrier
