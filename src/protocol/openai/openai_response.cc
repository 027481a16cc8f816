#include "protocol/openai/openai_response.h"

#include <cmath>

#include "protocol/openai/json_text.h"

namespace harrier::openai {
namespace {

constexpr std::string_view kChatObject = "chat.completion";
constexpr std::string_view kChatChunkObject = "chat.completion.chunk";
constexpr std::string_view kCompletionObject = "text_completion";

// {"id":..,"object":..,"created":..,"model":..,  (the caller continues with "choices")
void AppendHead(std::string* out, const ResponseMeta& meta, std::string_view object) {
  out->append("{\"id\":");
  AppendJsonText(out, meta.id);
  out->append(",\"object\":");
  AppendJsonString(out, object);
  out->append(",\"created\":");
  AppendJsonNumber(out, meta.created);
  out->append(",\"model\":");
  AppendJsonText(out, meta.model);
  out->push_back(',');
}

void AppendUsage(std::string* out, const Usage& usage) {
  out->append("\"usage\":{\"prompt_tokens\":");
  AppendJsonNumber(out, usage.prompt_tokens);
  out->append(",\"completion_tokens\":");
  AppendJsonNumber(out, usage.completion_tokens);
  out->append(",\"total_tokens\":");
  AppendJsonNumber(out, usage.prompt_tokens + usage.completion_tokens);
  out->append(",\"prompt_tokens_details\":{\"cached_tokens\":");
  AppendJsonNumber(out, usage.cached_tokens);
  out->append("}}");
}

// A chunk's end: "usage": null when the client asked for the usage chunk, then the brace.
void AppendChunkTail(std::string* out, const ResponseMeta& meta) {
  if (meta.include_usage) out->append(",\"usage\":null");
  out->push_back('}');
}

void AppendLogprob(std::string* out, float logprob) {
  if (std::isfinite(logprob)) {
    AppendJsonNumber(out, logprob);
  } else {
    out->append("-9999.0");
  }
}

void AppendFinishReason(std::string* out, std::optional<FinishReason> reason) {
  out->append("\"finish_reason\":");
  if (reason) {
    AppendJsonString(out, FinishReasonName(*reason));
  } else {
    out->append("null");
  }
}

// "token":..,"logprob":..,"bytes":[..]
void AppendChatToken(std::string* out, std::string_view token, float logprob) {
  out->append("\"token\":");
  AppendJsonText(out, token);
  out->append(",\"logprob\":");
  AppendLogprob(out, logprob);
  out->append(",\"bytes\":[");
  for (size_t i = 0; i < token.size(); ++i) {
    if (i > 0) out->push_back(',');
    AppendJsonNumber(out, static_cast<int>(static_cast<unsigned char>(token[i])));
  }
  out->push_back(']');
}

// Chat's logprobs: {"content":[...]} or null.
void AppendChatLogprobs(std::string* out, const std::vector<TokenLogprob>* logprobs) {
  out->append("\"logprobs\":");
  if (logprobs == nullptr) {
    out->append("null");
    return;
  }
  out->append("{\"content\":[");
  for (size_t i = 0; i < logprobs->size(); ++i) {
    const TokenLogprob& t = (*logprobs)[i];
    if (i > 0) out->push_back(',');
    out->push_back('{');
    AppendChatToken(out, t.token, t.logprob);
    out->append(",\"top_logprobs\":[");
    for (size_t j = 0; j < t.top.size(); ++j) {
      if (j > 0) out->push_back(',');
      out->push_back('{');
      AppendChatToken(out, t.top[j].token, t.top[j].logprob);
      out->push_back('}');
    }
    out->append("]}");
  }
  out->append("],\"refusal\":null}");
}

// Completions' logprobs (the legacy layout): parallel arrays, or null. `text_offset` is where
// the first token starts in the choice's text.
void AppendCompletionLogprobs(std::string* out, const std::vector<TokenLogprob>* logprobs,
                              size_t text_offset) {
  out->append("\"logprobs\":");
  if (logprobs == nullptr) {
    out->append("null");
    return;
  }
  out->append("{\"tokens\":[");
  for (size_t i = 0; i < logprobs->size(); ++i) {
    if (i > 0) out->push_back(',');
    AppendJsonText(out, (*logprobs)[i].token);
  }
  out->append("],\"token_logprobs\":[");
  for (size_t i = 0; i < logprobs->size(); ++i) {
    if (i > 0) out->push_back(',');
    AppendLogprob(out, (*logprobs)[i].logprob);
  }
  out->append("],\"top_logprobs\":[");
  for (size_t i = 0; i < logprobs->size(); ++i) {
    if (i > 0) out->push_back(',');
    const auto& top = (*logprobs)[i].top;
    if (top.empty()) {  // logprobs: 0 asked for the chosen tokens only
      out->append("null");
      continue;
    }
    out->push_back('{');
    for (size_t j = 0; j < top.size(); ++j) {
      if (j > 0) out->push_back(',');
      AppendJsonText(out, top[j].token);
      out->push_back(':');
      AppendLogprob(out, top[j].logprob);
    }
    out->push_back('}');
  }
  out->append("],\"text_offset\":[");
  for (size_t i = 0; i < logprobs->size(); ++i) {
    if (i > 0) out->push_back(',');
    AppendJsonNumber(out, text_offset);
    text_offset += (*logprobs)[i].token.size();
  }
  out->append("]}");
}

const std::vector<TokenLogprob>* LogprobsOf(const Choice& choice) {
  return choice.logprobs ? &*choice.logprobs : nullptr;
}

}  // namespace

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
  }
  return "stop";
}

std::string NewChatCompletionId(RandomSource& random) {
  return "chatcmpl-" + RandomHexId128(random);
}

std::string NewCompletionId(RandomSource& random) {
  return "cmpl-" + RandomHexId128(random);
}

std::string ChatCompletionJson(const ResponseMeta& meta, std::span<const Choice> choices,
                               const Usage& usage) {
  std::string out;
  AppendHead(&out, meta, kChatObject);
  out.append("\"choices\":[");
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    if (i > 0) out.push_back(',');
    out.append("{\"index\":");
    AppendJsonNumber(&out, c.index);
    out.append(",\"message\":{\"role\":\"assistant\",\"content\":");
    AppendJsonText(&out, c.text);
    out.append("},");
    AppendChatLogprobs(&out, LogprobsOf(c));
    out.push_back(',');
    AppendFinishReason(&out, c.finish_reason);
    out.push_back('}');
  }
  out.append("],");
  AppendUsage(&out, usage);
  out.push_back('}');
  return out;
}

std::string CompletionJson(const ResponseMeta& meta, std::span<const Choice> choices,
                           const Usage& usage) {
  std::string out;
  AppendHead(&out, meta, kCompletionObject);
  out.append("\"choices\":[");
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    if (i > 0) out.push_back(',');
    out.append("{\"text\":");
    AppendJsonText(&out, c.text);
    out.append(",\"index\":");
    AppendJsonNumber(&out, c.index);
    out.push_back(',');
    AppendCompletionLogprobs(&out, LogprobsOf(c), 0);
    out.push_back(',');
    AppendFinishReason(&out, c.finish_reason);
    out.push_back('}');
  }
  out.append("],");
  AppendUsage(&out, usage);
  out.push_back('}');
  return out;
}

std::string ChatRoleChunkJson(const ResponseMeta& meta, int32_t index) {
  std::string out;
  AppendHead(&out, meta, kChatChunkObject);
  out.append("\"choices\":[{\"index\":");
  AppendJsonNumber(&out, index);
  out.append(",\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,");
  AppendFinishReason(&out, std::nullopt);
  out.append("}]");
  AppendChunkTail(&out, meta);
  return out;
}

std::string ChatContentChunkJson(const ResponseMeta& meta, int32_t index, std::string_view content,
                                 const std::vector<TokenLogprob>* logprobs) {
  std::string out;
  AppendHead(&out, meta, kChatChunkObject);
  out.append("\"choices\":[{\"index\":");
  AppendJsonNumber(&out, index);
  out.append(",\"delta\":{\"content\":");
  AppendJsonText(&out, content);
  out.append("},");
  AppendChatLogprobs(&out, logprobs);
  out.push_back(',');
  AppendFinishReason(&out, std::nullopt);
  out.append("}]");
  AppendChunkTail(&out, meta);
  return out;
}

std::string ChatFinishChunkJson(const ResponseMeta& meta, int32_t index, FinishReason reason) {
  std::string out;
  AppendHead(&out, meta, kChatChunkObject);
  out.append("\"choices\":[{\"index\":");
  AppendJsonNumber(&out, index);
  out.append(",\"delta\":{},\"logprobs\":null,");
  AppendFinishReason(&out, reason);
  out.append("}]");
  AppendChunkTail(&out, meta);
  return out;
}

std::string ChatUsageChunkJson(const ResponseMeta& meta, const Usage& usage) {
  std::string out;
  AppendHead(&out, meta, kChatChunkObject);
  out.append("\"choices\":[],");
  AppendUsage(&out, usage);
  out.push_back('}');
  return out;
}

std::string CompletionChunkJson(const ResponseMeta& meta, int32_t index, std::string_view text,
                                const std::vector<TokenLogprob>* logprobs, size_t text_offset) {
  std::string out;
  AppendHead(&out, meta, kCompletionObject);
  out.append("\"choices\":[{\"text\":");
  AppendJsonText(&out, text);
  out.append(",\"index\":");
  AppendJsonNumber(&out, index);
  out.push_back(',');
  AppendCompletionLogprobs(&out, logprobs, text_offset);
  out.push_back(',');
  AppendFinishReason(&out, std::nullopt);
  out.append("}]");
  AppendChunkTail(&out, meta);
  return out;
}

std::string CompletionFinishChunkJson(const ResponseMeta& meta, int32_t index,
                                      FinishReason reason) {
  std::string out;
  AppendHead(&out, meta, kCompletionObject);
  out.append("\"choices\":[{\"text\":\"\",\"index\":");
  AppendJsonNumber(&out, index);
  out.append(",\"logprobs\":null,");
  AppendFinishReason(&out, reason);
  out.append("}]");
  AppendChunkTail(&out, meta);
  return out;
}

std::string CompletionUsageChunkJson(const ResponseMeta& meta, const Usage& usage) {
  std::string out;
  AppendHead(&out, meta, kCompletionObject);
  out.append("\"choices\":[],");
  AppendUsage(&out, usage);
  out.push_back('}');
  return out;
}

namespace {

void AppendModel(std::string* out, const ModelEntry& model) {
  out->append("{\"id\":");
  AppendJsonText(out, model.id);
  out->append(",\"object\":\"model\",\"created\":");
  AppendJsonNumber(out, model.created);
  out->append(",\"owned_by\":\"harrier\"}");
}

}  // namespace

std::string ModelListJson(std::span<const ModelEntry> models) {
  std::string out = "{\"object\":\"list\",\"data\":[";
  for (size_t i = 0; i < models.size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendModel(&out, models[i]);
  }
  out.append("]}");
  return out;
}

std::string ModelJson(const ModelEntry& model) {
  std::string out;
  AppendModel(&out, model);
  return out;
}

}  // namespace harrier::openai
