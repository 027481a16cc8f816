// libFuzzer target: the generation request bodies (docs/openai.md): the first byte picks the
// parser — ParseChatCompletionRequest, ParseCompletionRequest or ParseGenerateRequest — and the
// rest is the body. For a body it accepts, the answer writers run over what it parsed (its
// texts as the generated text), and each answer must be valid JSON.
//
// Findings besides the sanitizers': accepted parameters outside the limits the parsers promise
// (RequestLimits, the documented ranges), or an answer that simdjson cannot parse.
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/openai/generate_request.h"
#include "protocol/openai/generate_response.h"
#include "protocol/openai/openai_request.h"
#include "protocol/openai/openai_response.h"
#include "protocol/openai/sse.h"

namespace {

using namespace harrier::openai;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "openai_request_fuzzer: %s\n", what.c_str());
  std::abort();
}

void CheckJson(const std::string& json, const char* what) {
  static simdjson::dom::parser parser;
  if (parser.parse(json).error()) Fail(std::string(what) + " is not valid JSON: " + json);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int which = data[0] % 3;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const RequestLimits limits;
  std::string param;
  auto parsed = which == 0 ? ParseChatCompletionRequest(body, limits, &param)
                : which == 1
                    ? ParseCompletionRequest(body, limits, &param)
                    : ParseGenerateRequest(body, "m", GenerateEndpoint::kGenerate, limits, &param);
  if (!parsed.ok()) return 0;
  const GenerationParams& p = *parsed;
  if (p.n < 1 || p.n > limits.max_n) Fail("n out of range: " + std::to_string(p.n));
  if (p.stop.size() > limits.max_stop_sequences) Fail("too many stop strings");
  for (const auto& s : p.stop)
    if (s.empty() || s.size() > limits.max_stop_bytes) Fail("a stop string out of bounds");
  if (p.max_tokens != -1 && p.max_tokens < 1)
    Fail("max_tokens out of range: " + std::to_string(p.max_tokens));
  if (!(p.temperature >= 0 && p.temperature <= 2)) Fail("temperature out of range");
  if (!(p.top_p >= 0 && p.top_p <= 1)) Fail("top_p out of range");
  if (p.messages.size() > limits.max_messages) Fail("too many messages");
  if (p.chat != (which == 0)) Fail("chat flag does not match the endpoint");

  // The answers, with the request's own texts as the output: whatever bytes they hold.
  std::string text = p.prompt;
  for (const auto& m : p.messages) text += m.content;
  ResponseMeta meta{"chatcmpl-x", 1, p.model, p.include_usage};
  std::vector<Choice> choices{{0, text, FinishReason::kStop, std::nullopt}};
  const Usage usage{1, 2};
  CheckJson(ChatCompletionJson(meta, choices, usage), "ChatCompletionJson");
  CheckJson(CompletionJson(meta, choices, usage), "CompletionJson");
  CheckJson(ChatContentChunkJson(meta, 0, text), "ChatContentChunkJson");
  CheckJson(CompletionChunkJson(meta, 0, text), "CompletionChunkJson");
  CheckJson(GenerateResponseJson(p.model, "1", text), "GenerateResponseJson");
  const std::string event = SseEvent(text, 7);
  if (event.size() < 2 || event.substr(event.size() - 2) != "\n\n") Fail("an event not ended");
  return 0;
}
