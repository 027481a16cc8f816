#include "protocol/kserve/logging_settings.h"

#include <simdjson.h>

#include "core/json_writer.h"

namespace harrier::kserve {

std::string LogSettingsJson(const LogSettings& s) {
  std::string out = "{\"log_file\":";
  AppendJsonString(&out, s.log_file);
  out.append(",\"log_info\":");
  AppendJsonBool(&out, s.log_info);
  out.append(",\"log_warning\":");
  AppendJsonBool(&out, s.log_warning);
  out.append(",\"log_error\":");
  AppendJsonBool(&out, s.log_error);
  out.append(",\"log_verbose_level\":");
  AppendJsonNumber(&out, s.log_verbose_level);
  out.append(",\"log_format\":");
  AppendJsonString(&out, s.log_format);
  out.push_back('}');
  return out;
}

Status ApplyLogSetting(std::string_view key, const LogSettingValue& value, LogSettings* s) {
  auto want_bool = [&](bool* field) -> Status {
    if (!std::holds_alternative<bool>(value)) {
      return InvalidArgument("logging request: '" + std::string(key) + "' must be a bool");
    }
    *field = std::get<bool>(value);
    return Status::Ok();
  };
  auto want_string = [&](std::string* field) -> Status {
    if (!std::holds_alternative<std::string_view>(value)) {
      return InvalidArgument("logging request: '" + std::string(key) + "' must be a string");
    }
    *field = std::string(std::get<std::string_view>(value));
    return Status::Ok();
  };
  if (key == "log_info") return want_bool(&s->log_info);
  if (key == "log_warning") return want_bool(&s->log_warning);
  if (key == "log_error") return want_bool(&s->log_error);
  if (key == "log_file") return want_string(&s->log_file);
  if (key == "log_format") return want_string(&s->log_format);
  if (key == "log_verbose_level") {
    const int64_t* level = std::get_if<int64_t>(&value);
    if (level == nullptr || *level < 0 || *level > 1000) {
      return InvalidArgument(
          "logging request: 'log_verbose_level' must be an integer from 0 to 1000");
    }
    s->log_verbose_level = static_cast<int>(*level);
    return Status::Ok();
  }
  return InvalidArgument("logging request: unknown field '" + std::string(key) +
                         "' (expected log_file, log_info, log_warning, log_error, "
                         "log_verbose_level, log_format)");
}

StatusOr<LogSettings> ApplyLogSettingsJson(std::string_view body, LogSettings current) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(simdjson::padded_string(body)).get(root)) {
    return InvalidArgument(
        std::string("failed to parse the request JSON buffer: the logging request: ") +
        simdjson::error_message(err));
  }
  simdjson::dom::object obj;
  if (root.get_object().get(obj)) {
    return InvalidArgument("the logging request must be a JSON object");
  }
  for (auto [key, value] : obj) {
    LogSettingValue v;
    bool b = false;
    int64_t n = 0;
    std::string_view text;
    if (!value.get_bool().get(b)) {
      v = b;
    } else if (!value.get_int64().get(n)) {
      v = n;
    } else if (!value.get_string().get(text)) {
      v = text;
    }
    RETURN_IF_ERROR(ApplyLogSetting(key, v, &current));
  }
  return current;
}

}  // namespace harrier::kserve
