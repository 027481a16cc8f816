// Reading and checking the fields of a generation request: what openai_request.cc and
// generate_request.cc share. Internal to this folder.
//
// Every refusal is kInvalidArgument (kPayloadTooLarge for a size over a limit) whose message
// names the field, and the field's path ("max_tokens", "messages[2].role") is recorded as the
// parameter at fault, for the `param` of OpenAI's error body.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harrier/status.h"
#include "protocol/openai/generation_params.h"

namespace harrier::openai {

class FieldReader {
 public:
  // `param_at_fault` (may be null) receives the path of the field a refusal is about, or ""
  // for one about no field (the body is not JSON).
  explicit FieldReader(std::string* param_at_fault) : param_at_fault_(param_at_fault) {}

  Status Fail(std::string_view param, std::string message);
  Status TooLarge(std::string_view param, std::string message);

  // The body as a JSON object. The object lives in `parser`.
  StatusOr<simdjson::dom::object> ParseObject(simdjson::dom::parser& parser, std::string_view body);

  // Each reads a non-null value into `out`, or refuses a value of the wrong type or range.
  // Integers may be sent as 3 or 3.0, never 3.5.
  Status Integer(simdjson::dom::element value, std::string_view param, int64_t min, int64_t max,
                 int32_t* out);
  Status Number(simdjson::dom::element value, std::string_view param, double min, double max,
                float* out);
  Status Bool(simdjson::dom::element value, std::string_view param, bool* out);
  Status String(simdjson::dom::element value, std::string_view param, std::string* out);
  Status Object(simdjson::dom::element value, std::string_view param, simdjson::dom::object* out);
  // 0..2^32-1, or -1 (llama.cpp's "random"), which leaves `out` empty.
  Status Seed(simdjson::dom::element value, std::string_view param, std::optional<uint32_t>* out);
  // A string or an array of strings, each 1..limits.max_stop_bytes long, at most
  // limits.max_stop_sequences of them.
  Status Stop(simdjson::dom::element value, std::string_view param, const RequestLimits& limits,
              std::vector<std::string>* out);

 private:
  std::string* const param_at_fault_;
};

// "an integer", "a string", ... for messages.
std::string_view JsonTypeName(simdjson::dom::element_type type);

}  // namespace harrier::openai
