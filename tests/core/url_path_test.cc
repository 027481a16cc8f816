#include "core/url_path.h"

#include <gtest/gtest.h>

#include <string>

namespace harrier {
namespace {

TEST(PercentDecodeTest, DecodesEscapesAndKeepsTheRest) {
  std::string out = "stale";
  ASSERT_TRUE(PercentDecode("plain-name_1.onnx", &out).ok());
  EXPECT_EQ(out, "plain-name_1.onnx");
  ASSERT_TRUE(PercentDecode("ll%61ma", &out).ok());
  EXPECT_EQ(out, "llama");
  ASSERT_TRUE(PercentDecode("meta-llama%2FLlama%2d3%3A8b+q4", &out).ok());
  EXPECT_EQ(out, "meta-llama/Llama-3:8b+q4");  // '+' is a plus in a path, not a space
  ASSERT_TRUE(PercentDecode("%e2%82%AC", &out).ok());
  EXPECT_EQ(out, "\xe2\x82\xac");
  ASSERT_TRUE(PercentDecode("", &out).ok());
  EXPECT_EQ(out, "");
}

TEST(PercentDecodeTest, RefusesAPercentWithoutTwoHexDigits) {
  std::string out;
  for (const char* bad : {"%", "a%", "a%2", "%zz", "%2g", "%%41"}) {
    Status s = PercentDecode(bad, &out);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("malformed percent-encoding"), std::string::npos) << bad;
    EXPECT_NE(s.message().find(bad), std::string::npos) << bad;  // names the segment
  }
}

}  // namespace
}  // namespace harrier
