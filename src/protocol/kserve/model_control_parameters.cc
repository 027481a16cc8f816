#include "protocol/kserve/model_control_parameters.h"

#include <simdjson.h>

#include <string_view>

#include "core/base64.h"

namespace harrier::kserve {

StatusOr<ModelLoadOptions> ParseModelControlParameters(
    const std::shared_ptr<const std::string>& body, ModelControlAction action) {
  ModelLoadOptions options;
  if (!body || body->find_first_not_of(" \t\r\n") == std::string::npos) return options;
  const bool load = action == ModelControlAction::kLoad;
  const std::string what = load ? "the load request" : "the unload request";
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(simdjson::padded_string(*body)).get(root))
    return InvalidArgument("failed to parse the request JSON buffer: " + what + ": " +
                           simdjson::error_message(err));
  simdjson::dom::object obj;
  if (root.get_object().get(obj)) return InvalidArgument(what + " must be a JSON object");
  bool seen_parameters = false;
  for (auto [key, value] : obj) {
    if (key != "parameters")
      return InvalidArgument(what + ": unknown field '" + std::string(key.substr(0, 128)) +
                             "' (expected parameters)");
    if (seen_parameters) return InvalidArgument(what + ": 'parameters' is given more than once");
    seen_parameters = true;
    simdjson::dom::object parameters;
    if (value.get_object().get(parameters))
      return InvalidArgument(what + ": 'parameters' must be an object");
    for (auto [name, parameter] : parameters) {
      if (load && name == "config") {
        if (options.config_json)
          return InvalidArgument(what + ": parameters.config is given more than once");
        std::string_view config;
        if (parameter.get_string().get(config))
          return InvalidArgument(what +
                                 ": parameters.config must be a string holding the "
                                 "model config as JSON");
        options.config_json = std::string(config);
      } else if (!load && name == "unload_dependents") {
        bool ignored = false;  // no model depends on another here (no ensembles yet)
        if (parameter.get_bool().get(ignored))
          return InvalidArgument(what + ": parameters.unload_dependents must be a bool");
      } else if (load && name.substr(0, 5) == "file:") {
        // The name is client text going back into an error: cut short.
        const std::string shown(name.substr(0, 128));
        std::string_view encoded;
        if (parameter.get_string().get(encoded))
          return InvalidArgument(what + ": parameters['" + shown +
                                 "'] must be a string holding the file's content in base64");
        std::optional<std::string> content = DecodeBase64(encoded);
        if (!content)
          return InvalidArgument(what + ": parameters['" + shown +
                                 "'] is not base64 (RFC 4648, with '=' padding, no whitespace)");
        options.files.push_back({std::string(name.substr(5)), std::move(*content)});
      } else {
        return InvalidArgument(what + ": unknown parameter '" + std::string(name.substr(0, 128)) +
                               "'");
      }
    }
  }
  return options;
}

}  // namespace harrier::kserve
