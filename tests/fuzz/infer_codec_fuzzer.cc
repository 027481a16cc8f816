// libFuzzer target: the KServe v2 request decoder and response encoder must turn any byte
// string into a request or a clear error — never a crash, a hang, a sanitizer report or an
// allocation sized by an unchecked claim.
//
// Input layout: the first 4 bytes (little-endian) give the JSON header length modulo the
// body size + 1 (as Inference-Header-Content-Length would); the rest is the body. A decoded
// request is echoed back through the encoder (every input as an output, binary and JSON).
// Built and run by tools/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "protocol/kserve/infer_request_decoder.h"
#include "protocol/kserve/infer_response_encoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t raw_length;
  std::memcpy(&raw_length, data, 4);
  auto body = std::make_shared<std::string>(reinterpret_cast<const char*>(data + 4), size - 4);
  const size_t header_length = raw_length % (body->size() + 1);
  harrier::kserve::DecodeLimits limits;
  limits.max_tensor_elements = 1 << 20;  // keep the fuzzer's memory bounded
  limits.max_total_input_bytes = 1 << 24;
  auto decoded = harrier::kserve::DecodeInferRequest(body, header_length, limits);
  if (!decoded.ok()) return 0;

  const harrier::InferenceRequest& request = **decoded;
  harrier::InferenceResponse response;
  response.model_name = "fuzz";
  response.id = request.id;
  for (const harrier::Tensor& t : request.inputs) response.outputs.push_back(t);
  auto encoded = harrier::kserve::EncodeInferResponse(response, request);
  (void)encoded;
  return 0;
}
