#include "repository/config_data_type.h"

#include <string>

namespace harrier {

// Both enums are keyed by the same names ("TYPE_FP32"); going through the name keeps the two
// tables from drifting apart.
DataType FromConfigType(inference::DataType type) {
  if (!inference::DataType_IsValid(type)) return DataType::kInvalid;
  return DataTypeFromConfigName(inference::DataType_Name(type)).value_or(DataType::kInvalid);
}

inference::DataType ToConfigType(DataType type) {
  inference::DataType result = inference::TYPE_INVALID;
  if (!inference::DataType_Parse(std::string(DataTypeConfigName(type)), &result)) {
    return inference::TYPE_INVALID;
  }
  return result;
}

}  // namespace harrier
