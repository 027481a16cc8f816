// What one text-generation request asks for, whichever API it came in through: OpenAI's chat
// completions and completions, or Triton's generate extension. The parsers
// (openai_request.h, generate_request.h) fill it; the engine reads it. Plain value type.
//
// Defaults are what the field means when the request leaves it out (or sends null); each is
// documented with its range in docs/openai.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harrier/generation.h"

namespace harrier::openai {

// {role, content}: "system", "user" or "assistant" ("developer" arrives as "system": chat
// templates know the three classic roles, and OpenAI defines developer as system's successor);
// the content is a content array's text parts joined as sent, with no separator added.
using harrier::ChatMessage;

struct GenerationParams {
  // The model the body names (OpenAI), or the URL's (Triton generate). Looking it up, and the
  // 404 for an unknown one, is the caller's.
  std::string model;
  // true: `messages` is the input, to be rendered with the model's chat template.
  // false: `prompt` is the input, as is.
  bool chat = false;
  std::vector<ChatMessage> messages;
  std::string prompt;

  // Tokens to generate at most; -1: until a stop, an end-of-sequence token or the context's
  // end. OpenAI's `max_completion_tokens` is read into it too.
  int32_t max_tokens = -1;
  // Sampling. temperature 0 is greedy decoding.
  float temperature = 1.0f;
  float top_p = 1.0f;
  // Extensions (llama.cpp's samplers, whose defaults these are). top_k 0 and min_p 0 are off.
  int32_t top_k = 40;
  float min_p = 0.05f;
  // Multiplicative penalty on tokens already present (an extension; 1.0 is off).
  float repetition_penalty = 1.0f;
  // OpenAI's additive penalties, kept as sent (not folded into repetition_penalty: they
  // differ in kind). 0 is off.
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  // Fixed seed for reproducible sampling; none: a random one.
  std::optional<uint32_t> seed;
  // Generation stops before any of these (they are not part of the output).
  std::vector<std::string> stop;

  bool stream = false;
  // stream_options.include_usage: a last chunk with `usage` and no choices.
  bool include_usage = false;
  // Choices to generate for the one input.
  int32_t n = 1;
  // Log probabilities of the chosen tokens, and of the `top_logprobs` likeliest alternatives
  // at each position.
  bool logprobs = false;
  int32_t top_logprobs = 0;
  // The end user's id a client may send (OpenAI's `user`), for logs only.
  std::string user;
  // The priority level (an extension, as vLLM's `priority`, in Harrier's and Triton's numbering:
  // 1 the most urgent, 0 the model's default level; docs/generation.md).
  int32_t priority = 0;
};

// Fills what choice `choice` (0 ... n - 1) of `p` asks of the engine: max_tokens, stop, the
// sampling parameters, logprobs and priority; the prompt, cancellation, times and client id
// are the caller's. With a seed, choice i samples with seed + i, wrapping below 4294967295
// (llama.cpp's "random"), so that every choice stays reproducible. The one mapping every front
// end uses (OpenAI, the generate extension, gRPC's ModelStreamInfer).
void FillGenerationRequest(const GenerationParams& p, int choice, GenerationRequest* r);

// Bounds on what one request may ask for. Over them: kInvalidArgument (400) for counts OpenAI
// itself bounds (stop sequences, n, top_logprobs), kPayloadTooLarge (413) for sizes only
// Harrier bounds (messages, text). The HTTP layer bounds the body before any of this.
struct RequestLimits {
  // Messages in one chat request. Default 1024: a long agent conversation is a few hundred.
  size_t max_messages = 1024;
  // Bytes of input text: the prompt, or every message's content together. Default 4 MiB, about
  // a million tokens, past any context a model here is loaded with.
  size_t max_text_bytes = size_t{4} << 20;
  // Stop sequences. Default 4, OpenAI's limit.
  size_t max_stop_sequences = 4;
  // Bytes of one stop sequence. Default 256: streamed text is held back until it cannot be the
  // start of a stop sequence, so a long one delays every chunk.
  size_t max_stop_bytes = 256;
  // Choices per request (`n`). Default 8: each choice is a sequence the engine decodes, and
  // OpenAI's own 128 would let one request take every slot.
  int32_t max_n = 8;
  // `top_logprobs` (chat; OpenAI's limit is 20) and `logprobs` (completions; OpenAI's is 5).
  int32_t max_top_logprobs = 20;
  int32_t max_completion_logprobs = 5;
  // Bytes of `user`. Default 256: it goes into log lines.
  size_t max_user_bytes = 256;
};

}  // namespace harrier::openai
