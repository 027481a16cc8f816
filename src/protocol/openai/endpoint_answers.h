// What a generation endpoint answers in, and its plain (not streamed) answers in that API's
// shape: OpenAI's chat and completions, Triton's generate and generate_stream
// (docs/openai.md, docs/generation.md). Shared by the handler and its generations.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "harrier/generation.h"
#include "harrier/http_message.h"
#include "harrier/status.h"
#include "protocol/openai/openai_response.h"

namespace harrier::openai {

// What a generation answers in: the API decides the JSON of every event and of the errors.
enum Kind : int { kChat, kCompletion, kGenerate, kGenerateStream };

inline bool IsTriton(int kind) {
  return kind == kGenerate || kind == kGenerateStream;
}

// Now, in seconds since the epoch (OpenAI's `created`).
int64_t UnixSeconds();

HttpResponse JsonResponse(int status, std::string body);

// An error in the shape the API's clients read: OpenAI's object, or Triton's {"error": ...};
// a 429 carries Retry-After.
HttpResponse ErrorResponse(int kind, const Status& status, std::string_view param = {},
                           std::string_view code = {});

// A refusal of the prompt for its length (the engine's "the prompt is N tokens, more than the
// model's context of C", or N bytes: docs/llamacpp-backend.md) carries OpenAI's code for it,
// `context_length_exceeded`, and names the field that holds the prompt; any other refusal is
// ErrorResponse's.
HttpResponse RefusalResponse(int kind, const Status& status);

// The finish reason a client reads: "length" or "stop" (an error ends otherwise).
openai::FinishReason WireReason(harrier::FinishReason reason);

}  // namespace harrier::openai
