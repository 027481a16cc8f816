#include "harrier/data_type.h"

#include <array>

namespace harrier {
namespace {

struct TypeInfo {
  DataType type;
  std::string_view name;
  std::string_view config_name;
  size_t byte_size;
};

constexpr std::array<TypeInfo, 14> kTypes{{
    {DataType::kBool, "BOOL", "TYPE_BOOL", 1},
    {DataType::kUint8, "UINT8", "TYPE_UINT8", 1},
    {DataType::kUint16, "UINT16", "TYPE_UINT16", 2},
    {DataType::kUint32, "UINT32", "TYPE_UINT32", 4},
    {DataType::kUint64, "UINT64", "TYPE_UINT64", 8},
    {DataType::kInt8, "INT8", "TYPE_INT8", 1},
    {DataType::kInt16, "INT16", "TYPE_INT16", 2},
    {DataType::kInt32, "INT32", "TYPE_INT32", 4},
    {DataType::kInt64, "INT64", "TYPE_INT64", 8},
    {DataType::kFp16, "FP16", "TYPE_FP16", 2},
    {DataType::kBf16, "BF16", "TYPE_BF16", 2},
    {DataType::kFp32, "FP32", "TYPE_FP32", 4},
    {DataType::kFp64, "FP64", "TYPE_FP64", 8},
    {DataType::kBytes, "BYTES", "TYPE_STRING", 0},
}};

// kTypes[i] describes DataType(i + 1), so that a lookup (several per request) is an index.
constexpr bool InEnumOrder() {
  for (size_t i = 0; i < kTypes.size(); ++i)
    if (static_cast<size_t>(kTypes[i].type) != i + 1) return false;
  return true;
}
static_assert(InEnumOrder(), "kTypes must list the data types in the enum's order");

const TypeInfo* Find(DataType type) {
  const auto i = static_cast<size_t>(type);
  return i >= 1 && i <= kTypes.size() ? &kTypes[i - 1] : nullptr;
}

}  // namespace

std::string_view DataTypeName(DataType type) {
  const TypeInfo* t = Find(type);
  return t ? t->name : "INVALID";
}

std::optional<DataType> DataTypeFromName(std::string_view name) {
  for (const auto& t : kTypes)
    if (t.name == name) return t.type;
  return std::nullopt;
}

std::string_view DataTypeConfigName(DataType type) {
  const TypeInfo* t = Find(type);
  return t ? t->config_name : "TYPE_INVALID";
}

std::optional<DataType> DataTypeFromConfigName(std::string_view name) {
  for (const auto& t : kTypes)
    if (t.config_name == name) return t.type;
  return std::nullopt;
}

size_t DataTypeByteSize(DataType type) {
  const TypeInfo* t = Find(type);
  return t ? t->byte_size : 0;
}

}  // namespace harrier
