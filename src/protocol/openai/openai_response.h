// The JSON of OpenAI's answers: chat completions and completions, whole or as stream chunks,
// and the model list. Pure functions of their arguments: the caller brings the id, the clock's
// reading and the text; the transport frames chunks as SSE events (sse.h).
//
// A stream of chat chunks for one choice goes: ChatRoleChunkJson, ChatContentChunkJson per
// piece of text, ChatFinishChunkJson; with stream_options.include_usage, ChatUsageChunkJson
// after every choice has finished; then kSseDone. Completions streams are the same without the
// role chunk.
//
// Text may hold any bytes: ill-formed UTF-8 is written as U+FFFD, so every answer is valid
// JSON. Streamed text should still pass through a Utf8Holdback (core/utf8_holdback.h) first,
// so a character split over two tokens arrives whole instead of as two replacement characters.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/openai/random_id.h"

namespace harrier::openai {

enum class FinishReason {
  kStop,    // a stop sequence or the end-of-sequence token
  kLength,  // max_tokens, or the context's end
};

// "stop", "length".
std::string_view FinishReasonName(FinishReason reason);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // total_tokens is written as the sum
  // Of prompt_tokens: taken from the KV cache, not decoded (OpenAI's
  // prompt_tokens_details.cached_tokens).
  int64_t cached_tokens = 0;
};

// The log probability of one generated token, and of the likeliest tokens at its position.
// Written as OpenAI does: chat's {"content":[{"token","logprob","bytes","top_logprobs"}],
// "refusal":null}, completions' {"tokens","token_logprobs","top_logprobs","text_offset"} (a
// top_logprobs entry is null when `top` is empty: the request asked for no alternatives). A
// token is bytes, not always a character: chat's `bytes` carries them exactly, `token` is their
// text with ill-formed parts replaced by U+FFFD. A logprob of -infinity (or NaN) is written as
// -9999.0, OpenAI's stand-in, since JSON has no infinities.
struct TokenLogprob {
  struct Alternative {
    std::string token;
    float logprob = 0;
  };
  std::string token;
  float logprob = 0;
  std::vector<Alternative> top;
};

// What every answer and chunk of one request repeats.
struct ResponseMeta {
  std::string id;       // NewChatCompletionId / NewCompletionId
  int64_t created = 0;  // Unix seconds when the request arrived
  std::string model;
  // The request's stream_options.include_usage: each chunk then carries "usage": null, as
  // OpenAI's do, and the usage chunk its figures.
  bool include_usage = false;
};

// "chatcmpl-" / "cmpl-" and 32 hex digits.
std::string NewChatCompletionId(RandomSource& random);
std::string NewCompletionId(RandomSource& random);

// One whole choice of a non-streamed answer.
struct Choice {
  int32_t index = 0;
  std::string text;
  FinishReason finish_reason = FinishReason::kStop;
  // Absent: "logprobs": null (the request did not ask).
  std::optional<std::vector<TokenLogprob>> logprobs;
};

// {"id","object":"chat.completion","created","model","choices":[{"index","message":{"role":
// "assistant","content"},"logprobs","finish_reason"}],"usage":{...}}
std::string ChatCompletionJson(const ResponseMeta& meta, std::span<const Choice> choices,
                               const Usage& usage);

// {"id","object":"text_completion","created","model","choices":[{"text","index","logprobs",
// "finish_reason"}],"usage":{...}}
std::string CompletionJson(const ResponseMeta& meta, std::span<const Choice> choices,
                           const Usage& usage);

// Chat stream chunks ("object":"chat.completion.chunk"). `logprobs` null: "logprobs": null.
std::string ChatRoleChunkJson(const ResponseMeta& meta, int32_t index);
std::string ChatContentChunkJson(const ResponseMeta& meta, int32_t index, std::string_view content,
                                 const std::vector<TokenLogprob>* logprobs = nullptr);
// The choice's last chunk: an empty delta and the finish reason.
std::string ChatFinishChunkJson(const ResponseMeta& meta, int32_t index, FinishReason reason);
// "choices": [] and the usage of the whole request.
std::string ChatUsageChunkJson(const ResponseMeta& meta, const Usage& usage);

// Completions stream chunks ("object":"text_completion"). `text_offset`: bytes of the
// choice's text sent before this chunk (for the logprobs' text_offset).
std::string CompletionChunkJson(const ResponseMeta& meta, int32_t index, std::string_view text,
                                const std::vector<TokenLogprob>* logprobs = nullptr,
                                size_t text_offset = 0);
std::string CompletionFinishChunkJson(const ResponseMeta& meta, int32_t index, FinishReason reason);
std::string CompletionUsageChunkJson(const ResponseMeta& meta, const Usage& usage);

// GET /v1/models and GET /v1/models/{id}:
// {"object":"list","data":[{"id","object":"model","created","owned_by":"harrier"}]}.
struct ModelEntry {
  std::string id;
  int64_t created = 0;  // Unix seconds: when the model was loaded
};
std::string ModelListJson(std::span<const ModelEntry> models);
std::string ModelJson(const ModelEntry& model);

}  // namespace harrier::openai
