// Tensor element types as the KServe v2 protocol names them, and conversions to the names used
// by Triton's model configuration ("TYPE_FP32").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace harrier {

enum class DataType : uint8_t {
  kInvalid = 0,
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kBf16,
  kFp32,
  kFp64,
  kBytes,  // variable-length strings; see tensor.h for the in-memory layout
};

// "FP32", "BYTES", ...; "INVALID" for kInvalid.
std::string_view DataTypeName(DataType type);
// Parses a KServe v2 name ("FP32"); nullopt for anything else (case-sensitive, as Triton).
std::optional<DataType> DataTypeFromName(std::string_view name);

// "TYPE_FP32", "TYPE_STRING" (Triton's config name for BYTES), ...
std::string_view DataTypeConfigName(DataType type);
// Parses Triton's config name; nullopt for unknown names.
std::optional<DataType> DataTypeFromConfigName(std::string_view name);

// Size in bytes of one element: 1 for BOOL, 2 for FP16/BF16, ...; 0 for BYTES and kInvalid.
size_t DataTypeByteSize(DataType type);

}  // namespace harrier
