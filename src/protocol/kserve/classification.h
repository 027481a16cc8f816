// Triton's classification extension: replaces an output tensor by its top-N entries, as BYTES
// strings "value:index" (value formatted like C's "%f" for floating point, as Triton's
// std::to_string does; index within the batch row), or "value:index:label" where the output's
// labels (config label_filename) name that index with a non-empty line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harrier/status.h"
#include "harrier/tensor.h"

namespace harrier::kserve {

// With `max_batch_size` > 0 the first dimension of `output` is the batch: the result is BYTES
// [batch, min(top_n, classes)] where classes is the element count of one batch row. Without
// batching the whole tensor is one row and the result is [min(top_n, classes)].
// Entries are ordered by value, highest first; equal values by lower index first; NaN last.
// REQUIRES: top_n > 0. Errors: kInvalidArgument for BOOL or BYTES outputs; kInternal when the
// tensor's bytes do not match its shape.
StatusOr<Tensor> ClassifyOutput(const Tensor& output, int64_t top_n, int64_t max_batch_size,
                                const std::vector<std::string>* labels = nullptr);

}  // namespace harrier::kserve
