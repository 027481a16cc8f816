#include "protocol/openai/endpoint_answers.h"

#include <chrono>
#include <utility>

#include "core/status_mapping.h"
#include "protocol/openai/generate_response.h"
#include "protocol/openai/openai_error.h"

namespace harrier::openai {

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = std::move(body);
  return r;
}

HttpResponse ErrorResponse(int kind, const Status& status, std::string_view param,
                           std::string_view code) {
  const int http = HttpStatusFor(status.code());
  HttpResponse r = IsTriton(kind) ? JsonResponse(http, GenerateErrorJson(status.message()))
                                  : JsonResponse(http, OpenAiErrorJson(status, param, code));
  // Every 429, and a 503 that says when to come back (a model still loading on /v1).
  if (const int seconds = RetryAfterSeconds(status); seconds > 0)
    r.headers.emplace_back("Retry-After", std::to_string(seconds));
  return r;
}

HttpResponse RefusalResponse(int kind, const Status& status) {
  const std::string_view message = status.message();
  const bool too_long = status.code() == StatusCode::kInvalidArgument &&
                        message.rfind("the prompt is ", 0) == 0 &&
                        message.find("the model's context") != std::string_view::npos;
  if (!too_long) return ErrorResponse(kind, status);
  return ErrorResponse(kind, status, kind == kChat ? "messages" : "prompt",
                       "context_length_exceeded");
}

openai::FinishReason WireReason(harrier::FinishReason reason) {
  return reason == harrier::FinishReason::kLength ? openai::FinishReason::kLength
                                                  : openai::FinishReason::kStop;
}

}  // namespace harrier::openai
