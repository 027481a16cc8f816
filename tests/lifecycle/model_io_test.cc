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
       }, "input 'a' already exists in request"},
      {"missing input", [&](Owned& o, InferenceRequest& r) { r.inputs = {good_a(o)}; },
       "missing input 'b'"},  // Batched() has an optional input: no count in Triton's words
      {"wrong dtype", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {o.Make("a", DataType::kFp64, {2, 4}, 64), good_b(o)};
       }, "inference input data-type is 'FP64', model expects 'FP32' for 'm' (input 'a')"},
      {"wrong dims", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {o.Make("a", DataType::kFp32, {2, 5}, 40), good_b(o)};
       }, "unexpected shape for input 'a' for model 'm'. Expected [-1,4], got [2,5]"},
      {"wrong rank", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {o.Make("a", DataType::kFp32, {8}, 32), good_b(o)};
       }, "unexpected shape for input 'a' for model 'm'. Expected [-1,4], got [8]"},
      {"batch too large", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {o.Make("a", DataType::kFp32, {9, 4}, 144), o.Make("b", DataType::kInt64, {9, 1}, 72)};
       }, "inference request batch-size must be <= 8 for 'm'; input 'a' has batch size 9"},
      {"batch zero", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {o.Make("a", DataType::kFp32, {0, 4}, 0), good_b(o)};
       }, "batch size 0"},
      {"batch mismatch", [&](Owned& o, InferenceRequest& r) {
         r.inputs = {good_a(o), o.Make("b", DataType::kInt64, {3, 3}, 72)};
       }, "input 'b' batch size does not match other inputs for 'm' (3 against 2)"},
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

TEST(ModelIoTest, AMissingInputOfAModelWithoutOptionalOnesIsCountedInTritonsWords) {
  ModelIO io;
  io.inputs = {{"a", DataType::kFp32, {4}, std::nullopt, false},
               {"b", DataType::kFp32, {4}, std::nullopt, false}};
  io.outputs = {{"y", DataType::kFp32, {4}, std::nullopt, false}};
  Owned o;
  InferenceRequest r;
  r.inputs = {o.Make("a", DataType::kFp32, {4}, 16)};
  std::vector<std::string> outs;
  const Status s = ValidateAndPrepare(io, "m", &r, &outs);
  EXPECT_EQ(s.message().rfind("expected 2 inputs but got 1 inputs for model 'm': missing input 'b'",
                              0),
            0u)
      << s.message();
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

// A scalar (Triton's dims [1], reshape []) takes the convention's shape and the rank-0 one.
TEST(ModelIoTest, ScalarInputTakesRankZeroAndTheConventionsShape) {
  ModelIO io;
  io.inputs = {{"s", DataType::kFp32, {1}, std::vector<int64_t>{}, false}};
  io.outputs = {{"y", DataType::kFp32, {1}, std::vector<int64_t>{}, false}};
  for (const Shape& shape : {Shape{}, Shape{1}}) {
    Owned o;
    InferenceRequest r;
    r.inputs = {o.Make("s", DataType::kFp32, shape, 4)};
    std::vector<std::string> outs;
    ASSERT_TRUE(ValidateAndPrepare(io, "m", &r, &outs).ok()) << ShapeToString(shape);
    EXPECT_EQ(r.inputs[0].shape, Shape{});  // what the model is given
  }
  Owned o;
  InferenceRequest r;
  r.inputs = {o.Make("s", DataType::kFp32, {2}, 8)};
  std::vector<std::string> outs;
  EXPECT_EQ(ValidateAndPrepare(io, "m", &r, &outs).code(), StatusCode::kInvalidArgument);
}

TEST(ModelIoTest, EmptyTensorsAreValid) {
  ModelIO io;
  io.inputs = {{"e", DataType::kFp32, {2, 0}, std::nullopt, false},
               {"f", DataType::kInt32, {-1, 3}, std::nullopt, false}};
  Owned o;
  InferenceRequest r;
  r.inputs = {o.Make("e", DataType::kFp32, {2, 0}, 0), o.Make("f", DataType::kInt32, {0, 3}, 0)};
  std::vector<std::string> outs;
  EXPECT_TRUE(ValidateAndPrepare(io, "m", &r, &outs).ok());
  r.inputs[1].shape = {1, 3};  // 12 bytes claimed, none carried
  EXPECT_EQ(ValidateAndPrepare(io, "m", &r, &outs).code(), StatusCode::kInvalidArgument);
}

Tensor OutputOfShape(std::string name, Shape shape) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = DataType::kFp32;
  t.shape = std::move(shape);
  return t;
}

// Outputs are answered in their config dims, as Triton presents them.
TEST(ModelIoTest, PresentOutputsAppliesTheConfigDims) {
  ModelIO io;
  io.max_batch_size = 4;
  io.outputs = {{"scalar", DataType::kFp32, {1}, std::vector<int64_t>{}, false},
                {"grid", DataType::kFp32, {2, 2}, std::vector<int64_t>{4}, false},
                {"rows", DataType::kFp32, {-1, 2}, std::vector<int64_t>{-1}, false},
                {"plain", DataType::kFp32, {3}, std::nullopt, false}};
  std::vector<Tensor> outputs = {OutputOfShape("scalar", {3}), OutputOfShape("grid", {3, 4}),
                                 OutputOfShape("rows", {3, 6}), OutputOfShape("plain", {3, 3})};
  ASSERT_TRUE(PresentOutputs(io, "m", &outputs).ok());
  EXPECT_EQ(outputs[0].shape, (Shape{3, 1}));
  EXPECT_EQ(outputs[1].shape, (Shape{3, 2, 2}));
  EXPECT_EQ(outputs[2].shape, (Shape{3, 3, 2}));  // the variable dim inferred from the count
  EXPECT_EQ(outputs[3].shape, (Shape{3, 3}));     // no reshape: the model's shape

  io.max_batch_size = 0;  // without a batch dim
  outputs = {OutputOfShape("scalar", {}), OutputOfShape("grid", {4})};
  ASSERT_TRUE(PresentOutputs(io, "m", &outputs).ok());
  EXPECT_EQ(outputs[0].shape, (Shape{1}));
  EXPECT_EQ(outputs[1].shape, (Shape{2, 2}));

  outputs = {OutputOfShape("grid", {5})};  // 5 elements are not a 2x2 grid
  Status s = PresentOutputs(io, "m", &outputs);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("output 'grid' of model 'm'"), std::string::npos) << s.ToString();
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
