#include "protocol/openai/generate_request.h"

#include <simdjson.h>

#include <limits>

#include "protocol/openai/request_fields.h"

namespace harrier::openai {
namespace {

using simdjson::dom::element;
using simdjson::dom::object;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// Reads the sampling fields of one object (the body's top level or its `parameters`);
// `prefix` is "" or "parameters.", for the paths in messages. Unknown keys are skipped.
Status ReadSamplingFields(FieldReader& reader, object fields, std::string_view prefix,
                          const RequestLimits& limits, GenerationParams* p, bool* stream) {
  for (auto [key, value] : fields) {
    if (value.is_null()) continue;
    const std::string param = std::string(prefix) + std::string(key);
    Status s;
    if (key == "max_tokens") {
      s = reader.Integer(value, param, 1, kInt32Max, &p->max_tokens);
    } else if (key == "temperature") {
      s = reader.Number(value, param, 0, 2, &p->temperature);
    } else if (key == "top_p") {
      s = reader.Number(value, param, 0, 1, &p->top_p);
    } else if (key == "top_k") {
      s = reader.Integer(value, param, 0, kInt32Max, &p->top_k);
    } else if (key == "min_p") {
      s = reader.Number(value, param, 0, 1, &p->min_p);
    } else if (key == "repetition_penalty") {
      s = reader.Number(value, param, 0, 10, &p->repetition_penalty);
      if (s.ok() && p->repetition_penalty == 0) {
        s = reader.Fail(param, "'" + param + "' must be above 0 (1 is off)");
      }
    } else if (key == "frequency_penalty") {
      s = reader.Number(value, param, -2, 2, &p->frequency_penalty);
    } else if (key == "presence_penalty") {
      s = reader.Number(value, param, -2, 2, &p->presence_penalty);
    } else if (key == "seed") {
      s = reader.Seed(value, param, &p->seed);
    } else if (key == "priority") {
      s = reader.Integer(value, param, 0, kInt32Max, &p->priority);
    } else if (key == "stop") {
      s = reader.Stop(value, param, limits, &p->stop);
    } else if (key == "stop_words") {
      std::string_view none;
      if (value.get_string().get(none) || !none.empty()) {
        s = reader.Stop(value, param, limits, &p->stop);
      } else {
        p->stop.clear();
      }
    } else if (key == "stream") {
      s = reader.Bool(value, param, stream);
    }
    RETURN_IF_ERROR(s);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<GenerationParams> ParseGenerateRequest(std::string_view body, std::string_view model,
                                                GenerateEndpoint endpoint,
                                                const RequestLimits& limits,
                                                std::string* param_at_fault) {
  if (param_at_fault != nullptr) param_at_fault->clear();
  FieldReader reader(param_at_fault);
  simdjson::dom::parser parser;  // per request: see openai_request.cc
  ASSIGN_OR_RETURN(object root, reader.ParseObject(parser, body));

  GenerationParams p;
  p.model = std::string(model);
  p.chat = false;
  bool stream_asked = false;
  element text;
  if (root["text_input"].get(text) || text.is_null()) {
    return reader.Fail("text_input", "'text_input' is required");
  }
  RETURN_IF_ERROR(reader.String(text, "text_input", &p.prompt));
  if (p.prompt.size() > limits.max_text_bytes) {
    return reader.TooLarge("text_input", "the input text is over " +
                                             std::to_string(limits.max_text_bytes) +
                                             " bytes, this server's limit");
  }
  RETURN_IF_ERROR(ReadSamplingFields(reader, root, "", limits, &p, &stream_asked));
  element parameters_value;
  if (!root["parameters"].get(parameters_value) && !parameters_value.is_null()) {
    object parameters;
    RETURN_IF_ERROR(reader.Object(parameters_value, "parameters", &parameters));
    RETURN_IF_ERROR(
        ReadSamplingFields(reader, parameters, "parameters.", limits, &p, &stream_asked));
  }
  if (endpoint == GenerateEndpoint::kGenerate && stream_asked) {
    return reader.Fail("stream",
                       "'stream' true needs the generate_stream endpoint: generate "
                       "answers once");
  }
  p.stream = endpoint == GenerateEndpoint::kGenerateStream;
  return p;
}

}  // namespace harrier::openai
