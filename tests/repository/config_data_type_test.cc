#include "repository/config_data_type.h"

#include <gtest/gtest.h>

namespace harrier {
namespace {

TEST(ConfigDataTypeTest, EveryConfigTypeRoundTrips) {
  const struct {
    inference::DataType config;
    DataType type;
  } cases[] = {
      {inference::TYPE_BOOL, DataType::kBool},       {inference::TYPE_UINT8, DataType::kUint8},
      {inference::TYPE_UINT16, DataType::kUint16},   {inference::TYPE_UINT32, DataType::kUint32},
      {inference::TYPE_UINT64, DataType::kUint64},   {inference::TYPE_INT8, DataType::kInt8},
      {inference::TYPE_INT16, DataType::kInt16},     {inference::TYPE_INT32, DataType::kInt32},
      {inference::TYPE_INT64, DataType::kInt64},     {inference::TYPE_FP16, DataType::kFp16},
      {inference::TYPE_FP32, DataType::kFp32},       {inference::TYPE_FP64, DataType::kFp64},
      {inference::TYPE_STRING, DataType::kBytes},    {inference::TYPE_BF16, DataType::kBf16},
      {inference::TYPE_INVALID, DataType::kInvalid},
  };
  static_assert(inference::DataType_ARRAYSIZE == 15, "a config type was added: extend the table");
  for (const auto& c : cases) {
    EXPECT_EQ(FromConfigType(c.config), c.type) << inference::DataType_Name(c.config);
    EXPECT_EQ(ToConfigType(c.type), c.config) << inference::DataType_Name(c.config);
  }
  EXPECT_EQ(FromConfigType(static_cast<inference::DataType>(99)), DataType::kInvalid);
}

}  // namespace
}  // namespace harrier
