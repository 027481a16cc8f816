#include "core/utf8.h"

#include <simdjson.h>

namespace harrier {

bool IsValidUtf8(std::string_view s) {
  return simdjson::validate_utf8(s.data(), s.size());
}

std::string_view Utf8Prefix(std::string_view s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return s.substr(0, end);
}

}  // namespace harrier
