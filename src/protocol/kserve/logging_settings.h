// Triton's logging extension over harrier::LogSettings: the JSON of GET/POST /v2/logging, and
// the settings one by one for gRPC's LogSettings (protocol/grpc), which carries the same names.
//
//   {"log_file":"","log_info":true,"log_warning":true,"log_error":true,
//    "log_verbose_level":0,"log_format":"text"}
//
// A POST body (a LogSettings request's map) has any subset of these fields; the rest keep their
// values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "harrier/log_control.h"
#include "harrier/status.h"

namespace harrier::kserve {

std::string LogSettingsJson(const LogSettings& settings);

// One setting's value as a request carries it (monostate: a type neither protocol allows).
using LogSettingValue = std::variant<std::monostate, bool, int64_t, std::string_view>;

// `*settings` with `key` set to `value`. kInvalidArgument for an unknown key, a value of the
// wrong type, or a verbose level outside 0..1000; `*settings` is then unchanged.
Status ApplyLogSetting(std::string_view key, const LogSettingValue& value, LogSettings* settings);

// `current` with the fields of `body` applied (ApplyLogSetting's rules). kInvalidArgument for a
// body that is not a JSON object, or a field ApplyLogSetting refuses.
StatusOr<LogSettings> ApplyLogSettingsJson(std::string_view body, LogSettings current);

}  // namespace harrier::kserve
