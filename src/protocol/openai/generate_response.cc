#include "protocol/openai/generate_response.h"

#include "protocol/openai/json_text.h"

namespace harrier::openai {

std::string GenerateResponseJson(std::string_view model_name, std::string_view model_version,
                                 std::string_view text_output) {
  std::string out = "{\"model_name\":";
  AppendJsonText(&out, model_name);
  out.append(",\"model_version\":");
  AppendJsonText(&out, model_version);
  out.append(",\"text_output\":");
  AppendJsonText(&out, text_output);
  out.push_back('}');
  return out;
}

std::string GenerateErrorJson(std::string_view message) {
  std::string out = "{\"error\":";
  AppendJsonText(&out, message);
  out.push_back('}');
  return out;
}

}  // namespace harrier::openai
