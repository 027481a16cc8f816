// The server log: spdlog's default logger, writing to stderr through an AsyncLogSink (a stalled
// reader of stderr never holds a thread that logs, nor the stop), as text or as one JSON object
// a line (--log-format), at the level --log-verbose sets.
#pragma once

#include <spdlog/formatter.h>

#include <memory>
#include <string_view>

#include "cli/serve_flags.h"
#include "observability/async_log_sink.h"

namespace harrier {

// Makes the server log spdlog's default logger and returns its sink, which the caller stops
// last of all (AsyncLogSink::Stop), after everything that logs.
std::shared_ptr<AsyncLogSink> SetUpServerLog(const ServeFlags& flags);

// The formatter of a --log-format: "text" writes `2026-12-07 20:05:10.090 E 24564] message`
// with the message's control characters escaped (one record, one line), "json" one object.
std::unique_ptr<spdlog::formatter> ServerLogFormatter(std::string_view log_format);

}  // namespace harrier
