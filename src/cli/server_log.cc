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

}  // namespace

std::shared_ptr<AsyncLogSink> SetUpServerLog(const ServeFlags& flags) {
  AsyncLogSink::Options sink_options;
  sink_options.color = flags.log_format != "json" && spdlog::details::os::in_terminal(stderr) &&
                       spdlog::details::os::is_color_terminal();
  auto sink = std::make_shared<AsyncLogSink>(sink_options);
  auto logger = std::make_shared<spdlog::logger>("harrier", sink);
  if (flags.log_format == "json") {
    auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<JsonEscapedMessage>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","thread":%t,"message":"%*"})");
    logger->set_formatter(std::move(formatter));
  } else {
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%L%$ %t] %v");
  }
  logger->set_level(flags.log_verbose >= 2   ? spdlog::level::trace
                    : flags.log_verbose == 1 ? spdlog::level::debug
                                             : spdlog::level::info);
  spdlog::set_default_logger(logger);
  return sink;
}

}  // namespace harrier
