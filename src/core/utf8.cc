#include "core/utf8.h"

#include <simdjson.h>

namespace harrier {

bool IsValidUtf8(std::string_view s) {
  return simdjson::validate_utf8(s.data(), s.size());
}

std::string_view Utf8Prefix(std::string_view s, std::size_t max) {
  if (s.size() <= max) return s;
  // The character that byte `max` belongs to starts at most three bytes before it; it is cut
  // off whole when it straddles `max`. Bytes that belong to no character (a run of more than
  // three continuation bytes, or ones after a character that has ended) are not UTF-8: the cut
  // is then at `max` (probe 79: stepping back over all of them cut 5,000 to nothing).
  auto continuation = [&](std::size_t i) {
    return (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80;
  };
  std::size_t start = max;
  for (int back = 0; back < 3 && start > 0 && continuation(start); ++back) --start;
  if (continuation(start)) return s.substr(0, max);
  const auto lead = static_cast<unsigned char>(s[start]);
  const std::size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return s.substr(0, start < max && start + length > max ? start : max);
}

}  // namespace harrier
