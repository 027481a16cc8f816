#include "lifecycle/model_stats.h"

#include <algorithm>

namespace harrier {
namespace {

uint64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ModelStats::ModelStats(int64_t max_batch_size)
    : max_batch_size_(max_batch_size),
      max_batch_stat_(std::max<int64_t>(1, max_batch_size)),
      batch_(new BatchCounters[static_cast<size_t>(max_batch_stat_) + 1]) {}

void ModelStats::RecordExecution(int64_t batch_size, uint64_t compute_input_ns,
                                 uint64_t compute_infer_ns) {
  execution_count_.fetch_add(1, std::memory_order_relaxed);
  metrics_.batch_size.Observe(static_cast<uint64_t>(std::max<int64_t>(0, batch_size)));
  if (batch_size < 1 || batch_size > max_batch_stat_) return;
  BatchCounters& b = batch_[batch_size];
  b.compute_input.Add(compute_input_ns);
  b.compute_infer.Add(compute_infer_ns);
  b.compute_output.Add(0);
}

void ModelStats::AddBatchOutputTime(int64_t batch_size, uint64_t compute_output_ns) {
  if (batch_size < 1 || batch_size > max_batch_stat_) return;
  batch_[batch_size].compute_output.AddNs(compute_output_ns);
}

void ModelStats::AddOutputTime(uint64_t compute_output_ns, uint64_t total_ns) {
  compute_output_.AddNs(compute_output_ns);
  success_.AddNs(compute_output_ns);
  metrics_.compute_output_duration.Observe(compute_output_ns);
  metrics_.request_duration.Observe(total_ns);
}

void ModelStats::RecordSuccess(const Durations& d, int64_t batch_size) {
  success_.Add(d.total_ns);
  queue_.Add(d.queue_ns);
  compute_input_.Add(d.compute_input_ns);
  compute_infer_.Add(d.compute_infer_ns);
  compute_output_.Add(d.compute_output_ns);
  metrics_.queue_duration.Observe(d.queue_ns);
  metrics_.compute_input_duration.Observe(d.compute_input_ns);
  metrics_.compute_infer_duration.Observe(d.compute_infer_ns);
  inference_count_.fetch_add(static_cast<uint64_t>(batch_size), std::memory_order_relaxed);
  last_inference_ms_.store(NowMs(), std::memory_order_relaxed);
}

void ModelStats::RecordFailure(uint64_t total_ns, StatusCode code) {
  fail_.Add(total_ns);
  metrics_.failures.Add(FailureReasonFor(code));
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
  out->batch_stats.clear();
  for (int64_t size = 1; size <= max_batch_stat_; ++size) {
    const BatchCounters& b = batch_[size];
    BatchStat stat{static_cast<uint64_t>(size), b.compute_input.Read(), b.compute_infer.Read(),
                   b.compute_output.Read()};
    if (stat.compute_infer.count > 0) out->batch_stats.push_back(stat);
  }
}

}  // namespace harrier
