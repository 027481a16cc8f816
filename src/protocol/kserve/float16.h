// Conversions between JSON numbers (doubles) and the 16-bit float formats FP16 (IEEE 754
// binary16) and BF16 (bfloat16), for the KServe codec. Pure functions, header-only.
//
// Narrowing rounds to nearest, ties to even, directly from the double (no double rounding
// through float). Values whose magnitude rounds past the largest finite value are rejected by
// the caller (FitsFp16 / FitsBf16) rather than silently turned into infinity.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace harrier::kserve {
namespace internal {

// Rounds a finite double to a binary float with kExpBits exponent bits and kMantBits mantissa
// bits (no overflow handling: the caller checked the range). Ties to even via std::nearbyint
// under the default rounding mode.
template <int kExpBits, int kMantBits>
uint16_t RoundToSmallFloat(double value) {
  constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  constexpr int kMinNormalExp = 1 - kBias;
  const uint16_t sign = std::signbit(value) ? uint16_t(1u << (kExpBits + kMantBits)) : 0;
  const double a = std::fabs(value);
  if (a == 0) return sign;
  int exp2 = 0;
  std::frexp(a, &exp2);    // a = m * 2^exp2, m in [0.5, 1)
  const int e = exp2 - 1;  // a = (1.f) * 2^e
  if (e < kMinNormalExp) {
    // Subnormal: units of 2^(kMinNormalExp - kMantBits). Scaling by a power of two is exact.
    const double units = std::nearbyint(std::ldexp(a, kMantBits - kMinNormalExp));
    // units == 2^kMantBits rounds up into the smallest normal; the bit pattern is the same.
    return sign | static_cast<uint16_t>(units);
  }
  double mant = std::nearbyint(std::ldexp(a, kMantBits - e));  // in [2^m, 2^(m+1)]
  int biased = e + kBias;
  if (mant >= double(1 << (kMantBits + 1))) {
    mant /= 2;
    ++biased;
  }
  const uint16_t bits =
      static_cast<uint16_t>((biased << kMantBits) | (static_cast<int>(mant) - (1 << kMantBits)));
  return sign | bits;
}

}  // namespace internal

// Magnitudes at or above these round to infinity in the target format.
inline constexpr double kFp16RoundsToInf = 65520.0;         // 65504 + half an ulp
inline constexpr double kBf16RoundsToInf = 0x1.ffp127;      // max + half an ulp
inline constexpr double kFp32RoundsToInf = 0x1.ffffffp127;  // FLT_MAX + half an ulp

inline bool FitsFp16(double v) {
  return std::fabs(v) < kFp16RoundsToInf;
}
inline bool FitsBf16(double v) {
  return std::fabs(v) < kBf16RoundsToInf;
}
inline bool FitsFp32(double v) {
  return std::fabs(v) < kFp32RoundsToInf;
}

// REQUIRES: FitsFp16(v) / FitsBf16(v).
inline uint16_t DoubleToFp16Bits(double v) {
  return internal::RoundToSmallFloat<5, 10>(v);
}
inline uint16_t DoubleToBf16Bits(double v) {
  return internal::RoundToSmallFloat<8, 7>(v);
}

// Exact widening (every FP16 and BF16 value is a float); NaN and infinities are kept.
inline float Fp16BitsToFloat(uint16_t bits) {
  const uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1Fu;
  const uint32_t mant = bits & 0x3FFu;
  float magnitude;
  if (exp == 0) {
    magnitude = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 0x1F) {
    return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
  } else {
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  }
  return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
}

inline float Bf16BitsToFloat(uint16_t bits) {
  return std::bit_cast<float>(uint32_t(bits) << 16);
}

}  // namespace harrier::kserve
