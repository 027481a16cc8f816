#include "core/json_writer.h"

#include <gtest/gtest.h>

#include <string>

namespace harrier {
namespace {

std::string Number(double value) {
  return JsonNumber(value);
}

// The shortest form that reads back as the same double, as to_chars writes it; an integral
// value past 15 digits in scientific notation, since as a long run of digits it is an integer
// past uint64 that simdjson refuses and Python reads as an int (a traffic policy's own JSON did
// not parse back: found by fuzzing).
TEST(AppendJsonNumberTest, DoublesAreShortestAndNeverALongIntegerLiteral) {
  EXPECT_EQ(Number(3.0), "3");
  EXPECT_EQ(Number(0.5), "0.5");
  EXPECT_EQ(Number(1.05), "1.05");
  EXPECT_EQ(Number(123456789012345.0), "123456789012345");  // 15 digits: as it is
  EXPECT_EQ(Number(1234567890123456.0), "1.234567890123456e+15");
  EXPECT_EQ(Number(1e20), "1e+20");
  EXPECT_EQ(Number(-1e20), "-1e+20");
  EXPECT_EQ(Number(1.4444444444444443e21), "1.4444444444444443e+21");
  EXPECT_EQ(Number(-0.0), "-0.0");
  EXPECT_EQ(Number(1e300), "1e+300");
  EXPECT_EQ(JsonNumber(int64_t{1234567890123456789}), "1234567890123456789");  // stays an int
}

}  // namespace
}  // namespace harrier
