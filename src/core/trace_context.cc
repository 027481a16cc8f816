// W3C Trace Context (https://www.w3.org/TR/trace-context/): traceparent and tracestate.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "harrier/trace.h"

namespace harrier {
namespace {

// Lower-case hex only: the specification refuses upper case ("HEXDIGLC").
int LowerHexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Reads 2 * out.size() lower-case hex digits from `hex` into `out`. False on a bad digit.
template <size_t N>
bool ParseHex(std::string_view hex, std::array<uint8_t, N>* out) {
  for (size_t i = 0; i < N; ++i) {
    const int hi = LowerHexValue(hex[2 * i]);
    const int lo = LowerHexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

bool ParseHexByte(std::string_view hex, uint8_t* out) {
  std::array<uint8_t, 1> b;
  if (!ParseHex(hex, &b)) return false;
  *out = b[0];
  return true;
}

template <size_t N>
bool AllZero(const std::array<uint8_t, N>& a) {
  for (uint8_t b : a)
    if (b != 0) return false;
  return true;
}

template <size_t N>
void AppendHex(std::string* out, const std::array<uint8_t, N>& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (uint8_t b : bytes) {
    out->push_back(kHex[b >> 4]);
    out->push_back(kHex[b & 0xF]);
  }
}

// "vv-" + 32 + "-" + 16 + "-" + 2.
constexpr size_t kTraceparentSize = 55;
constexpr size_t kTraceIdAt = 3;
constexpr size_t kSpanIdAt = 36;
constexpr size_t kFlagsAt = 53;
constexpr size_t kMaxTracestateBytes = 512;
constexpr size_t kMaxTracestateMembers = 32;

}  // namespace

bool SpanContext::valid() const {
  return !AllZero(trace_id) && !AllZero(span_id);
}

std::optional<SpanContext> ParseTraceparent(std::string_view value) {
  if (value.size() < kTraceparentSize) return std::nullopt;
  uint8_t version = 0;
  if (!ParseHexByte(value.substr(0, 2), &version) || version == 0xff) return std::nullopt;
  // Version 00 is exactly 55 characters. A later version may append fields: it is read by its
  // first four, which must be followed by the end or a '-'.
  if (version == 0 ? value.size() != kTraceparentSize
                   : value.size() > kTraceparentSize && value[kTraceparentSize] != '-') {
    return std::nullopt;
  }
  if (value[2] != '-' || value[kSpanIdAt - 1] != '-' || value[kFlagsAt - 1] != '-') {
    return std::nullopt;
  }
  SpanContext context;
  if (!ParseHex(value.substr(kTraceIdAt, 32), &context.trace_id) ||
      !ParseHex(value.substr(kSpanIdAt, 16), &context.span_id) ||
      !ParseHexByte(value.substr(kFlagsAt, 2), &context.flags) || !context.valid()) {
    return std::nullopt;
  }
  return context;
}

std::string FormatTraceparent(const SpanContext& context) {
  std::string out;
  out.reserve(kTraceparentSize);
  out.append("00-");
  AppendHex(&out, context.trace_id);
  out.push_back('-');
  AppendHex(&out, context.span_id);
  out.push_back('-');
  AppendHex(&out, std::array<uint8_t, 1>{context.flags});
  return out;
}

bool ValidTracestate(std::string_view value) {
  if (value.size() > kMaxTracestateBytes) return false;
  // Members are separated by ',' with optional spaces around; empty members are allowed by the
  // list syntax and do not count, but a value with none at all is no tracestate.
  size_t members = 0;
  bool in_member = false;
  for (char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c > 0x7e) return false;
    if (c == ',') {
      in_member = false;
    } else if (c != ' ' && !in_member) {
      in_member = true;
      if (++members > kMaxTracestateMembers) return false;
    }
  }
  return members > 0;
}

}  // namespace harrier
