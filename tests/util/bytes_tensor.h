// Reads a BYTES tensor (Triton's length-prefixed layout, see harrier/tensor.h) back into
// strings, for assertions. Stops at a truncated prefix rather than reading past the data.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "harrier/tensor.h"

namespace harrier::testing {

inline std::vector<std::string> Strings(const Tensor& t) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos + 4 <= t.size_bytes) {
    uint32_t len;
    std::memcpy(&len, t.data + pos, 4);
    out.emplace_back(reinterpret_cast<const char*>(t.data + pos + 4), len);
    pos += 4 + len;
  }
  return out;
}

}  // namespace harrier::testing
