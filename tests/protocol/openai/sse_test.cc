#include "protocol/openai/sse.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace harrier::openai {
namespace {

using ::testing::HasSubstr;

TEST(SseTest, Events) {
  struct Case {
    std::string data;
    std::optional<uint64_t> id;
    std::string event;
  } cases[] = {
      {R"({"a":1})", std::nullopt, "data: {\"a\":1}\n\n"},
      {R"({"a":1})", 7, "id: 7\ndata: {\"a\":1}\n\n"},
      {"x", 18446744073709551615u, "id: 18446744073709551615\ndata: x\n\n"},
      {"", std::nullopt, "data: \n\n"},
      // Every line end the spec knows starts a new data line.
      {"one\ntwo", std::nullopt, "data: one\ndata: two\n\n"},
      {"one\r\ntwo\rthree", 1, "id: 1\ndata: one\ndata: two\ndata: three\n\n"},
      {"trailing\n", std::nullopt, "data: trailing\ndata: \n\n"},
      {"\n\n", std::nullopt, "data: \ndata: \ndata: \n\n"},
      {"a\r\n\r\nb", std::nullopt, "data: a\ndata: \ndata: b\n\n"},
      {"ends with cr\r", std::nullopt, "data: ends with cr\ndata: \n\n"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(SseEvent(c.data, c.id), c.event) << c.data;
  }
  std::string out = "data: first\n\n";
  AppendSseEvent(&out, "second", 2);
  EXPECT_EQ(out, "data: first\n\nid: 2\ndata: second\n\n");
}

// What an EventSource would hand its listener for `stream`: the data of its first event.
std::string ClientData(std::string_view stream) {
  std::string data;
  size_t pos = 0;
  while (pos < stream.size()) {
    const size_t end = stream.find('\n', pos);
    const std::string_view line = stream.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) break;
    if (line.starts_with("data:")) {
      std::string_view value = line.substr(5);
      if (value.starts_with(' ')) value.remove_prefix(1);
      data.append(value);
      data.push_back('\n');
    }
  }
  if (!data.empty()) data.pop_back();
  return data;
}

TEST(SseTest, DataRoundTripsThroughAClientParser) {
  for (std::string data : {"plain", "multi\nline\n\npayload", " leading space", "", "x\n"}) {
    EXPECT_EQ(ClientData(SseEvent(data, 3)), data);
  }
  EXPECT_EQ(ClientData(SseEvent("a\r\nb\rc", 3)), "a\nb\nc");  // CR and CRLF come back as LF
}

TEST(SseTest, FixedEvents) {
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
  EXPECT_EQ(kSseHeartbeat, ": ping\n\n");
}

TEST(SseTest, LastEventId) {
  struct Case {
    const char* header;
    uint64_t id;
  } good[] = {{"0", 0},
              {"42", 42},
              {" 42\t", 42},
              {"007", 7},
              {"18446744073709551615", 18446744073709551615u}};
  for (const Case& c : good) {
    StatusOr<uint64_t> id = ParseLastEventId(c.header);
    ASSERT_TRUE(id.ok()) << c.header << ": " << id.status().ToString();
    EXPECT_EQ(*id, c.id) << c.header;
  }
  for (const char* bad : {"", "  ", "-1", "+1", "1.5", "0x10", "12 34", "abc", "1a",
                          "18446744073709551616", "99999999999999999999999"}) {
    StatusOr<uint64_t> id = ParseLastEventId(bad);
    ASSERT_FALSE(id.ok()) << bad;
    EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(id.status().message(), HasSubstr("Last-Event-ID")) << bad;
  }
}

}  // namespace
}  // namespace harrier::openai
