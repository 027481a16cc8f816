#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "harrier/trace.h"

namespace harrier {
namespace {

// The example from the W3C Trace Context specification, section 3.2.
constexpr std::string_view kSpecExample = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(ParseTraceparentTest, ReadsTheSpecificationExample) {
  const auto context = ParseTraceparent(kSpecExample);
  ASSERT_TRUE(context.has_value());
  const std::array<uint8_t, 16> trace_id = {0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
                                            0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36};
  const std::array<uint8_t, 8> span_id = {0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
  EXPECT_EQ(context->trace_id, trace_id);
  EXPECT_EQ(context->span_id, span_id);
  EXPECT_EQ(context->flags, 0x01);
  EXPECT_TRUE(context->sampled());
  EXPECT_TRUE(context->valid());
}

TEST(ParseTraceparentTest, NotSampledFlagAndUnknownFlagBits) {
  const auto not_sampled =
      ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  ASSERT_TRUE(not_sampled.has_value());
  EXPECT_FALSE(not_sampled->sampled());
  // Flags other than "sampled" are kept as they came; bit 0 still decides.
  const auto other_bits =
      ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe");
  ASSERT_TRUE(other_bits.has_value());
  EXPECT_EQ(other_bits->flags, 0xfe);
  EXPECT_FALSE(other_bits->sampled());
}

struct InvalidCase {
  const char* why;
  std::string_view value;
};

class ParseTraceparentInvalidTest : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(ParseTraceparentInvalidTest, IsRefused) {
  EXPECT_FALSE(ParseTraceparent(GetParam().value).has_value()) << GetParam().why;
}

INSTANTIATE_TEST_SUITE_P(
    Specification, ParseTraceparentInvalidTest,
    ::testing::Values(
        InvalidCase{"empty", ""},
        InvalidCase{"all-zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
        InvalidCase{"all-zero span id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"},
        InvalidCase{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
        InvalidCase{"upper-case trace id",
                    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"},
        InvalidCase{"upper-case span id",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01"},
        InvalidCase{"upper-case flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A"},
        InvalidCase{"upper-case version",
                    "0A-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
        InvalidCase{"version 00 with a suffix",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-"},
        InvalidCase{
            "version 00 with extra data",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-will-be"},
        InvalidCase{"too short", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1"},
        InvalidCase{"short trace id", "00-4bf92f3577b34da6a3ce929d0e0e473-000f067aa0ba902b7-01"},
        InvalidCase{"non-hex character", "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01"},
        InvalidCase{"wrong separator", "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
        InvalidCase{"wrong separator before flags",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7.01"},
        InvalidCase{"leading space", " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
        InvalidCase{"trailing space", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 "},
        InvalidCase{"future version followed by other than '-'",
                    "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.what"},
        InvalidCase{"future version with a zero trace id",
                    "cc-00000000000000000000000000000000-00f067aa0ba902b7-01-x"}));

TEST(ParseTraceparentTest, AHigherVersionIsReadByItsFirstFourFields) {
  const auto exact = ParseTraceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  ASSERT_TRUE(exact.has_value());
  EXPECT_TRUE(exact->sampled());
  const auto extended = ParseTraceparent(
      "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-will-be-like");
  ASSERT_TRUE(extended.has_value());
  EXPECT_EQ(extended->trace_id, exact->trace_id);
  EXPECT_EQ(extended->span_id, exact->span_id);
}

TEST(FormatTraceparentTest, RoundTrips) {
  const auto context = ParseTraceparent(kSpecExample);
  ASSERT_TRUE(context.has_value());
  EXPECT_EQ(FormatTraceparent(*context), kSpecExample);
  SpanContext other;
  other.trace_id[15] = 0xab;
  other.span_id[0] = 0xcd;
  const std::string text = FormatTraceparent(other);
  EXPECT_EQ(text, "00-000000000000000000000000000000ab-cd00000000000000-00");
  EXPECT_EQ(text.size(), 55u);
}

TEST(SpanContextTest, ValidNeedsBothIdsNonZero) {
  SpanContext context;
  EXPECT_FALSE(context.valid());
  context.trace_id[3] = 1;
  EXPECT_FALSE(context.valid());
  context.span_id[7] = 1;
  EXPECT_TRUE(context.valid());
  context.trace_id[3] = 0;
  EXPECT_FALSE(context.valid());
}

TEST(ValidTracestateTest, AcceptsTheSpecificationExamples) {
  EXPECT_TRUE(ValidTracestate("congo=t61rcWkgMzE"));
  EXPECT_TRUE(ValidTracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
  EXPECT_TRUE(ValidTracestate("rojo=00f067aa0ba902b7 , congo=t61rcWkgMzE"));
  EXPECT_TRUE(ValidTracestate("fw529a3039@dt=ZnJhbWV3b3Jr,,,a=b"));
}

TEST(ValidTracestateTest, Limits) {
  std::string members;
  for (int i = 0; i < 32; ++i) members += (i ? ",k" : "k") + std::to_string(i) + "=v";
  EXPECT_TRUE(ValidTracestate(members));
  EXPECT_FALSE(ValidTracestate(members + ",k32=v")) << "33 members";
  EXPECT_TRUE(ValidTracestate(members + ",,  ,")) << "empty members do not count";

  const std::string at_limit = "a=" + std::string(510, 'x');
  EXPECT_TRUE(ValidTracestate(at_limit));
  EXPECT_FALSE(ValidTracestate(at_limit + "x")) << "513 bytes";
}

TEST(ValidTracestateTest, RefusesEmptyAndNonPrintable) {
  EXPECT_FALSE(ValidTracestate(""));
  EXPECT_FALSE(ValidTracestate(" , ,"));
  EXPECT_FALSE(ValidTracestate("a=b\tc"));
  EXPECT_FALSE(ValidTracestate("a=b\nc=d"));
  EXPECT_FALSE(ValidTracestate("a=\x7f"));
  EXPECT_FALSE(ValidTracestate("a=caf\xc3\xa9"));
}

}  // namespace
}  // namespace harrier
