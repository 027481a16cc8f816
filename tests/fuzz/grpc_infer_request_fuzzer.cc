// libFuzzer target: the gRPC front end's request decoding. The input is a serialized
// inference::ModelInferRequest, as it arrives in a ModelInfer call; bytes protobuf refuses are
// refused by the gRPC library before our code, so they end the run. A message that parses goes
// through DecodeModelInferRequest (protocol/grpc/infer_codec.h), and a request that decodes is
// echoed back (every input as an output, and every requested output's `classification` applied)
// through EncodeModelInferResponse, unbatched and (when the shapes allow it) batched.
//
// Findings besides the sanitizers': a decoding error other than the two the codec documents
// (kInvalidArgument, kPayloadTooLarge), a decoded tensor whose bytes do not match its shape, and
// an echo the encoder refuses other than for classification of a BOOL or BYTES output.
// Seeds: tests/fuzz/corpus/grpc_infer_request, built from text by tests/fuzz/make_seeds.py.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "protocol/grpc/infer_codec.h"

namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "grpc_infer_request_fuzzer: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // protobuf logs every string field it refuses (invalid UTF-8) to stderr.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using harrier::StatusCode;
  inference::ModelInferRequest message;
  if (!message.ParseFromArray(data, static_cast<int>(size))) return 0;
  harrier::kserve::DecodeLimits limits;
  limits.max_tensor_elements = 1 << 20;  // keep the fuzzer's memory bounded
  limits.max_total_input_bytes = 1 << 24;
  auto decoded = harrier::grpc_frontend::DecodeModelInferRequest(&message, limits);
  if (!decoded.ok()) {
    const StatusCode code = decoded.status().code();
    if (code != StatusCode::kInvalidArgument && code != StatusCode::kPayloadTooLarge)
      Fail("decoding failed with an undocumented code: " + decoded.status().ToString());
    return 0;
  }

  const harrier::InferenceRequest& request = *decoded->request;
  for (const harrier::Tensor& t : request.inputs) {
    const std::optional<int64_t> elements = harrier::ElementCount(t.shape);
    if (!elements) Fail("input '" + t.name + "' decoded with an invalid shape");
    if (t.dtype == harrier::DataType::kBytes) {
      if (!harrier::ValidateBytesTensor(t.bytes(), *elements).ok())
        Fail("BYTES input '" + t.name + "' decoded with a malformed serialization");
    } else if (t.size_bytes != static_cast<uint64_t>(*elements) * DataTypeByteSize(t.dtype)) {
      Fail("input '" + t.name + "' decoded with bytes that do not match its shape");
    }
  }
  // Batched, a model's outputs have the request's batch size (1..max_batch_size) first, as
  // ValidateAndPrepare (lifecycle/model_io.h) holds the inputs to before the model runs;
  // classification relies on it. An echo of inputs that break it is not a response a model
  // could give, so it is only encoded unbatched.
  bool batchable = true;
  for (const harrier::Tensor& t : request.inputs)
    batchable = batchable && !t.shape.empty() && t.shape[0] >= 1 && t.shape[0] <= 4;
  for (const int64_t max_batch_size : {0, 4}) {
    if (max_batch_size > 0 && !batchable) continue;
    harrier::InferenceResponse response;
    response.model_name = "fuzz";
    response.id = request.id;
    response.outputs = request.inputs;
    inference::ModelInferResponse out;
    const harrier::Status encoded = harrier::grpc_frontend::EncodeModelInferResponse(
        std::move(response), request, max_batch_size, decoded->output_form, &out);
    if (!encoded.ok() && encoded.code() != StatusCode::kInvalidArgument)
      Fail("the echo of a decoded request did not encode: " + encoded.ToString());
    std::string wire;
    out.SerializeToString(&wire);
  }
  return 0;
}
