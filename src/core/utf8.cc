#include "core/utf8.h"

#include <simdjson.h>

namespace harrier {

bool IsValidUtf8(std::string_view s) {
  return simdjson::validate_utf8(s.data(), s.size());
}

}  // namespace harrier
