#include "lifecycle/model_io.h"

#include <gtest/gtest.h>

#include <cstring>

namespace harrier {
namespace {

// Input tensors whose data is owned by the test.
struct Owned {
  std::vector<std::vector<std::byte>> buffers;
  Tensor Make(std::string name, DataType dtype, Shape shape, size_t bytes) {
    buffers.emplace_back(bytes);
    Tensor t;
    t.name = std::move(name);
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.data = buffers.back().data();
    t.size_bytes = bytes;
    return t;
  }
};

RequestedOutput Out(std::string name) {
  RequestedOutput o;
  o.name = std::move(name);
  return o;
}

ModelIO Batched() {
  ModelIO io;
  io.max_batch_size = 8;
  io.inputs = {{"a", DataType::kFp32, {4}, std::nullopt, false},
               {"b", DataType::kInt64, {-1}, std::nullopt, false},
               {"opt", DataType::kFp32, {1}, std::nullopt, true}};
  io.outputs = {{"y", DataType::kFp32, {4}, std::nullopt, false},
                {"z", DataType::kFp32, {1}, std::nullopt, false}};
  return io;
}

TEST(ModelIoTest, ClientShapeAddsBatchDim) {
  ModelIO io = Batched();
  EXPECT_EQ(io.ClientShape(io.inputs[0]), (std::vector<int64_t>{-1, 4}));
  io.max_batch_size = 0;
  EXPECT_EQ(io.ClientShape(io.inputs[0]), (std::vector<int64_t>{4}));
}

TEST(ModelIoTest, AcceptsGoodRequestAndListsAllOutputs) {
  Owned o;
  InferenceRequest r;
  r.inputs.push_back(o.Make("a", DataType::kFp32, {2, 4}, 32));
  r.inputs.push_back(o.Make("b", DataType::kInt64, {2, 3}, 48));
  std::vector<std::string> outs;
  ASSERT_TRUE(ValidateAndPrepare(Batched(), "m", &r, &outs).ok());
  EXPECT_EQ(outs, (std::vector<std::string>{"y", "z"}));
}

TEST(ModelIoTest, RejectionTable) {
  struct Row {
    const char* what;
    std::function<void(Owned&, InferenceRequest&)> build;
    const char* message_part;
  };
  auto good_a = [](Owned& o) { return o.Make("a", DataType::kFp32, {2, 4}, 32); };
  auto good_b = [](Owned& o) { return o.Make("b", DataType::kInt64, {2, 3}, 48); };
  const Row rows[] = {
      {"unknown input", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {good_a(o), good_b(o), o.Make("c", DataType::kFp32, {2, 1}, 8)};
       }, "unexpected input 'c'"},
      {"duplicate input", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {good_a(o), good_b(o), good_a(o)};
       }, "more than once"},
      {"missing input", [&](Owned& o, InferenceRequest& r) { r.inputs = {good_a(o)}; },
       "missing input 'b'"},
      {"wrong dtype", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {o.Make("a", DataType::kFp64, {2, 4}, 64), good_b(o)};
       }, "datatype FP64, the model expects FP32"},
      {"wrong dims", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {o.Make("a", DataType::kFp32, {2, 5}, 40), good_b(o)};
       }, "shape [2,5], the model expects [-1,4]"},
      {"wrong rank", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {o.Make("a", DataType::kFp32, {8}, 32), good_b(o)};
       }, "the model expects [-1,4]"},
      {"batch too large", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {o.Make("a", DataType::kFp32, {9, 4}, 144), o.Make("b", DataType::kInt64, {9, 1}, 72)};
       }, "batch size 9"},
      {"batch zero", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {o.Make("a", DataType::kFp32, {0, 4}, 0), good_b(o)};
       }, "batch size 0"},
      {"batch mismatch", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {good_a(o), o.Make("b", DataType::kInt64, {3, 3}, 72)};
       }, "another input has"},
      {"size mismatch", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {o.Make("a", DataType::kFp32, {2, 4}, 31), good_b(o)};
       }, "carries 31 bytes"},
      {"unknown output", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {good_a(o), good_b(o)};
         r.outputs = {Out("nope")};
       }, "unknown output 'nope'"},
      {"repeated output", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {good_a(o), good_b(o)};
         r.outputs = {Out("y"), Out("y")};
       }, "more than once"},
  };
  for (const Row& row : rows) {
    Owned o;
    InferenceRequest r;
    row.build(o, r);
    std::vector<std::string> outs;
    Status s = ValidateAndPrepare(Batched(), "m", &r, &outs);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << row.what;
    EXPECT_NE(s.message().find(row.message_part), std::string::npos)
        << row.what << ": " << s.message();
  }
}

TEST(ModelIoTest, BytesInputsAreChecked) {
  ModelIO io;
  io.inputs = {{"s", DataType::kBytes, {-1}, std::nullopt, false}};
  io.outputs = {{"o", DataType::kBytes, {-1}, std::nullopt, false}};
  Owned o;
  InferenceRequest r;
  Tensor t = o.Make("s", DataType::kBytes, {1}, 6);
  uint32_t len = 2;
  std::memcpy(o.buffers.back().data(), &len, 4);
  r.inputs = {t};
  std::vector<std::string> outs;
  EXPECT_TRUE(ValidateAndPrepare(io, "m", &r, &outs).ok());
  r.inputs[0].shape = {2};  // claims a second element that is not there
  EXPECT_EQ(ValidateAndPrepare(io, "m", &r, &outs).code(), StatusCode::kInvalidArgument);
}

TEST(ModelIoTest, ReshapeAppliesToModelShape) {
  ModelIO io;
  io.max_batch_size = 4;
  io.inputs = {{"x", DataType::kFp32, {6}, std::vector<int64_t>{2, -1}, false}};
  io.outputs = {{"y", DataType::kFp32, {6}, std::nullopt, false}};
  Owned o;
  InferenceRequest r;
  r.inputs = {o.Make("x", DataType::kFp32, {3, 6}, 72)};
  std::vector<std::string> outs;
  ASSERT_TRUE(ValidateAndPrepare(io, "m", &r, &outs).ok());
  EXPECT_EQ(r.inputs[0].shape, (Shape{3, 2, 3}));
}

TEST(ModelIoTest, OptionalInputMayBeAbsent) {
  ModelIO io = Batched();
  Owned o;
  InferenceRequest r;
  r.inputs = {o.Make("a", DataType::kFp32, {1, 4}, 16), o.Make("b", DataType::kInt64, {1, 2}, 16)};
  std::vector<std::string> outs;
  EXPECT_TRUE(ValidateAndPrepare(io, "m", &r, &outs).ok());
}

}  // namespace
}  // namespace harrier
