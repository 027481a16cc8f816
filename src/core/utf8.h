// UTF-8 validation (simdjson's: RFC 3629, no overlong forms, surrogates or code points past
// U+10FFFF), for anything written as a JSON string: BYTES outputs, error messages, access-log
// fields, span attributes; and cutting text to a length without splitting a character.
#pragma once

#include <cstddef>
#include <string_view>

namespace harrier {

bool IsValidUtf8(std::string_view s);

// The longest prefix of `s` of at most `max` bytes that does not split a UTF-8 sequence (in text
// that is not UTF-8 there, `max` bytes).
std::string_view Utf8Prefix(std::string_view s, std::size_t max);

}  // namespace harrier
