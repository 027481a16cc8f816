#include "observability/spdlog_log_control.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace harrier {

StatusOr<spdlog::level::level_enum> LogThresholdFor(const LogSettings& s) {
  if (s.log_verbose_level < 0) return InvalidArgument("log_verbose_level must not be negative");
  // Verbose lines are below info: asking for them implies info, warning and error lines.
  const bool verbose = s.log_verbose_level > 0;
  if (verbose && !(s.log_info && s.log_warning && s.log_error)) {
    return InvalidArgument(
        "log_verbose_level > 0 needs log_info, log_warning and log_error on: Harrier's log "
        "level is one threshold");
  }
  if ((s.log_info && !s.log_warning) || (s.log_warning && !s.log_error)) {
    return InvalidArgument(
        "log_info, log_warning and log_error are a threshold in Harrier: a less severe level "
        "cannot be on while a more severe one is off");
  }
  if (s.log_verbose_level >= 2) return spdlog::level::trace;
  if (verbose) return spdlog::level::debug;
  if (s.log_info) return spdlog::level::info;
  if (s.log_warning) return spdlog::level::warn;
  if (s.log_error) return spdlog::level::err;
  return spdlog::level::off;
}

LogSettings LogSettingsFor(spdlog::level::level_enum threshold) {
  LogSettings s;
  s.log_format.clear();
  s.log_info = threshold <= spdlog::level::info;
  s.log_warning = threshold <= spdlog::level::warn;
  s.log_error = threshold <= spdlog::level::err;
  s.log_verbose_level = threshold <= spdlog::level::trace   ? 2
                        : threshold <= spdlog::level::debug ? 1
                                                            : 0;
  return s;
}

SpdlogLogControl::SpdlogLogControl(std::string log_format, std::string log_file)
    : log_format_(std::move(log_format)), log_file_(std::move(log_file)) {}

LogSettings SpdlogLogControl::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  LogSettings s = LogSettingsFor(spdlog::default_logger()->level());
  s.log_format = log_format_;
  s.log_file = log_file_;
  return s;
}

Status SpdlogLogControl::Set(const LogSettings& settings) {
  if (settings.log_format != log_format_) {
    return InvalidArgument("log_format is fixed at start (--log-format " + log_format_ + ")");
  }
  if (settings.log_file != log_file_) {
    return InvalidArgument("log_file cannot be changed: the server log goes to stderr");
  }
  ASSIGN_OR_RETURN(spdlog::level::level_enum level, LogThresholdFor(settings));
  std::lock_guard<std::mutex> lock(mu_);
  spdlog::default_logger()->set_level(level);
  spdlog::info("log level set to {} through /v2/logging", spdlog::level::to_string_view(level));
  return Status::Ok();
}

}  // namespace harrier
