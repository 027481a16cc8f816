#include "harrier/data_type.h"

#include <gtest/gtest.h>

#include "harrier/tensor.h"

namespace harrier {
namespace {

TEST(DataTypeTest, NamesRoundTripForEveryType) {
  const DataType all[] = {DataType::kBool,  DataType::kUint8, DataType::kUint16, DataType::kUint32,
                          DataType::kUint64, DataType::kInt8, DataType::kInt16,  DataType::kInt32,
                          DataType::kInt64, DataType::kFp16,  DataType::kBf16,   DataType::kFp32,
                          DataType::kFp64,  DataType::kBytes};
  for (DataType t : all) {
    EXPECT_EQ(DataTypeFromName(DataTypeName(t)), t);
    EXPECT_EQ(DataTypeFromConfigName(DataTypeConfigName(t)), t);
  }
  EXPECT_EQ(DataTypeConfigName(DataType::kBytes), "TYPE_STRING");
  EXPECT_FALSE(DataTypeFromName("fp32").has_value());
  EXPECT_FALSE(DataTypeFromName("FLOAT").has_value());
  EXPECT_FALSE(DataTypeFromConfigName("FP32").has_value());
}

TEST(DataTypeTest, ByteSizes) {
  EXPECT_EQ(DataTypeByteSize(DataType::kBool), 1u);
  EXPECT_EQ(DataTypeByteSize(DataType::kFp16), 2u);
  EXPECT_EQ(DataTypeByteSize(DataType::kBf16), 2u);
  EXPECT_EQ(DataTypeByteSize(DataType::kUint32), 4u);
  EXPECT_EQ(DataTypeByteSize(DataType::kFp64), 8u);
  EXPECT_EQ(DataTypeByteSize(DataType::kBytes), 0u);
  EXPECT_EQ(DataTypeByteSize(DataType::kInvalid), 0u);
  // A value past the enum (a cast from the wire gone wrong) describes nothing.
  EXPECT_EQ(DataTypeByteSize(static_cast<DataType>(15)), 0u);
  EXPECT_EQ(DataTypeName(static_cast<DataType>(255)), "INVALID");
  EXPECT_EQ(DataTypeName(DataType::kInvalid), "INVALID");
}

TEST(TensorTest, ElementCountRejectsNegativeAndOverflow) {
  EXPECT_EQ(ElementCount(std::vector<int64_t>{1, 3, 224, 224}), 150528);
  EXPECT_EQ(ElementCount(std::vector<int64_t>{}), 1);
  EXPECT_EQ(ElementCount(std::vector<int64_t>{0, 5}), 0);
  EXPECT_FALSE(ElementCount(std::vector<int64_t>{-1, 5}).has_value());
  EXPECT_FALSE(ElementCount(std::vector<int64_t>{1LL << 40, 1LL << 40}).has_value());
  EXPECT_EQ(ShapeToString(std::vector<int64_t>{1, -1}), "[1,-1]");
}

std::vector<std::byte> Serialize(std::initializer_list<std::string_view> items) {
  std::vector<std::byte> out;
  for (auto s : items) {
    uint32_t n = s.size();
    auto* p = reinterpret_cast<const std::byte*>(&n);
    out.insert(out.end(), p, p + 4);
    for (char c : s) out.push_back(std::byte(c));
  }
  return out;
}

TEST(TensorTest, BytesValidation) {
  auto ok = Serialize({"ab", "", "xyz"});
  EXPECT_TRUE(ValidateBytesTensor(ok, 3).ok());
  EXPECT_FALSE(ValidateBytesTensor(ok, 2).ok());  // trailing bytes
  EXPECT_FALSE(ValidateBytesTensor(ok, 4).ok());  // missing element
  auto truncated = ok;
  truncated.pop_back();
  EXPECT_FALSE(ValidateBytesTensor(truncated, 3).ok());
  std::vector<std::byte> short_prefix(3);
  EXPECT_FALSE(ValidateBytesTensor(short_prefix, 1).ok());
  auto lying = Serialize({"a"});
  lying[0] = std::byte{0xff};
  lying[3] = std::byte{0xff};
  EXPECT_FALSE(ValidateBytesTensor(lying, 1).ok());
}

TEST(TensorTest, BufferIsAligned) {
  auto b = AllocateTensorBuffer(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.get()) % 64, 0u);
}

}  // namespace
}  // namespace harrier
