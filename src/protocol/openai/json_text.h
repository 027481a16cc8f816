// AppendJsonString for text that may not be valid UTF-8 (a model's output, a client's echo):
// core/json_writer.h trusts its caller, and one stray byte would make the whole body invalid
// JSON, so ill-formed bytes become U+FFFD first (core/utf8_holdback.h).
#pragma once

#include <string>
#include <string_view>

#include "core/json_writer.h"
#include "core/utf8.h"
#include "core/utf8_holdback.h"

namespace harrier::openai {

inline void AppendJsonText(std::string* out, std::string_view s) {
  if (IsValidUtf8(s)) {
    AppendJsonString(out, s);
  } else {
    AppendJsonString(out, ReplaceInvalidUtf8(s));
  }
}

}  // namespace harrier::openai
