// The JSON of Triton's logging extension (GET/POST /v2/logging), over harrier::LogSettings.
//
//   {"log_file":"","log_info":true,"log_warning":true,"log_error":true,
//    "log_verbose_level":0,"log_format":"text"}
//
// A POST body is an object with any subset of these fields; the rest keep their values.
#pragma once

#include <string>
#include <string_view>

#include "harrier/log_control.h"
#include "harrier/status.h"

namespace harrier::kserve {

std::string LogSettingsJson(const LogSettings& settings);

// `current` with the fields of `body` applied. kInvalidArgument for a body that is not a JSON
// object, an unknown field, a value of the wrong type, or a negative verbose level.
StatusOr<LogSettings> ApplyLogSettingsJson(std::string_view body, LogSettings current);

}  // namespace harrier::kserve
