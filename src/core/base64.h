// Base64 (RFC 4648 §4, the standard alphabet with '=' padding), as Triton's JSON bodies carry
// binary parameters (a load request's file overrides).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace harrier {

// The bytes `encoded` stands for; nullopt when it is not base64: a character outside the
// alphabet, a length that is not a multiple of 4, padding anywhere but in the last two places,
// or non-zero bits left over before the padding (a non-canonical encoding). No whitespace is
// accepted. Thread-safe (pure).
std::optional<std::string> DecodeBase64(std::string_view encoded);

}  // namespace harrier
