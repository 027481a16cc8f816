#include "protocol/kserve/float16.h"

#include <gtest/gtest.h>

#include <cmath>

namespace harrier::kserve {
namespace {

TEST(Float16Test, Fp16RoundsToNearestEven) {
  EXPECT_EQ(DoubleToFp16Bits(0.0), 0x0000);
  EXPECT_EQ(DoubleToFp16Bits(-0.0), 0x8000);
  EXPECT_EQ(DoubleToFp16Bits(1.0), 0x3C00);
  EXPECT_EQ(DoubleToFp16Bits(-2.0), 0xC000);
  EXPECT_EQ(DoubleToFp16Bits(65504.0), 0x7BFF);
  EXPECT_EQ(DoubleToFp16Bits(65519.0), 0x7BFF);  // below the tie with infinity
  EXPECT_EQ(DoubleToFp16Bits(0.1), 0x2E66);
  EXPECT_EQ(DoubleToFp16Bits(1.0 + std::ldexp(1, -11)), 0x3C00);      // tie -> even
  EXPECT_EQ(DoubleToFp16Bits(1.0 + 3 * std::ldexp(1, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(DoubleToFp16Bits(1.0 + std::ldexp(1, -11) + std::ldexp(1, -30)), 0x3C01);
  EXPECT_EQ(DoubleToFp16Bits(2047.5), 0x6800);              // mantissa carry into the exponent
  EXPECT_EQ(DoubleToFp16Bits(std::ldexp(1, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(DoubleToFp16Bits(std::ldexp(1, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(DoubleToFp16Bits(std::ldexp(1, -25)), 0x0000);  // tie -> even (zero)
  EXPECT_EQ(DoubleToFp16Bits(3 * std::ldexp(1, -25)), 0x0002);
  EXPECT_EQ(DoubleToFp16Bits(std::ldexp(1023.5, -24)), 0x0400);  // subnormal rounds to normal
  EXPECT_EQ(DoubleToFp16Bits(1e-10), 0x0000);
  EXPECT_TRUE(FitsFp16(65519.99));
  EXPECT_FALSE(FitsFp16(65520.0));
  EXPECT_FALSE(FitsFp16(-1e6));
}

TEST(Float16Test, Bf16RoundsToNearestEven) {
  EXPECT_EQ(DoubleToBf16Bits(1.0), 0x3F80);
  EXPECT_EQ(DoubleToBf16Bits(-2.0), 0xC000);
  EXPECT_EQ(DoubleToBf16Bits(1.0 + std::ldexp(1, -8)), 0x3F80);      // tie -> even
  EXPECT_EQ(DoubleToBf16Bits(1.0 + 3 * std::ldexp(1, -8)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(DoubleToBf16Bits(3.140625), 0x4049);
  EXPECT_EQ(DoubleToBf16Bits(std::ldexp(1, -133)), 0x0001);  // smallest subnormal
  EXPECT_EQ(DoubleToBf16Bits(0x1.fep127), 0x7F7F);           // largest finite
  EXPECT_FALSE(FitsBf16(0x1.ffp127));
  EXPECT_TRUE(FitsFp32(3.4028235e38));
  EXPECT_FALSE(FitsFp32(3.4028236e38));
}

TEST(Float16Test, WideningIsExact) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float f = Fp16BitsToFloat(static_cast<uint16_t>(bits));
    const uint32_t exp = (bits >> 10) & 0x1F;
    if (exp == 0x1F) {
      EXPECT_TRUE((bits & 0x3FF) ? std::isnan(f) : std::isinf(f)) << bits;
      continue;
    }
    ASSERT_EQ(DoubleToFp16Bits(f), bits) << bits;  // round trip
  }
  EXPECT_EQ(Bf16BitsToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bf16BitsToFloat(0xC049), -3.140625f);
  EXPECT_TRUE(std::isinf(Bf16BitsToFloat(0x7F80)));
}

}  // namespace
}  // namespace harrier::kserve
