// Tensors in system shared memory: the parameters of Triton's shared-memory extension on an
// input or a requested output (`shared_memory_region`, `shared_memory_offset` (default 0),
// `shared_memory_byte_size`), and reading and writing tensor bytes through a
// SharedMemoryRegistry. The REST and gRPC codecs both use these, so that both answer the same
// requests with the same errors.
//
// Inputs are not copied: the tensor's data points into the region's mapping and Tensor::owner
// pins it (the backend copies only what it copies for any other misaligned input). Outputs are
// copied once, from the backend's tensor into the region, when the response is encoded; the
// response then carries the output's name, datatype and shape and no data.
//
// Thread safety: pure functions over their arguments (the registry locks for itself).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "harrier/inference_request.h"
#include "harrier/status.h"
#include "harrier/tensor.h"
#include "shared_memory/shared_memory_registry.h"

namespace harrier {

// The three parameters of one tensor, as sent.
struct SharedMemoryRef {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

// nullopt when `parameters` name no shared memory. kInvalidArgument, `what` ("input 'x'")
// first: a region without a byte size or the reverse (Triton requires both), an offset alone,
// a region that is not a string, an offset or size that is not an integer >= 0.
StatusOr<std::optional<SharedMemoryRef>> SharedMemoryRefOf(const Parameters& parameters,
                                                           std::string_view what);

// Where a codec finds tensors in shared memory.
struct SharedMemoryContext {
  // Not owned. Null: shared memory is off on this server (--allow-client-shm), and any
  // tensor that names a region is refused.
  const SharedMemoryRegistry* registry = nullptr;
  // The model, named in Triton's byte-size message.
  std::string_view model_name;
};

// Points `tensor` (its name, datatype and shape already set) at `ref`'s bytes, the region
// pinned in tensor->owner. kInvalidArgument: shared memory off; what the registry refuses
// (unknown region, a span outside it); a byte size other than the shape and datatype need
// (Triton's "input byte size mismatch for input 'x' for model 'm'. Expected N, got M"); a
// BYTES input whose bytes are not a well-formed serialization of its elements.
Status AttachSharedMemoryInput(const SharedMemoryContext& context, const SharedMemoryRef& ref,
                               Tensor* tensor);

// A requested output that the response writes into shared memory.
struct SharedMemoryOutput {
  std::string name;
  SharedMemoryWindow window;  // pinned until the response is encoded
};

// The shared-memory outputs among `outputs` (from their parameters), each window resolved and
// pinned now, while the request is decoded, as Triton does. kInvalidArgument: as
// SharedMemoryRefOf and the registry; shared memory off; shared memory and `classification`
// on the same output.
StatusOr<std::vector<SharedMemoryOutput>> ResolveSharedMemoryOutputs(
    const SharedMemoryContext& context, const std::vector<RequestedOutput>& outputs);

// The entry for output `name`, or null.
const SharedMemoryOutput* FindSharedMemoryOutput(std::span<const SharedMemoryOutput> outputs,
                                                 std::string_view name);

// kInvalidArgument when `output` does not fit its window: Triton's "shared memory size
// specified with the request for output 'x' (N bytes) should be at least M bytes to hold the
// results".
Status CheckSharedMemoryOutput(const Tensor& output, const SharedMemoryOutput& target);

// Copies `output`'s bytes to the start of its window. REQUIRES: CheckSharedMemoryOutput is Ok.
void WriteSharedMemoryOutput(const Tensor& output, const SharedMemoryOutput& target);

}  // namespace harrier
