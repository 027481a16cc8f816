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

namespace {

std::string ErrorJson(std::string_view message, std::string_view type, std::string_view param,
                      std::string_view code) {
  std::string out = "{\"error\":{\"message\":";
  AppendJsonText(&out, message);
  out.append(",\"type\":");
  AppendJsonString(&out, type);
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

}  // namespace

std::string OpenAiErrorJson(const Status& status, std::string_view param, std::string_view code) {
  return ErrorJson(status.message(), OpenAiErrorType(status.code()), param, code);
}

std::string OpenAiErrorJson(int http_status, std::string_view message, std::string_view code) {
  const std::string_view type = http_status == 429  ? "rate_limit_error"
                                : http_status < 500 ? "invalid_request_error"
                                                    : "server_error";
  return ErrorJson(message, type, {}, code);
}

}  // namespace harrier::openai
