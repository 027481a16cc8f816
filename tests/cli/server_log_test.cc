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
      line.find(
          "] loading 'file:1/m\\n2099-01-01 00:00:00.000 E 1] FORGED'\\r\\t\\u0001\\u007f ok"),
      std::string::npos)
      << line;
  // Line breaks outside ASCII (probe 72: U+2028 and NEL split lines for splitlines()), and a
  // backslash, which now reads one way back; other UTF-8 passes as it is.
  const std::string unicode = Formatted("text", "a\u2028b\u2029c\u0085d \\n é 模型");
  EXPECT_NE(unicode.find("] a\\u2028b\\u2029c\\u0085d \\\\n é 模型\n"), std::string::npos)
      << unicode;
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
