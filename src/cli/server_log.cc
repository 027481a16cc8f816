#include "cli/server_log.h"

#include <spdlog/details/os.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include <string>
#include <string_view>

#include "core/json_writer.h"

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

// spdlog flag %~ : the message with its control characters escaped (\n, \r, \t, \xNN), so
// that one record is one line: a client's text in a message (a file override's name, a model
// name) cannot write lines of its own into the log (probe 71 forged an error line with a
// newline in an override's name).
class OneLineMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    static constexpr char kHex[] = "0123456789abcdef";
    const char* p = msg.payload.data();
    const char* const end = p + msg.payload.size();
    while (p < end) {
      const char* run = p;
      while (p < end && static_cast<unsigned char>(*p) >= 0x20 && *p != 0x7f) ++p;
      dest.append(run, p);
      if (p == end) break;
      const unsigned char c = static_cast<unsigned char>(*p++);
      if (c == '\n') {
        dest.append(std::string_view("\\n"));
      } else if (c == '\r') {
        dest.append(std::string_view("\\r"));
      } else if (c == '\t') {
        dest.append(std::string_view("\\t"));
      } else {
        const char escaped[4] = {'\\', 'x', kHex[c >> 4], kHex[c & 0xf]};
        dest.append(escaped, escaped + 4);
      }
    }
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
