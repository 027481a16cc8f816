#include "protocol/kserve/utf8.h"

#include <simdjson.h>

namespace harrier::kserve {

bool IsValidUtf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

}  // namespace harrier::kserve
