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

TEST(ParseUrlVersionTest, TakesAPositiveIntegerDecodedOrNot) {
  EXPECT_EQ(*ParseUrlVersion("1"), 1);
  EXPECT_EQ(*ParseUrlVersion("%31%32"), 12);
  EXPECT_EQ(*ParseUrlVersion("007"), 7);  // leading zeros, as Triton takes them
  EXPECT_EQ(*ParseUrlVersion("9223372036854775807"), INT64_MAX);
}

TEST(ParseUrlVersionTest, RefusesAnythingElseNamingTheSegment) {
  for (const char* bad :
       {"", "0", "-1", "%2D1", "+1", "1a", "1.0", " 1", "abc", "9223372036854775808"}) {
    StatusOr<int64_t> v = ParseUrlVersion(bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(v.status().message(),
              "model version '" + std::string(bad) + "' in the URL must be a positive integer");
  }
  EXPECT_NE(ParseUrlVersion("%zz").status().message().find("malformed percent-encoding"),
            std::string::npos);
}

}  // namespace
}  // namespace harrier
