#include "cli/server_log.h"

#include <gtest/gtest.h>

#include <string>

namespace harrier {
namespace {

std::string Formatted(std::string_view format, std::string_view message) {
  spdlog::details::log_msg msg("harrier", spdlog::level::err, message);
  spdlog::memory_buf_t out;
  ServerLogFormatter(format)->format(msg, out);
  return std::string(out.data(), out.size());
}

// One record, one line: a client's text in a message cannot forge lines (probe 71 wrote
// "2099-01-01 00:00:00.000 E 1] FORGED line" with a newline in a file override's name).
TEST(ServerLogTest, TextLinesEscapeControlCharacters) {
  const std::string line =
      Formatted("text", "loading 'file:1/m\n2099-01-01 00:00:00.000 E 1] FORGED'\r\t\x01\x7f ok");
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;  // the record's own end only
  EXPECT_NE(line.find(" E "), std::string::npos) << line;
  EXPECT_NE(
      line.find("] loading 'file:1/m\\n2099-01-01 00:00:00.000 E 1] FORGED'\\r\\t\\x01\\x7f ok"),
      std::string::npos)
      << line;
  const std::string plain = Formatted("text", "model 'm' version 1 is READY");
  EXPECT_NE(plain.find("] model 'm' version 1 is READY\n"), std::string::npos) << plain;
}

TEST(ServerLogTest, JsonLinesEscapeThemAsJson) {
  const std::string line = Formatted("json", "a\nb");
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
  EXPECT_NE(line.find(R"("message":"a\nb")"), std::string::npos) << line;
}

}  // namespace
}  // namespace harrier
