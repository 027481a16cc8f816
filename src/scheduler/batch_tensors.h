// Batch tensors: which requests may share an execution, gathering their inputs into one batch,
// and splitting the batch's outputs back per request without copying.
#pragma once

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
// across batches. Owned by one worker thread: no locking.
class BatchInputBuffers {
 public:
  // A buffer of at least `size` bytes for input `index`, valid until the next call for `index`.
  std::byte* Get(size_t index, size_t size);

 private:
  std::vector<std::shared_ptr<std::byte[]>> buffers_;
  std::vector<size_t> capacity_;
};

// Concatenates the inputs of `requests` (all BatchCompatible with the first) along the batch
// dim, one copy per byte, into `buffers`; inputs follow the first request's input order.
// BYTES inputs concatenate their serializations. The tensors borrow from `buffers`.
Status GatherInputs(std::span<ScheduledRequest* const> requests, BatchInputBuffers* buffers,
                    std::vector<Tensor>* batched);

// Splits each batch output along its batch dim into `item_counts.size()` consecutive parts of
// item_counts[i] items. A part points into the batch output and shares its owner (no copy).
// kInternal when an output's batch dim is not the sum of the counts, or a BYTES output is not a
// well-formed serialization.
Status SplitOutputs(const std::vector<Tensor>& batch_outputs, std::span<const int64_t> item_counts,
                    std::vector<std::vector<Tensor>>* per_request);

}  // namespace harrier
