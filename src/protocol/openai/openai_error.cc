#include "protocol/openai/openai_error.h"

#include "protocol/openai/json_text.h"

namespace harrier::openai {

std::string_view OpenAiErrorType(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kPayloadTooLarge:
    case StatusCode::kUnimplemented: return "invalid_request_error";
    case StatusCode::kResourceExhausted: return "rate_limit_error";
    default: return "server_error";
  }
}

std::string OpenAiErrorJson(const Status& status, std::string_view param, std::string_view code) {
  std::string out = "{\"error\":{\"message\":";
  AppendJsonText(&out, status.message());
  out.append(",\"type\":");
  AppendJsonString(&out, OpenAiErrorType(status.code()));
  out.append(",\"param\":");
  if (param.empty()) {
    out.append("null");
  } else {
    AppendJsonText(&out, param);
  }
  out.append(",\"code\":");
  if (code.empty()) {
    out.append("null");
  } else {
    AppendJsonText(&out, code);
  }
  out.append("}}");
  return out;
}

}  // namespace harrier::openai
