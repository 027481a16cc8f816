// Parsing the bodies of OpenAI's `POST /v1/chat/completions` and `POST /v1/completions` into
// GenerationParams (docs/openai.md lists every field, its default and its range).
//
// As OpenAI does: fields this server does not know are ignored (clients send many), null means
// "not sent", and a known field of the wrong type or out of range is refused, naming it.
// Features the server cannot honour are refused rather than silently dropped, since ignoring
// them would change the answer: tools and function calls, non-text content parts, JSON
// response formats, logit_bias, and (completions) echo, suffix, best_of > n, token-id or
// several prompts.
//
// Errors (the field's path goes to `*param_at_fault` when it is not null, "" when the error is
// about no one field):
//   kInvalidArgument (400): the body is not a JSON object; a field has the wrong type or an
//     out-of-range value; `model`, `messages` or `prompt` is missing; `messages` is empty; a
//     message has an unknown role or a non-text part; too many stop sequences; a feature above.
//   kPayloadTooLarge (413): more than limits.max_messages messages, or input text over
//     limits.max_text_bytes.
// Thread-safe (no shared state).
#pragma once

#include <string>
#include <string_view>

#include "harrier/status.h"
#include "protocol/openai/generation_params.h"

namespace harrier::openai {

StatusOr<GenerationParams> ParseChatCompletionRequest(std::string_view body,
                                                      const RequestLimits& limits = {},
                                                      std::string* param_at_fault = nullptr);

StatusOr<GenerationParams> ParseCompletionRequest(std::string_view body,
                                                  const RequestLimits& limits = {},
                                                  std::string* param_at_fault = nullptr);

// The `model` string of a body that is a JSON object, or "" (not JSON, not an object, no string
// `model`): which model a request that fails to parse is counted under, when that model exists.
std::string ModelNamedIn(std::string_view body);

}  // namespace harrier::openai
