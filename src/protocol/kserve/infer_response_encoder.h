// Encoding an InferenceResponse as a KServe v2 REST response body: a JSON header, followed by
// the raw bytes of every output sent as binary data (Triton's binary tensor extension).
//
// Which outputs are binary: an output listed in the request's `outputs` follows its
// RequestedOutput::binary_data (the decoder resolves it from the output's `binary_data`
// parameter, or else the request's `binary_data_output`); outputs of a request that listed none
// follow `binary_data_output`. Binary outputs carry parameter `binary_data_size` and no `data`.
//
// Outputs in system shared memory (`shared_memory`, resolved from the requested outputs'
// parameters) are copied into their regions; their entry carries name, datatype and shape, no
// `data`, no `parameters` and no binary part, as Triton answers them.
//
// JSON values: integers and BOOL as JSON integers and true/false; FP16/BF16 widened to float;
// floating point in the shortest form that reads back to the same value (std::to_chars);
// NaN and infinities as the bare tokens NaN, Infinity, -Infinity (as Triton; see
// core/json_writer.h); BYTES elements as JSON strings, which must be valid UTF-8 (else
// kInvalidArgument telling the client to ask for the output as binary data).
//
// The body is built in one string whose capacity is reserved up front, so each output's bytes
// are copied exactly once.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "harrier/inference_request.h"
#include "harrier/status.h"
#include "shared_memory/shared_memory_tensors.h"

namespace harrier::kserve {

struct EncodedResponse {
  // The JSON header, then the binary outputs (if any) back to back in output order.
  std::string body;
  // Bytes of JSON at the front of `body`: the value of Inference-Header-Content-Length.
  size_t json_header_length = 0;
  // True when at least one output was sent as binary data; the HTTP response then carries
  // Content-Type application/octet-stream and Inference-Header-Content-Length.
  bool binary = false;
};

// `request` supplies the output selection (outputs, binary_data_output) and the id echoed when
// the response has none. Errors: kInvalidArgument for a BYTES output that is not valid UTF-8
// sent as JSON, or an output larger than its shared-memory window (checked for every output
// before any region is written); kInternal when an output's bytes do not match its shape and
// datatype.
StatusOr<EncodedResponse> EncodeInferResponse(
    const InferenceResponse& response, const InferenceRequest& request,
    std::span<const SharedMemoryOutput> shared_memory = {});

}  // namespace harrier::kserve
