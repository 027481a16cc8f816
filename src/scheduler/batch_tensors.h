// Batch tensors: which requests may share an execution, gathering their inputs into one batch,
// and splitting the batch's outputs back per request without copying.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "harrier/status.h"
#include "harrier/tensor.h"
#include "scheduler/scheduled_request.h"

namespace harrier {

// True when `a` and `b` can run in one batch: the same input names, dtypes and dims after the
// batch dim, and the same outputs requested.
bool BatchCompatible(const ScheduledRequest& a, const ScheduledRequest& b);

// Reusable input buffers, one per input position, grown to the next power of two and kept
// across batches, so that a steady load gathers into memory it already has. They also shrink,
// so that one burst of large batches does not hold its memory for good (probe 30): a buffer more
// than four times what every call of the last kShrinkPeriod calls for its input needed is
// replaced by one the size of the largest of them, and Release() frees them all (the scheduler
// calls it when the worker has been idle a while). Owned by one worker thread: no locking;
// held_bytes() may be read from any thread.
class BatchInputBuffers {
 public:
  static constexpr int kShrinkPeriod = 256;

  // A buffer of at least `size` bytes for input `index`, valid until the next call for `index`
  // (or Release()).
  std::byte* Get(size_t index, size_t size);
  // Frees every buffer; the next Get() allocates again.
  void Release();
  // The bytes the buffers hold now.
  size_t held_bytes() const { return held_bytes_.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    std::shared_ptr<std::byte[]> buffer;
    size_t capacity = 0;
    size_t period_max = 0;  // the largest size asked in this period
    int period_calls = 0;
  };
  void Allocate(Slot* slot, size_t capacity);

  std::vector<Slot> slots_;
  std::atomic<size_t> held_bytes_{0};
};

// Concatenates the inputs of `requests` (all BatchCompatible with the first) along the batch
// dim, one copy per byte, into `buffers`; inputs follow the first request's input order.
// BYTES inputs concatenate their serializations. The tensors borrow from `buffers`.
Status GatherInputs(std::span<ScheduledRequest* const> requests, BatchInputBuffers* buffers,
                    std::vector<Tensor>* batched);

// kInternal, naming the output, when an output of a model with a batch dim does not have
// `items` rows: the model broke the batching contract (max_batch_size > 0: every output's first
// dim is the batch dim), whether its run held one request or several (probe 58: a request alone
// was answered 200 with the wrong number of rows, the same request in a batch 500).
Status CheckBatchDim(std::span<const Tensor> outputs, int64_t items);

// Splits each batch output along its batch dim into `item_counts.size()` consecutive parts of
// item_counts[i] items. A part points into the batch output and shares its owner (no copy).
// kInternal when an output's batch dim is not the sum of the counts (CheckBatchDim), or a BYTES
// output is not a well-formed serialization.
Status SplitOutputs(const std::vector<Tensor>& batch_outputs, std::span<const int64_t> item_counts,
                    std::vector<std::vector<Tensor>>* per_request);

}  // namespace harrier
