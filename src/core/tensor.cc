#include "harrier/tensor.h"

#include <cstring>
#include <new>

namespace harrier {

std::optional<int64_t> ElementCount(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

std::string ShapeToString(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  s += ']';
  return s;
}

Status ValidateBytesTensor(std::span<const std::byte> bytes, int64_t element_count) {
  size_t pos = 0;
  for (int64_t i = 0; i < element_count; ++i) {
    if (bytes.size() - pos < 4) {
      return InvalidArgument("BYTES element " + std::to_string(i) + " of " +
                             std::to_string(element_count) + ": truncated 4-byte length prefix");
    }
    uint32_t len;
    std::memcpy(&len, bytes.data() + pos, 4);  // little-endian hosts only (x86-64, aarch64)
    pos += 4;
    if (bytes.size() - pos < len) {
      return InvalidArgument("BYTES element " + std::to_string(i) + " claims " +
                             std::to_string(len) + " bytes but only " +
                             std::to_string(bytes.size() - pos) + " remain");
    }
    pos += len;
  }
  if (pos != bytes.size()) {
    return InvalidArgument("BYTES data has " + std::to_string(bytes.size() - pos) +
                           " bytes after its " + std::to_string(element_count) + " elements");
  }
  return Status::Ok();
}

void AppendBytesElement(std::string* out, std::string_view element) {
  const uint32_t len = static_cast<uint32_t>(element.size());
  char prefix[4];
  std::memcpy(prefix, &len, 4);  // little-endian hosts only, as for ValidateBytesTensor
  out->append(prefix, 4);
  out->append(element);
}

std::shared_ptr<std::byte[]> AllocateTensorBuffer(size_t size) {
  constexpr std::align_val_t kAlign{64};
  auto* p = static_cast<std::byte*>(::operator new[](size == 0 ? 1 : size, kAlign));
  return std::shared_ptr<std::byte[]>(p, [](std::byte* q) { ::operator delete[](q, kAlign); });
}

}  // namespace harrier
