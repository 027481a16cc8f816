// SpdlogLogControl: the LogControl (include/harrier/log_control.h) over spdlog's default
// logger, for GET/POST /v2/logging.
//
// The settings map to one spdlog level, the threshold:
//   log_verbose_level >= 2 -> trace, 1 -> debug, else log_info -> info, else log_warning ->
//   warn, else log_error -> error, else off.
// Thread safety: Get() and Set() from any thread (spdlog's level is atomic; a mutex keeps a
// Set() and its read-back together).
#pragma once

#include <spdlog/common.h>

#include <mutex>
#include <string>

#include "harrier/log_control.h"

namespace harrier {

// The threshold `settings` describe; kInvalidArgument when no threshold gives them (a switch
// off while a less severe one is on, e.g. log_info on and log_warning off).
StatusOr<spdlog::level::level_enum> LogThresholdFor(const LogSettings& settings);
// The switches and verbose level that `threshold` means (log_format and log_file left empty).
LogSettings LogSettingsFor(spdlog::level::level_enum threshold);

class SpdlogLogControl : public LogControl {
 public:
  // `log_format` and `log_file` are reported as given and cannot be changed by Set().
  SpdlogLogControl(std::string log_format, std::string log_file);

  LogSettings Get() const override;
  // Sets the default logger's level. kInvalidArgument: not a threshold, or log_format or
  // log_file differ from the ones fixed at start.
  Status Set(const LogSettings& settings) override;

 private:
  const std::string log_format_;
  const std::string log_file_;
  mutable std::mutex mu_;
};

}  // namespace harrier
