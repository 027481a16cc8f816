// Decoding a KServe v2 REST inference request (JSON, optionally followed by binary tensor data)
// into an InferenceRequest.
//
// Wire format (docs/api.md): a JSON header `{"id"?, "parameters"?, "inputs": [...],
// "outputs"?: [...]}`, then, with Triton's binary tensor extension, the raw bytes of every input
// that carries `parameters.binary_data_size`, back to back in input order. The header's length
// comes from the `Inference-Header-Content-Length` HTTP header (the whole body when absent).
//
// Memory: inputs sent as binary data are views into `body` (Tensor::owner null; the request's
// `body` member keeps the bytes alive). Inputs sent as JSON `data` are converted into a buffer the
// tensor owns. Inputs in system shared memory (parameters `shared_memory_region`,
// `shared_memory_byte_size`, `shared_memory_offset`) are views into the region, which
// Tensor::owner keeps mapped (shared_memory/shared_memory_tensors.h). Requested outputs keep
// their shared-memory parameters; the caller resolves them (ResolveSharedMemoryOutputs). The
// shape's claim is checked against DecodeLimits before anything is allocated.
//
// Parameters: the request's `binary_data_output` sets InferenceRequest::binary_data_output and is
// not kept in InferenceRequest::parameters; every other request parameter is.
//
// Padding: simdjson reads up to kJsonPaddingBytes past the end of the JSON text. When the body
// string has that much slack after the header (binary bytes or spare capacity), the header is
// parsed in place; otherwise it is copied once into a per-thread scratch buffer. A front end can
// avoid the copy by reserving `body size + kJsonPaddingBytes` of capacity when it reads a body.
//
// Thread safety: DecodeInferRequest may be called from any number of threads at once (it keeps
// one parser and scratch buffer per thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "harrier/backend.h"
#include "harrier/inference_request.h"
#include "harrier/status.h"
#include "shared_memory/shared_memory_tensors.h"

namespace harrier::kserve {

// Limits on what one request may claim. Breaches are kPayloadTooLarge (HTTP 413).
struct DecodeLimits {
  // Elements one input may claim (the product of its shape). Default 2^28 (268,435,456): a
  // 256 MB UINT8 image batch or a 1 GiB FP32 tensor fits; a 10 GB claim does not.
  int64_t max_tensor_elements = int64_t{1} << 28;
  // Bytes that all inputs of one request may hold together, JSON-decoded and binary alike.
  // Default 2 GiB.
  uint64_t max_total_input_bytes = uint64_t{1} << 31;
  // Dimensions one input shape may have. Default 32 (numpy's classic limit). Over it: 400.
  size_t max_shape_dims = 32;
};

// Readable bytes the JSON parser wants after the header (simdjson::SIMDJSON_PADDING).
inline constexpr size_t kJsonPaddingBytes = 64;

// Decodes a request. `body` is the whole HTTP body (null is treated as empty);
// `json_header_length` is the JSON header's size in bytes (== body->size() when the request
// has no binary part). model_name, model_version and received_at are left for the caller.
//
// Errors, each naming the field or tensor at fault:
//   kInvalidArgument: malformed JSON, missing or mistyped fields, unknown fields, values out of
//     range for the datatype, element counts that do not match the shape, binary sizes that
//     do not match the shape or the body, duplicate input or output names; a shared-memory
//     input that `shared_memory` refuses (off, unknown region, a size that does not match the
//     shape, a span outside the region) or that also has `data` or `binary_data_size`.
//   kPayloadTooLarge: a shape claim or a total over `limits`.
StatusOr<std::unique_ptr<InferenceRequest>> DecodeInferRequest(
    std::shared_ptr<const std::string> body, size_t json_header_length,
    const DecodeLimits& limits = DecodeLimits(),
    const SharedMemoryContext& shared_memory = SharedMemoryContext());

// Triton's raw binary request (`Inference-Header-Content-Length: 0`): the whole body is the
// bytes of the model's only input, whose shape is deduced as Triton does from its client shape
// (`input`, the batch dim -1 when `max_batch_size` > 0) and the body size: with one variable
// dim besides the batch, a batch of 1 and that dim from the size; with none, a batching
// model's batch is the size over one item's bytes (Harrier's addition; Triton sends 1). A
// BYTES input must be one element (dims [1]): the body is that element. Outputs are answered
// as for a request that names none, in binary (`binary_data_output`), as Triton does.
// Errors (kInvalidArgument, Triton's words where it has them): a model with no or several
// inputs, two variable dims, a BYTES input of another shape, a size that is not a whole
// number of rows or items (or a batch outside 1..max_batch_size).
StatusOr<std::unique_ptr<InferenceRequest>> DecodeRawInferRequest(
    std::shared_ptr<const std::string> body, std::string_view model_name,
    std::span<const TensorSpec> inputs, int64_t max_batch_size);

}  // namespace harrier::kserve
