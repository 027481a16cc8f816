// Tensor: a named, typed, shaped view over bytes, used for request inputs and response outputs.
//
// Memory layout: row-major, little-endian, densely packed. BOOL is one byte per element (0/1).
// BYTES tensors hold Triton's serialization: for each element a 4-byte little-endian length
// followed by that many bytes, elements back to back. The same layout is used on the wire
// (binary tensor extension), so a BYTES input travels from the socket to the backend unchanged.
//
// Ownership: `data` stays valid while `owner` is alive. A null `owner` means the bytes borrow
// from something else that outlives the tensor (for request inputs, the request's body; see
// InferenceRequest).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "harrier/data_type.h"
#include "harrier/status.h"

namespace harrier {

using Shape = std::vector<int64_t>;

struct Tensor {
  std::string name;
  DataType dtype = DataType::kInvalid;
  Shape shape;
  const std::byte* data = nullptr;
  size_t size_bytes = 0;
  std::shared_ptr<const void> owner;

  std::span<const std::byte> bytes() const { return {data, size_bytes}; }
};

// Product of the dims; nullopt when a dim is negative or the product overflows int64.
std::optional<int64_t> ElementCount(std::span<const int64_t> shape);

// "[1,3,224,224]".
std::string ShapeToString(std::span<const int64_t> shape);

// Checks that `bytes` is a well-formed BYTES serialization of exactly `element_count` elements
// (no truncated length prefix or element, no trailing bytes).
Status ValidateBytesTensor(std::span<const std::byte> bytes, int64_t element_count);

// Appends one BYTES element to `out`: its 4-byte little-endian length, then its bytes.
void AppendBytesElement(std::string* out, std::string_view element);

// Allocates `size` bytes, uninitialised, owned by the returned shared_ptr; 64-byte aligned.
std::shared_ptr<std::byte[]> AllocateTensorBuffer(size_t size);

}  // namespace harrier
