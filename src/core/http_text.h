// Text of HTTP header fields, for every layer that reads them (the transport, the protocols):
// optional whitespace around a value or list element (RFC 9110 §5.6.3), and the ASCII
// case-insensitive comparison that names, tokens and codings use.
#pragma once

#include <string_view>

namespace harrier {

// Optional whitespace: a space or a tab.
inline bool IsOws(char c) {
  return c == ' ' || c == '\t';
}

// `s` without leading and trailing spaces and tabs.
std::string_view TrimOws(std::string_view s);

// ASCII case-insensitive equality, for header names and tokens.
bool IEquals(std::string_view a, std::string_view b);

}  // namespace harrier
