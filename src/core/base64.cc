#include "core/base64.h"

#include <array>
#include <cstdint>

namespace harrier {

namespace {

constexpr int8_t kInvalid = -1;

constexpr std::array<int8_t, 256> DecodeTable() {
  std::array<int8_t, 256> table{};
  for (auto& v : table) v = kInvalid;
  constexpr std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < alphabet.size(); ++i)
    table[static_cast<unsigned char>(alphabet[i])] = static_cast<int8_t>(i);
  return table;
}

constexpr std::array<int8_t, 256> kDecode = DecodeTable();

}  // namespace

std::optional<std::string> DecodeBase64(std::string_view encoded) {
  if (encoded.size() % 4 != 0) return std::nullopt;
  size_t padding = 0;
  if (!encoded.empty() && encoded.back() == '=') {
    padding = encoded[encoded.size() - 2] == '=' ? 2 : 1;  // size >= 4 here
  }
  std::string out;
  out.reserve(encoded.size() / 4 * 3);
  const size_t body = encoded.size() - padding;
  uint32_t bits = 0;
  int bit_count = 0;
  for (size_t i = 0; i < body; ++i) {
    const int8_t v = kDecode[static_cast<unsigned char>(encoded[i])];
    if (v == kInvalid) return std::nullopt;  // '=' before the end lands here too
    bits = (bits << 6) | static_cast<uint32_t>(v);
    bit_count += 6;
    if (bit_count >= 8) {
      bit_count -= 8;
      out.push_back(static_cast<char>((bits >> bit_count) & 0xFF));
    }
  }
  // What is left are the padding's zero bits: 2 (one '=') or 4 (two); set ones mean the text
  // was not produced by an encoder.
  if (bit_count > 0 && (bits & ((1u << bit_count) - 1)) != 0) return std::nullopt;
  return out;
}

}  // namespace harrier
