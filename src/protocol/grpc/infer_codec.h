// The gRPC inference codec: inference::ModelInferRequest (KServe v2 / Triton gRPC) to and from
// Harrier's transport-independent InferenceRequest / InferenceResponse.
//
// Input data comes either as `raw_input_contents` (one bytes entry per input, in input order:
// little-endian, densely packed, BYTES elements each a 4-byte little-endian length and the
// bytes, which is also Harrier's Tensor layout) or as typed `contents` per input (the repeated
// field matching the datatype; FP16 and BF16 have none and must be raw). A request uses one form
// for all its inputs.
//
// Memory: raw inputs are not copied. DecodeModelInferRequest moves the raw_input_contents
// strings out of the message into a holder the tensors share (Tensor::owner), so the tensors
// stay valid after the gRPC library frees the message. Typed inputs are converted into buffers
// the tensors own. Shape claims are checked against DecodeLimits before anything is allocated.
//
// Shared memory (Triton's extension): an input whose parameters name a region
// (`shared_memory_region`, `shared_memory_byte_size`, `shared_memory_offset`) is read from it
// without a copy and has no raw_input_contents entry (the entries belong, in order, to the other
// inputs); an output that names one is written into it, and the response carries its name,
// datatype and shape, no contents, and an empty raw_output_contents entry (as Triton).
//
// Outputs: raw_output_contents, whatever form the inputs took, as Triton answers and its clients
// read. A request parameter `typed_outputs: true` asks for typed `contents` instead — unless an
// output is FP16 or BF16, which has no typed form: then every output of that response is raw
// (raw_output_contents must hold one entry per output, so forms cannot mix).
//
// Thread safety: pure functions over their arguments.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "harrier/inference_request.h"
#include "harrier/status.h"
#include "protocol/grpc/grpc_service.pb.h"
#include "protocol/kserve/infer_request_decoder.h"
#include "shared_memory/shared_memory_tensors.h"

namespace harrier::grpc_frontend {

enum class OutputForm { kRaw, kTyped };

// The request parameter (bool) that asks for typed output contents.
inline constexpr std::string_view kTypedOutputsParameter = "typed_outputs";

struct DecodedInferRequest {
  std::unique_ptr<InferenceRequest> request;
  // How the response should carry its outputs (see the file comment).
  OutputForm output_form = OutputForm::kRaw;
};

// Decodes `message`, moving its raw_input_contents out (the message is left without them).
// Sets model_name, model_version ("" -> nullopt), id, parameters, inputs and outputs
// (with `classification` from an output's parameters), and priority and timeout_us from the
// request parameters `priority` and `timeout` (as the REST API does). received_at, deadline,
// cancellation and client_id are the caller's.
//
// Errors, each naming the field or tensor at fault:
//   kInvalidArgument: an empty model name or bad version, an unknown datatype, a negative
//     dimension, duplicate input or output names, raw_input_contents whose count does not match
//     the inputs or whose size does not match an input's shape and datatype, raw and typed data
//     mixed, typed contents in the wrong field for the datatype or with the wrong element count
//     or out of the datatype's range, FP16/BF16 sent typed, a parameter with no value, a
//     uint64 parameter over INT64_MAX, bad `priority`/`timeout`/`classification` values, a
//     `typed_outputs` that is not a bool; a shared-memory input that `shared_memory` refuses
//     (off, unknown region, a size that does not match the shape, a span outside the region)
//     or that also has contents.
//   kPayloadTooLarge: a shape claim or total over `limits`.
StatusOr<DecodedInferRequest> DecodeModelInferRequest(
    inference::ModelInferRequest* message, const kserve::DecodeLimits& limits,
    const SharedMemoryContext& shared_memory = SharedMemoryContext());

// Fills `out` from `response`. `selection` supplies the requested outputs (their
// `classification`) and the model name and id to use when the response has none;
// `max_batch_size` is the model's, for classification's batch rows.
// `shared_memory`: the outputs written into regions (ResolveSharedMemoryOutputs).
// Errors: kInvalidArgument from classification (BOOL/BYTES outputs) or for an output larger
// than its shared-memory window (checked before any region is written); kInternal when an
// output's bytes do not match its shape and datatype.
Status EncodeModelInferResponse(InferenceResponse response, const InferenceRequest& selection,
                                int64_t max_batch_size, OutputForm form,
                                inference::ModelInferResponse* out,
                                std::span<const SharedMemoryOutput> shared_memory = {});

// InferParameter <-> ParameterValue (uint64 values over INT64_MAX are refused: kInvalidArgument).
StatusOr<ParameterValue> FromInferParameter(const inference::InferParameter& parameter,
                                            std::string_view name);
void ToInferParameter(const ParameterValue& value, inference::InferParameter* out);

// "" -> nullopt; a positive decimal integer -> its value; else kInvalidArgument.
StatusOr<std::optional<int64_t>> ParseModelVersion(std::string_view version);

}  // namespace harrier::grpc_frontend
