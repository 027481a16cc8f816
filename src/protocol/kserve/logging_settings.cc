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

StatusOr<LogSettings> ApplyLogSettingsJson(std::string_view body, LogSettings current) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(simdjson::padded_string(body)).get(root)) {
    return InvalidArgument(std::string("invalid JSON in the logging request: ") +
                           simdjson::error_message(err));
  }
  simdjson::dom::object obj;
  if (root.get_object().get(obj)) {
    return InvalidArgument("the logging request must be a JSON object");
  }
  for (auto [key, value] : obj) {
    auto want_bool = [&, key = key, value = value](bool* field) -> Status {
      if (value.get_bool().get(*field)) {
        return InvalidArgument("logging request: '" + std::string(key) + "' must be a bool");
      }
      return Status::Ok();
    };
    auto want_string = [&, key = key, value = value](std::string* field) -> Status {
      std::string_view v;
      if (value.get_string().get(v)) {
        return InvalidArgument("logging request: '" + std::string(key) + "' must be a string");
      }
      *field = std::string(v);
      return Status::Ok();
    };
    Status s;
    if (key == "log_info") {
      s = want_bool(&current.log_info);
    } else if (key == "log_warning") {
      s = want_bool(&current.log_warning);
    } else if (key == "log_error") {
      s = want_bool(&current.log_error);
    } else if (key == "log_verbose_level") {
      int64_t level = 0;
      if (value.get_int64().get(level) || level < 0 || level > 1000) {
        return InvalidArgument(
            "logging request: 'log_verbose_level' must be an integer from 0 to 1000");
      }
      current.log_verbose_level = static_cast<int>(level);
    } else if (key == "log_file") {
      s = want_string(&current.log_file);
    } else if (key == "log_format") {
      s = want_string(&current.log_format);
    } else {
      return InvalidArgument("logging request: unknown field '" + std::string(key) +
                             "' (expected log_file, log_info, log_warning, log_error, "
                             "log_verbose_level, log_format)");
    }
    if (!s.ok()) return s;
  }
  return current;
}

}  // namespace harrier::kserve
