// Parsing the body of Triton's generate extension, `POST /v2/models/{m}[/versions/{v}]/generate`
// and `.../generate_stream`, into GenerationParams (docs/openai.md):
//
//   {"text_input": "...", "parameters": {"max_tokens": 64, "temperature": 0.7, "stop": [...]}}
//
// The sampling fields (max_tokens, temperature, top_p, top_k, min_p, repetition_penalty,
// frequency_penalty, presence_penalty, seed, stop, stream) are read from `parameters` and,
// because Triton maps a body's other top-level fields to model inputs of the same name and
// TensorRT-LLM's ensembles take them that way, from the top level too; `parameters` wins when
// both carry one. `stop_words` is `stop`'s TensorRT-LLM name ("" there means none). Other
// fields are ignored, as Triton ignores what a model does not take.
//
// The endpoint decides whether the answer streams: `stream` may be sent, but `true` on
// /generate is refused (kInvalidArgument), since that endpoint answers once.
//
// Errors: as ParseChatCompletionRequest's (openai_request.h), with `text_input` the required
// field. Thread-safe (no shared state).
#pragma once

#include <string>
#include <string_view>

#include "harrier/status.h"
#include "protocol/openai/generation_params.h"

namespace harrier::openai {

enum class GenerateEndpoint {
  kGenerate,        // one JSON answer
  kGenerateStream,  // server-sent events
};

// `model` is the model the URL names (the result's `model`).
StatusOr<GenerationParams> ParseGenerateRequest(std::string_view body, std::string_view model,
                                                GenerateEndpoint endpoint,
                                                const RequestLimits& limits = {},
                                                std::string* param_at_fault = nullptr);

}  // namespace harrier::openai
