#include "cli/server_log.h"

#include <spdlog/details/os.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include <string>
#include <string_view>

#include "core/json_writer.h"
#include "observability/access_log.h"

namespace harrier {
namespace {

// spdlog flag %* : the message as the inside of a JSON string.
class JsonEscapedMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string quoted;
    AppendJsonString(&quoted, std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(quoted.data() + 1, quoted.data() + quoted.size() - 1);  // without the quotes
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonEscapedMessage>();
  }
};

// spdlog flag %~ : the message as a log line may hold it (AppendLogText: controls, NEL, CSI,
// U+2028 and U+2029 escaped, backslashes doubled), so that one record is one line: a client's
// text in a message (a file override's name, a model name) cannot write lines of its own into
// the log (probe 71 forged an error line with a newline in an override's name, probe 72 with
// U+2028 and NEL).
class OneLineMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string escaped;
    AppendLogText(&escaped, std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(escaped.data(), escaped.data() + escaped.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<OneLineMessage>();
  }
};

}  // namespace

std::unique_ptr<spdlog::formatter> ServerLogFormatter(std::string_view log_format) {
  if (log_format == "json") {
    auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<JsonEscapedMessage>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","thread":%t,"message":"%*"})");
    return formatter;
  }
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<OneLineMessage>('~').set_pattern("%Y-%m-%d %H:%M:%S.%e %^%L%$ %t] %~");
  return formatter;
}

std::shared_ptr<AsyncLogSink> SetUpServerLog(const ServeFlags& flags) {
  AsyncLogSink::Options sink_options;
  sink_options.color = flags.log_format != "json" && spdlog::details::os::in_terminal(stderr) &&
                       spdlog::details::os::is_color_terminal();
  auto sink = std::make_shared<AsyncLogSink>(sink_options);
  auto logger = std::make_shared<spdlog::logger>("harrier", sink);
  logger->set_formatter(ServerLogFormatter(flags.log_format));
  logger->set_level(flags.log_verbose >= 2   ? spdlog::level::trace
                    : flags.log_verbose == 1 ? spdlog::level::debug
                                             : spdlog::level::info);
  spdlog::set_default_logger(logger);
  return sink;
}

}  // namespace harrier
