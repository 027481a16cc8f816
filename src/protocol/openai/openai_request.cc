#include "protocol/openai/openai_request.h"

#include <simdjson.h>

#include <limits>

#include "protocol/openai/request_fields.h"

namespace harrier::openai {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// Chat and completions share most fields; these are the ones where they differ.
enum class Endpoint { kChatCompletions, kCompletions };

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// Counts input text against limits.max_text_bytes as messages or the prompt are read.
class TextBudget {
 public:
  explicit TextBudget(size_t max_bytes) : max_bytes_(max_bytes) {}
  Status Spend(FieldReader& reader, std::string_view param, size_t bytes) {
    used_ += bytes;
    if (used_ <= max_bytes_) return Status::Ok();
    return reader.TooLarge(param, "the input text is over " + std::to_string(max_bytes_) +
                                      " bytes, this server's limit");
  }

 private:
  const size_t max_bytes_;
  size_t used_ = 0;
};

// True when `value` is an empty array or object (how clients often send "none").
bool IsEmptyContainer(element value) {
  array a;
  if (!value.get_array().get(a)) return a.size() == 0;
  object o;
  if (!value.get_object().get(o)) return o.size() == 0;
  return false;
}

// A message's content: a string, or an array of parts of which only {"type":"text"} ones are
// accepted.
Status ReadContent(FieldReader& reader, element value, const std::string& param, std::string* out) {
  if (value.type() == element_type::STRING) return reader.String(value, param, out);
  array parts;
  if (value.get_array().get(parts)) {
    return reader.Fail(param, "'" + param +
                                  "' must be a string or an array of content parts, got " +
                                  std::string(JsonTypeName(value.type())));
  }
  if (parts.begin() == parts.end()) {  // as OpenAI's API answers it
    return reader.Fail(param,
                       "'" + param + "' is an empty array: expected at least one content part");
  }
  out->clear();
  size_t index = 0;
  for (element part : parts) {
    const std::string part_param = param + "[" + std::to_string(index++) + "]";
    object part_object;
    RETURN_IF_ERROR(reader.Object(part, part_param, &part_object));
    std::string_view type;
    if (part_object["type"].get_string().get(type)) {
      return reader.Fail(part_param + ".type",
                         "'" + part_param + ".type' must be a string naming the part's type");
    }
    if (type != "text") {
      return reader.Fail(part_param + ".type", "content part type '" + std::string(type) +
                                                   "' in '" + part_param +
                                                   "' is not supported: this server takes text "
                                                   "parts only");
    }
    std::string_view text;
    if (part_object["text"].get_string().get(text)) {
      return reader.Fail(part_param + ".text", "'" + part_param + ".text' must be a string");
    }
    out->append(text);
  }
  return Status::Ok();
}

Status ReadMessage(FieldReader& reader, element value, size_t index, TextBudget& budget,
                   ChatMessage* out) {
  const std::string param = "messages[" + std::to_string(index) + "]";
  object message;
  RETURN_IF_ERROR(reader.Object(value, param, &message));
  const std::string role_param = param + ".role";
  element role_value;
  if (message["role"].get(role_value) || role_value.is_null()) {
    return reader.Fail(role_param, "'" + role_param + "' is required");
  }
  RETURN_IF_ERROR(reader.String(role_value, role_param, &out->role));
  if (out->role == "developer") out->role = "system";
  if (out->role == "tool" || out->role == "function") {
    return reader.Fail(role_param, "role '" + out->role + "' in '" + role_param +
                                       "' is not supported: this server does not call tools");
  }
  if (out->role != "system" && out->role != "user" && out->role != "assistant") {
    return reader.Fail(role_param,
                       "'" + role_param +
                           "' must be one of system, developer, user, assistant; got '" +
                           out->role.substr(0, 64) + "'");
  }
  // A participant's name: checked as OpenAI checks it, then not used (the chat templates in GGUF
  // files have no place for it; docs/openai.md). Probe 59: `"name": 5` was accepted.
  element name;
  if (!message["name"].get(name) && !name.is_null()) {
    std::string_view name_text;
    if (name.get_string().get(name_text)) {
      return reader.Fail(param + ".name", "'" + param + ".name' must be a string");
    }
  }
  const std::string tool_calls_param = param + ".tool_calls";
  element tool_calls;
  if (!message["tool_calls"].get(tool_calls) && !tool_calls.is_null() &&
      !IsEmptyContainer(tool_calls)) {
    return reader.Fail(tool_calls_param, "'" + tool_calls_param +
                                             "' is not supported: this server does not call tools");
  }
  element content;
  if (message["content"].get(content) || content.is_null()) {
    // An assistant turn may have no content (OpenAI allows it beside tool calls); any other
    // turn without text is a client bug worth saying so.
    if (out->role != "assistant") {
      return reader.Fail(param + ".content", "'" + param + ".content' is required");
    }
    out->content.clear();
  } else {
    RETURN_IF_ERROR(ReadContent(reader, content, param + ".content", &out->content));
  }
  return budget.Spend(reader, param + ".content", out->content.size());
}

Status ReadMessages(FieldReader& reader, element value, const RequestLimits& limits,
                    TextBudget& budget, std::vector<ChatMessage>* out) {
  array messages;
  if (value.get_array().get(messages)) {
    return reader.Fail(
        "messages", "'messages' must be an array, got " + std::string(JsonTypeName(value.type())));
  }
  if (messages.size() == 0) {
    return reader.Fail("messages", "'messages' must hold at least one message");
  }
  if (messages.size() > limits.max_messages) {
    return reader.TooLarge("messages", "'messages' holds " + std::to_string(messages.size()) +
                                           " messages; this server takes at most " +
                                           std::to_string(limits.max_messages));
  }
  out->clear();
  out->reserve(messages.size());
  size_t index = 0;
  for (element m : messages) {
    ChatMessage message;
    RETURN_IF_ERROR(ReadMessage(reader, m, index++, budget, &message));
    out->push_back(std::move(message));
  }
  return Status::Ok();
}

// A completion prompt: a string, or an array holding exactly one string (how several clients
// wrap a single prompt). Several prompts, or token ids, are refused.
Status ReadPrompt(FieldReader& reader, element value, std::string* out) {
  if (value.type() == element_type::STRING) return reader.String(value, "prompt", out);
  array prompts;
  if (value.get_array().get(prompts)) {
    return reader.Fail("prompt",
                       "'prompt' must be a string, got " + std::string(JsonTypeName(value.type())));
  }
  // An array of numbers is one prompt given as token ids, not several prompts (probe 59: [1,2,3]
  // was told it held three prompts).
  if (prompts.size() > 0 && prompts.at(0).value_unsafe().is_number()) {
    return reader.Fail("prompt", "'prompt' must be a string: token-id prompts are not supported");
  }
  if (prompts.size() != 1) {
    return reader.Fail("prompt",
                       "'prompt' must be one string: this server takes one prompt per "
                       "request, got an array of " +
                           std::to_string(prompts.size()));
  }
  element only = prompts.at(0).value_unsafe();
  if (only.type() != element_type::STRING) {
    return reader.Fail("prompt", "'prompt' must be a string: token-id prompts are not supported");
  }
  return reader.String(only, "prompt", out);
}

Status Unsupported(FieldReader& reader, std::string_view key, std::string_view why) {
  return reader.Fail(key, "'" + std::string(key) + "' is not supported: " + std::string(why));
}

StatusOr<GenerationParams> Parse(std::string_view body, Endpoint endpoint,
                                 const RequestLimits& limits, std::string* param_at_fault) {
  if (param_at_fault != nullptr) param_at_fault->clear();
  FieldReader reader(param_at_fault);
  // A parser per request, not per thread as the KServe decoder keeps: these bodies are small
  // and parsing them is nothing beside generating one token.
  simdjson::dom::parser parser;
  ASSIGN_OR_RETURN(object root, reader.ParseObject(parser, body));

  const bool chat = endpoint == Endpoint::kChatCompletions;
  GenerationParams p;
  p.chat = chat;
  TextBudget budget(limits.max_text_bytes);
  bool has_model = false, has_input = false, has_stream_options = false;
  std::optional<int32_t> max_completion_tokens;
  int32_t best_of = 1;
  bool best_of_sent = false;

  for (auto [key, value] : root) {
    if (value.is_null()) continue;  // OpenAI's clients send null for "default"
    Status s;
    if (key == "model") {
      s = reader.String(value, "model", &p.model);
      has_model = true;
    } else if (key == "max_tokens") {
      s = reader.Integer(value, "max_tokens", 1, kInt32Max, &p.max_tokens);
    } else if (key == "temperature") {
      s = reader.Number(value, "temperature", 0, 2, &p.temperature);
    } else if (key == "top_p") {
      s = reader.Number(value, "top_p", 0, 1, &p.top_p);
    } else if (key == "top_k") {
      s = reader.Integer(value, "top_k", 0, kInt32Max, &p.top_k);
    } else if (key == "min_p") {
      s = reader.Number(value, "min_p", 0, 1, &p.min_p);
    } else if (key == "repetition_penalty") {
      s = reader.Number(value, "repetition_penalty", 0, 10, &p.repetition_penalty);
      if (s.ok() && p.repetition_penalty == 0) {
        s = reader.Fail("repetition_penalty", "'repetition_penalty' must be above 0 (1 is off)");
      }
    } else if (key == "frequency_penalty") {
      s = reader.Number(value, "frequency_penalty", -2, 2, &p.frequency_penalty);
    } else if (key == "presence_penalty") {
      s = reader.Number(value, "presence_penalty", -2, 2, &p.presence_penalty);
    } else if (key == "seed") {
      s = reader.Seed(value, "seed", &p.seed);
    } else if (key == "stop") {
      s = reader.Stop(value, "stop", limits, &p.stop);
    } else if (key == "stream") {
      s = reader.Bool(value, "stream", &p.stream);
    } else if (key == "stream_options") {
      object options;
      s = reader.Object(value, "stream_options", &options);
      element include;
      if (s.ok() && !options["include_usage"].get(include) && !include.is_null()) {
        s = reader.Bool(include, "stream_options.include_usage", &p.include_usage);
      }
      has_stream_options = true;
    } else if (key == "n") {
      s = reader.Integer(value, "n", 1, limits.max_n, &p.n);
    } else if (key == "priority") {
      s = reader.Integer(value, "priority", 0, kInt32Max, &p.priority);
    } else if (key == "user") {
      s = reader.String(value, "user", &p.user);
      if (s.ok() && p.user.size() > limits.max_user_bytes) {
        s = reader.Fail(
            "user", "'user' may have at most " + std::to_string(limits.max_user_bytes) + " bytes");
      }
    } else if (key == "logit_bias") {
      if (!IsEmptyContainer(value)) s = Unsupported(reader, key, "no logit biases here");
    } else if (chat && key == "messages") {
      s = ReadMessages(reader, value, limits, budget, &p.messages);
      has_input = true;
    } else if (chat && key == "max_completion_tokens") {
      int32_t v = 0;
      s = reader.Integer(value, "max_completion_tokens", 1, kInt32Max, &v);
      max_completion_tokens = v;
    } else if (chat && key == "logprobs") {
      s = reader.Bool(value, "logprobs", &p.logprobs);
    } else if (chat && key == "top_logprobs") {
      s = reader.Integer(value, "top_logprobs", 0, limits.max_top_logprobs, &p.top_logprobs);
    } else if (chat && (key == "tools" || key == "functions")) {
      if (!IsEmptyContainer(value)) s = Unsupported(reader, key, "this server does not call tools");
    } else if (chat && (key == "tool_choice" || key == "function_call")) {
      // "none" and "auto" ask for nothing this server cannot do (it is given no tools);
      // "required" or a named function asks for a tool call, which it cannot make (probe 59:
      // accepted, and answered with text; OpenAI refuses them without tools).
      std::string_view choice;
      if (value.get_string().get(choice) || (choice != "none" && choice != "auto")) {
        s = Unsupported(reader, key, "this server does not call tools");
      }
    } else if (chat && key == "response_format") {
      object format;
      s = reader.Object(value, "response_format", &format);
      std::string_view type;
      if (s.ok() && (format["type"].get_string().get(type) || type != "text")) {
        s = Unsupported(reader, "response_format", "only {\"type\": \"text\"} is");
      }
    } else if (!chat && key == "prompt") {
      s = ReadPrompt(reader, value, &p.prompt);
      if (s.ok()) s = budget.Spend(reader, "prompt", p.prompt.size());
      has_input = true;
    } else if (!chat && key == "logprobs") {
      // The legacy API's logprobs is a count of alternatives, not a switch.
      s = reader.Integer(value, "logprobs", 0, limits.max_completion_logprobs, &p.top_logprobs);
      p.logprobs = s.ok();
    } else if (!chat && key == "echo") {
      bool echo = false;
      s = reader.Bool(value, "echo", &echo);
      if (s.ok() && echo) s = Unsupported(reader, key, "the prompt is not echoed");
    } else if (!chat && key == "suffix") {
      std::string suffix;
      s = reader.String(value, "suffix", &suffix);
      if (s.ok() && !suffix.empty()) s = Unsupported(reader, key, "no insertion mode here");
    } else if (!chat && key == "best_of") {
      s = reader.Integer(value, "best_of", 1, kInt32Max, &best_of);
      best_of_sent = true;
    }
    RETURN_IF_ERROR(s);
  }

  if (!has_model) return reader.Fail("model", "'model' is required");
  if (p.model.empty()) return reader.Fail("model", "'model' must not be empty");
  if (!has_input) {
    return chat ? reader.Fail("messages", "'messages' is required")
                : reader.Fail("prompt", "'prompt' is required");
  }
  if (max_completion_tokens) p.max_tokens = *max_completion_tokens;
  if (has_stream_options && !p.stream) {
    return reader.Fail("stream_options", "'stream_options' is only allowed when 'stream' is true");
  }
  if (chat && p.top_logprobs > 0 && !p.logprobs) {
    return reader.Fail("top_logprobs", "'top_logprobs' needs 'logprobs' to be true");
  }
  if (best_of_sent && best_of != p.n) {
    return Unsupported(reader, "best_of", "it must equal 'n' (no server-side ranking)");
  }
  return p;
}

}  // namespace

StatusOr<GenerationParams> ParseChatCompletionRequest(std::string_view body,
                                                      const RequestLimits& limits,
                                                      std::string* param_at_fault) {
  return Parse(body, Endpoint::kChatCompletions, limits, param_at_fault);
}

StatusOr<GenerationParams> ParseCompletionRequest(std::string_view body,
                                                  const RequestLimits& limits,
                                                  std::string* param_at_fault) {
  return Parse(body, Endpoint::kCompletions, limits, param_at_fault);
}

std::string ModelNamedIn(std::string_view body) {
  simdjson::dom::parser parser;
  std::string_view model;
  if (parser.parse(simdjson::padded_string(body))["model"].get_string().get(model)) return {};
  return std::string(model);
}

}  // namespace harrier::openai
