// LogControl: the server's log settings, read and changed at runtime through Triton's logging
// extension (GET/POST /v2/logging, docs/logging.md).
//
// Triton has independent switches for info, warning and error lines plus a verbose level;
// Harrier's logger has one threshold. LogSettings therefore always describes a threshold: the
// switches are "every level at or above the threshold is on", and a change that asks for a
// combination no threshold gives (info on, warning off) is refused.
#pragma once

#include <string>

#include "harrier/status.h"

namespace harrier {

struct LogSettings {
  bool log_info = true;
  bool log_warning = true;
  bool log_error = true;
  int log_verbose_level = 0;        // 0: none; 1: debug lines; 2 and more: trace lines too
  std::string log_format = "text";  // "text" or "json"; fixed at start (--log-format)
  std::string log_file;             // "" = stderr; fixed at start
};

class LogControl {
 public:
  virtual ~LogControl() = default;
  virtual LogSettings Get() const = 0;
  // Applies `settings`. kInvalidArgument when they are not a threshold (see above) or change a
  // field that is fixed at start. Thread safe.
  virtual Status Set(const LogSettings& settings) = 0;
};

}  // namespace harrier
