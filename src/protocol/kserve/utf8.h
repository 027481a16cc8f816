// UTF-8 validation (simdjson's), for BYTES outputs and error messages written as JSON strings.
#pragma once

#include <string_view>

namespace harrier::kserve {

bool IsValidUtf8(std::string_view s);

}  // namespace harrier::kserve
