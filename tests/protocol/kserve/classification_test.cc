#include "protocol/kserve/classification.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "util/bytes_tensor.h"

namespace harrier::kserve {
namespace {

using ::harrier::testing::Strings;

template <typename T>
Tensor MakeTensor(DataType dtype, Shape shape, std::vector<T> values) {
  auto buf = std::make_shared<std::vector<T>>(std::move(values));
  Tensor t;
  t.name = "scores";
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = reinterpret_cast<const std::byte*>(buf->data());
  t.size_bytes = buf->size() * sizeof(T);
  t.owner = buf;
  return t;
}

TEST(ClassifyOutputTest, TopNPerBatchRow) {
  auto t = MakeTensor<float>(DataType::kFp32, {2, 4},
                             {0.1f, 0.7f, 0.2f, 0.0f,  //
                              0.5f, 0.1f, 0.3f, 0.9f});
  auto r = ClassifyOutput(t, 2, /*max_batch_size=*/8);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->name, "scores");
  EXPECT_EQ(r->dtype, DataType::kBytes);
  EXPECT_EQ(r->shape, (Shape{2, 2}));
  EXPECT_EQ(Strings(*r),
            (std::vector<std::string>{"0.700000:1", "0.200000:2", "0.900000:3", "0.500000:0"}));
  EXPECT_TRUE(ValidateBytesTensor(r->bytes(), 4).ok());
}

TEST(ClassifyOutputTest, WithoutBatchingTheWholeTensorIsOneRow) {
  auto t = MakeTensor<float>(DataType::kFp32, {1, 3}, {1, 3, 2});
  auto r = ClassifyOutput(t, 5, /*max_batch_size=*/0);  // clamped to 3 classes
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape, (Shape{3}));
  EXPECT_EQ(Strings(*r), (std::vector<std::string>{"3.000000:1", "2.000000:2", "1.000000:0"}));
}

// Labels (the config's label_filename): "value:index:label" where line `index` names the
// class; an index past the file, or an empty line, keeps "value:index" (as Triton).
TEST(ClassifyOutputTest, LabelsNameTheClassesTheyHave) {
  auto t = MakeTensor<float>(DataType::kFp32, {2, 3}, {1, 3, 2, 9, 8, 7});
  const std::vector<std::string> labels = {"cat", ""};
  auto r = ClassifyOutput(t, 3, /*max_batch_size=*/4, &labels);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Strings(*r), (std::vector<std::string>{"3.000000:1", "2.000000:2", "1.000000:0:cat",
                                                   "9.000000:0:cat", "8.000000:1", "7.000000:2"}));
}

TEST(ClassifyOutputTest, TiesByIndexAndNanLast) {
  auto t = MakeTensor<float>(DataType::kFp32, {4}, {std::nanf(""), 1, 2, 2});
  auto r = ClassifyOutput(t, 4, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Strings(*r),
            (std::vector<std::string>{"2.000000:2", "2.000000:3", "1.000000:1", "nan:0"}));
}

TEST(ClassifyOutputTest, IntegerAndHalfOutputs) {
  auto ints = ClassifyOutput(MakeTensor<int64_t>(DataType::kInt64, {3}, {5, -7, 9}), 2, 0);
  ASSERT_TRUE(ints.ok());
  EXPECT_EQ(Strings(*ints), (std::vector<std::string>{"9:2", "5:0"}));
  auto half = ClassifyOutput(MakeTensor<uint16_t>(DataType::kFp16, {2}, {0x3C00, 0x3800}), 1, 0);
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(Strings(*half), (std::vector<std::string>{"1.000000:0"}));
}

// 64-bit integers rank in their own precision: values from 2^53 up that differ by less than a
// double's spacing once tied, and the lower index won (probe 27).
TEST(ClassifyOutputTest, SixtyFourBitIntegersRankExactly) {
  auto big = ClassifyOutput(
      MakeTensor<int64_t>(DataType::kInt64, {3}, {9007199254740992, 9007199254740993, 5}), 1, 0);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(Strings(*big), (std::vector<std::string>{"9007199254740993:1"}));
  auto top =
      ClassifyOutput(MakeTensor<int64_t>(DataType::kInt64, {2}, {INT64_MAX - 1, INT64_MAX}), 2, 0);
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(Strings(*top),
            (std::vector<std::string>{"9223372036854775807:1", "9223372036854775806:0"}));
  auto low =
      ClassifyOutput(MakeTensor<int64_t>(DataType::kInt64, {2}, {INT64_MIN, INT64_MIN + 1}), 1, 0);
  ASSERT_TRUE(low.ok());
  EXPECT_EQ(Strings(*low), (std::vector<std::string>{"-9223372036854775807:1"}));
  auto unsigned_top = ClassifyOutput(
      MakeTensor<uint64_t>(DataType::kUint64, {2}, {UINT64_MAX - 1, UINT64_MAX}), 1, 0);
  ASSERT_TRUE(unsigned_top.ok());
  EXPECT_EQ(Strings(*unsigned_top), (std::vector<std::string>{"18446744073709551615:1"}));
}

TEST(ClassifyOutputTest, RejectsNonNumericOutputs) {
  auto r = ClassifyOutput(MakeTensor<uint8_t>(DataType::kBool, {2}, {0, 1}), 1, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  Tensor bytes = MakeTensor<uint8_t>(DataType::kBytes, {1}, {0, 0, 0, 0});
  EXPECT_EQ(ClassifyOutput(bytes, 1, 0).status().code(), StatusCode::kInvalidArgument);
  Tensor short_data = MakeTensor<float>(DataType::kFp32, {3}, {1});
  EXPECT_EQ(ClassifyOutput(short_data, 1, 0).status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace harrier::kserve
