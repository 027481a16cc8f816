// UTF-8 validation (simdjson's: RFC 3629, no overlong forms, surrogates or code points past
// U+10FFFF), for anything written as a JSON string: BYTES outputs, error messages, access-log
// fields, span attributes.
#pragma once

#include <string_view>

namespace harrier {

bool IsValidUtf8(std::string_view s);

}  // namespace harrier
