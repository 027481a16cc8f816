#include "core/utf8.h"

#include <simdjson.h>

namespace harrier {

bool IsValidUtf8(std::string_view s) {
  return simdjson::validate_utf8(s.data(), s.size());
}

std::string_view Utf8Prefix(std::string_view s, std::size_t max) {
  if (s.size() <= max) return s;
  // Back over at most three continuation bytes, the most a character has: a run of more is not
  // UTF-8, and stepping over all of it cut 5,000 such bytes to nothing (probe 79).
  std::size_t end = max;
  for (int back = 0; back < 3 && end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80;
       ++back)
    --end;
  if ((static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) end = max;
  return s.substr(0, end);
}

}  // namespace harrier
