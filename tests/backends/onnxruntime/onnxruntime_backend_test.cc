#include "backends/onnxruntime/onnxruntime_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/onnxruntime/onnxruntime_instance.h"
#include "backends/onnxruntime/test_models.h"
#include "harrier/data_type.h"
#include "harrier/tensor.h"

namespace harrier {
namespace {

using ::harrier::testing::TestModelDir;
using ::harrier::testing::TestModelPath;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// One backend (one Ort::Env) for the whole test process, as in the server.
OnnxRuntimeBackend& TheBackend() {
  static OnnxRuntimeBackend* backend = [] {
    auto b = OnnxRuntimeBackend::Create({});
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? std::move(b).value().release() : nullptr;
  }();
  return *backend;
}

class OnnxRuntimeBackendTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(TestModelDir().empty()) << "test model generation failed"; }

  std::unique_ptr<ModelInstance> Load(const std::string& model, InstanceOptions options = {}) {
    auto instance = TheBackend().CreateInstance(TestModelPath(model), options);
    EXPECT_TRUE(instance.ok()) << instance.status().ToString();
    return instance.ok() ? std::move(instance).value() : nullptr;
  }

  // A scratch file path unique to this test.
  std::string TempFile(const std::string& name) {
    auto dir = std::filesystem::path(HARRIER_BINARY_DIR) / "test_tmp" /
               ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir);
    return (dir / name).string();
  }
};

Tensor View(std::string name, DataType dtype, Shape shape, const void* data, size_t size) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = static_cast<const std::byte*>(data);
  t.size_bytes = size;
  return t;
}

std::string SerializeBytes(const std::vector<std::string>& elements) {
  std::string out;
  for (const auto& e : elements) {
    uint32_t len = static_cast<uint32_t>(e.size());
    out.append(reinterpret_cast<const char*>(&len), 4);
    out += e;
  }
  return out;
}

std::string AsString(const Tensor& t) {
  return std::string(reinterpret_cast<const char*>(t.data), t.size_bytes);
}

ort::OnnxRuntimeInstance& AsOrt(ModelInstance& instance) {
  return dynamic_cast<ort::OnnxRuntimeInstance&>(instance);
}

TEST_F(OnnxRuntimeBackendTest, Names) {
  EXPECT_EQ(TheBackend().name(), "onnxruntime");
  EXPECT_EQ(TheBackend().platform(), "onnxruntime_onnx");
  EXPECT_EQ(TheBackend().default_model_filename(), "model.onnx");
}

// Every Harrier data type, with the name make_test_models.py gives its identity model.
struct TypeCase {
  DataType dtype;
  const char* model;
};
const TypeCase kTypeCases[] = {
    {DataType::kBool, "identity_bool"},     {DataType::kUint8, "identity_uint8"},
    {DataType::kUint16, "identity_uint16"}, {DataType::kUint32, "identity_uint32"},
    {DataType::kUint64, "identity_uint64"}, {DataType::kInt8, "identity_int8"},
    {DataType::kInt16, "identity_int16"},   {DataType::kInt32, "identity_int32"},
    {DataType::kInt64, "identity_int64"},   {DataType::kFp16, "identity_fp16"},
    {DataType::kBf16, "identity_bf16"},     {DataType::kFp32, "identity_fp32"},
    {DataType::kFp64, "identity_fp64"},     {DataType::kBytes, "identity_bytes"},
};

TEST_F(OnnxRuntimeBackendTest, InspectMapsEveryDataTypeAndFreeDims) {
  for (const auto& c : kTypeCases) {
    SCOPED_TRACE(c.model);
    auto sig = TheBackend().Inspect(TestModelPath(c.model));
    ASSERT_TRUE(sig.ok()) << sig.status().ToString();
    ASSERT_EQ(sig->inputs.size(), 1u);
    ASSERT_EQ(sig->outputs.size(), 1u);
    EXPECT_EQ(sig->inputs[0].name, "INPUT0");
    EXPECT_EQ(sig->inputs[0].dtype, c.dtype);
    EXPECT_THAT(sig->inputs[0].dims, ElementsAre(-1, -1));  // symbolic "N" and an unset dim
    EXPECT_EQ(sig->outputs[0].name, "OUTPUT0");
    EXPECT_EQ(sig->outputs[0].dtype, c.dtype);
    EXPECT_THAT(sig->outputs[0].dims, ElementsAre(-1, -1));
  }
}

TEST_F(OnnxRuntimeBackendTest, InspectKeepsOrderAndStaticDims) {
  auto sig = TheBackend().Inspect(TestModelPath("simple"));
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  ASSERT_EQ(sig->inputs.size(), 2u);
  EXPECT_EQ(sig->inputs[0].name, "INPUT0");
  EXPECT_EQ(sig->inputs[1].name, "INPUT1");
  EXPECT_EQ(sig->inputs[1].dtype, DataType::kInt32);
  EXPECT_THAT(sig->inputs[1].dims, ElementsAre(-1, 16));
  ASSERT_EQ(sig->outputs.size(), 2u);
  EXPECT_EQ(sig->outputs[0].name, "OUTPUT0");
  EXPECT_EQ(sig->outputs[1].name, "OUTPUT1");

  auto fixed = TheBackend().Inspect(TestModelPath("add_sub_fp32"));
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  EXPECT_THAT(fixed->inputs[0].dims, ElementsAre(4));
  EXPECT_EQ(fixed->outputs[1].dtype, DataType::kFp32);
}

// A load reads the signature from its first instance (an optimized session) instead of
// Inspect's unoptimized one: the two must agree on every model.
TEST_F(OnnxRuntimeBackendTest, InstanceReportsTheSignatureInspectReads) {
  const auto describe = [](const std::vector<TensorSpec>& specs) {
    std::string out;
    for (const TensorSpec& t : specs) {
      out += t.name + ":" + std::string(DataTypeName(t.dtype)) + "[";
      for (int64_t d : t.dims) out += std::to_string(d) + ",";
      out += "] ";
    }
    return out;
  };
  int compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TestModelDir())) {
    const std::string model = entry.path().filename().string();
    if (!entry.is_directory() || model.starts_with("unsupported_")) continue;
    SCOPED_TRACE(model);
    auto inspected = TheBackend().Inspect(TestModelPath(model));
    ASSERT_TRUE(inspected.ok()) << inspected.status().ToString();
    for (int level : {-1, 0}) {
      InstanceOptions options;
      options.graph_optimization_level = level;
      auto instance = TheBackend().CreateInstance(TestModelPath(model), options);
      ASSERT_TRUE(instance.ok()) << instance.status().ToString();
      const ModelSignature* read = (*instance)->signature();
      ASSERT_NE(read, nullptr);
      EXPECT_EQ(describe(read->inputs), describe(inspected->inputs));
      EXPECT_EQ(describe(read->outputs), describe(inspected->outputs));
      ++compared;
    }
  }
  EXPECT_GE(compared, 2 * 18);
}

TEST_F(OnnxRuntimeBackendTest, UnsupportedElementTypeIsInvalidArgumentNamingTensorAndType) {
  const std::string path = TestModelPath("unsupported_float8");
  auto sig = TheBackend().Inspect(path);
  ASSERT_FALSE(sig.ok());
  EXPECT_EQ(sig.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(sig.status().message(), HasSubstr("INPUT_FP8"));
  EXPECT_THAT(sig.status().message(), HasSubstr("FLOAT8E4M3FN"));
  EXPECT_THAT(sig.status().message(), HasSubstr(path));

  auto instance = TheBackend().CreateInstance(path, {});
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(instance.status().message(), HasSubstr("INPUT_FP8"));
}

TEST_F(OnnxRuntimeBackendTest, NonTensorInputIsInvalidArgument) {
  auto sig = TheBackend().Inspect(TestModelPath("unsupported_sequence"));
  ASSERT_FALSE(sig.ok());
  EXPECT_EQ(sig.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(sig.status().message(), HasSubstr("INPUT_SEQ"));
  EXPECT_THAT(sig.status().message(), HasSubstr("sequence"));
}

TEST_F(OnnxRuntimeBackendTest, MissingFileIsNotFound) {
  const std::string path = TestModelDir() + "/no_such_model/1/model.onnx";
  auto sig = TheBackend().Inspect(path);
  ASSERT_FALSE(sig.ok());
  EXPECT_EQ(sig.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(sig.status().message(), HasSubstr(path));
  auto instance = TheBackend().CreateInstance(path, {});
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kNotFound);
}

TEST_F(OnnxRuntimeBackendTest, CorruptFileIsInvalidArgumentWithPathAndOrtMessage) {
  const std::string garbage = TempFile("garbage.onnx");
  std::ofstream(garbage) << "this is not an ONNX model \x01\x02\x03\xff";
  const std::string empty = TempFile("empty.onnx");
  std::ofstream{empty};
  for (const std::string& path : {garbage, empty}) {
    SCOPED_TRACE(path);
    auto sig = TheBackend().Inspect(path);
    ASSERT_FALSE(sig.ok());
    EXPECT_EQ(sig.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(sig.status().message(), HasSubstr(path));
    auto instance = TheBackend().CreateInstance(path, {});
    ASSERT_FALSE(instance.ok());
    EXPECT_EQ(instance.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(instance.status().message(), HasSubstr(path));
  }
  auto sig = TheBackend().Inspect(garbage);
  EXPECT_THAT(sig.status().message(), HasSubstr("Protobuf parsing failed"));  // ORT's words
}

TEST_F(OnnxRuntimeBackendTest, DirectoryIsInvalidArgument) {
  auto sig = TheBackend().Inspect(TestModelDir());
  ASSERT_FALSE(sig.ok());
  EXPECT_EQ(sig.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(OnnxRuntimeBackendTest, InvalidOptionsAreInvalidArgument) {
  InstanceOptions options;
  options.parameters["intra_op_thread_count"] = "two";
  auto instance = TheBackend().CreateInstance(TestModelPath("identity_fp32"), options);
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(instance.status().message(), HasSubstr("intra_op_thread_count"));

  InstanceOptions bad_level;
  bad_level.graph_optimization_level = 7;
  instance = TheBackend().CreateInstance(TestModelPath("identity_fp32"), bad_level);
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kInvalidArgument);

  InstanceOptions bad_ort_entry;  // ORT itself rejects the value
  bad_ort_entry.parameters["session.intra_op.allow_spinning"] = "maybe";
  instance = TheBackend().CreateInstance(TestModelPath("identity_fp32"), bad_ort_entry);
  EXPECT_FALSE(instance.ok());
}

// Bytes of a [2, 3] tensor of `dtype` with distinctive bit patterns; FP16/BF16 include
// infinities, a NaN with a payload, negative zero and a subnormal, which a conversion through
// float would change.
std::vector<uint8_t> Pattern(DataType dtype) {
  const size_t size = DataTypeByteSize(dtype);
  std::vector<uint8_t> bytes(6 * size);
  if (dtype == DataType::kBool) return {1, 0, 1, 1, 0, 0};
  if (dtype == DataType::kFp16) {
    const uint16_t v[6] = {0x3C00, 0x7C00, 0x7E15, 0x8000, 0x0001, 0xFBFF};
    std::memcpy(bytes.data(), v, sizeof(v));
    return bytes;
  }
  if (dtype == DataType::kBf16) {
    const uint16_t v[6] = {0x3F80, 0xFF80, 0x7FC5, 0x8000, 0x0001, 0x4049};
    std::memcpy(bytes.data(), v, sizeof(v));
    return bytes;
  }
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<uint8_t>(0x11 * (i + 1) + 0x80 * (i % 2));
  return bytes;
}

TEST_F(OnnxRuntimeBackendTest, RoundTripsEveryFixedSizeTypeBitExactly) {
  for (const auto& c : kTypeCases) {
    if (c.dtype == DataType::kBytes) continue;
    SCOPED_TRACE(c.model);
    auto instance = Load(c.model);
    ASSERT_NE(instance, nullptr);
    const std::vector<uint8_t> bytes = Pattern(c.dtype);
    auto buffer = AllocateTensorBuffer(bytes.size());
    std::memcpy(buffer.get(), bytes.data(), bytes.size());
    std::vector<Tensor> inputs{View("INPUT0", c.dtype, {2, 3}, buffer.get(), bytes.size())};
    std::vector<std::string> names{"OUTPUT0"};
    std::vector<Tensor> outputs;
    Status s = instance->Run(inputs, names, &outputs, {});
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(outputs.size(), 1u);
    EXPECT_EQ(outputs[0].name, "OUTPUT0");
    EXPECT_EQ(outputs[0].dtype, c.dtype);
    EXPECT_THAT(outputs[0].shape, ElementsAre(2, 3));
    EXPECT_NE(outputs[0].owner, nullptr);
    ASSERT_EQ(outputs[0].size_bytes, bytes.size());
    EXPECT_EQ(std::memcmp(outputs[0].data, bytes.data(), bytes.size()), 0);
  }
}

TEST_F(OnnxRuntimeBackendTest, RoundTripsBytesWithEmptyNonAsciiAndNulElements) {
  auto instance = Load("identity_bytes");
  ASSERT_NE(instance, nullptr);
  const std::vector<std::string> elements = {
      "",         "hello", "h\xC3\xA9llo w\xC3\xB6rld \xE2\x9C\x93", std::string("a\0b\0", 4),
      "\xFF\xFE", ""};
  const std::string body = SerializeBytes(elements);
  std::vector<Tensor> inputs{View("INPUT0", DataType::kBytes, {3, 2}, body.data(), body.size())};
  std::vector<std::string> names{"OUTPUT0"};
  std::vector<Tensor> outputs;
  Status s = instance->Run(inputs, names, &outputs, {});
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].dtype, DataType::kBytes);
  EXPECT_THAT(outputs[0].shape, ElementsAre(3, 2));
  EXPECT_EQ(AsString(outputs[0]), body);
  EXPECT_TRUE(ValidateBytesTensor(outputs[0].bytes(), 6).ok());
}

TEST_F(OnnxRuntimeBackendTest, MalformedBytesIsInvalidArgument) {
  auto instance = Load("identity_bytes");
  ASSERT_NE(instance, nullptr);
  std::vector<std::string> names{"OUTPUT0"};
  std::vector<Tensor> outputs;
  const std::string truncated = SerializeBytes({"abc"}).substr(0, 6);
  const std::string trailing = SerializeBytes({"abc"}) + "x";
  for (const std::string& body : {truncated, trailing}) {
    std::vector<Tensor> inputs{View("INPUT0", DataType::kBytes, {1, 1}, body.data(), body.size())};
    Status s = instance->Run(inputs, names, &outputs, {});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_TRUE(outputs.empty());
  }
  // A huge element count over a small buffer is refused before ORT builds the strings.
  const std::string small = SerializeBytes({"abc"});
  std::vector<Tensor> huge{
      View("INPUT0", DataType::kBytes, {1'000'000'000, 1000}, small.data(), small.size())};
  Status s = instance->Run(huge, names, &outputs, {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("cannot hold"));
}

TEST_F(OnnxRuntimeBackendTest, ComputesAndReturnsOutputsInRequestedOrder) {
  auto instance = Load("simple");
  ASSERT_NE(instance, nullptr);
  std::vector<int32_t> a(32), b(32);
  for (int i = 0; i < 32; ++i) {
    a[i] = i;
    b[i] = 100 - i;
  }
  std::vector<Tensor> inputs{View("INPUT1", DataType::kInt32, {2, 16}, b.data(), 128),
                             View("INPUT0", DataType::kInt32, {2, 16}, a.data(), 128)};
  std::vector<std::string> names{"OUTPUT1", "OUTPUT0"};
  std::vector<Tensor> outputs;
  Status s = instance->Run(inputs, names, &outputs, {});
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].name, "OUTPUT1");
  EXPECT_EQ(outputs[1].name, "OUTPUT0");
  const auto* diff = reinterpret_cast<const int32_t*>(outputs[0].data);
  const auto* sum = reinterpret_cast<const int32_t*>(outputs[1].data);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(sum[i], 100);
    EXPECT_EQ(diff[i], 2 * i - 100);
  }

  // Only one of the outputs.
  std::vector<std::string> one{"OUTPUT0"};
  s = instance->Run(inputs, one, &outputs, {});
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].name, "OUTPUT0");
}

TEST_F(OnnxRuntimeBackendTest, AlignedInputsAreBorrowedAndMisalignedOnesCopied) {
  auto instance = Load("identity_fp32");
  ASSERT_NE(instance, nullptr);
  auto& ort = AsOrt(*instance);
  const float values[4] = {1.5f, -2.0f, 3.25f, 1e30f};
  auto buffer = AllocateTensorBuffer(64);
  std::memcpy(buffer.get(), values, sizeof(values));
  std::memcpy(buffer.get() + 17, values, sizeof(values));  // 17: misaligned for float
  std::vector<std::string> names{"OUTPUT0"};
  std::vector<Tensor> outputs;

  std::vector<Tensor> aligned{View("INPUT0", DataType::kFp32, {1, 4}, buffer.get(), 16)};
  ASSERT_TRUE(instance->Run(aligned, names, &outputs, {}).ok());
  EXPECT_EQ(ort.counters().inputs_borrowed, 1u);
  EXPECT_EQ(ort.counters().inputs_copied, 0u);
  EXPECT_EQ(std::memcmp(outputs[0].data, values, 16), 0);
  // The output lives in ORT's memory, not in the caller's buffer.
  EXPECT_NE(outputs[0].data, buffer.get());

  std::vector<Tensor> misaligned{View("INPUT0", DataType::kFp32, {1, 4}, buffer.get() + 17, 16)};
  for (int i = 0; i < 2; ++i) {  // the second run reuses the scratch buffer
    ASSERT_TRUE(instance->Run(misaligned, names, &outputs, {}).ok());
    EXPECT_EQ(std::memcmp(outputs[0].data, values, 16), 0);
  }
  EXPECT_EQ(ort.counters().inputs_borrowed, 1u);
  EXPECT_EQ(ort.counters().inputs_copied, 2u);
  EXPECT_EQ(ort.counters().outputs_copied, 0u);
}

TEST_F(OnnxRuntimeBackendTest, SingleByteTypesAreNeverCopied) {
  auto instance = Load("identity_bool");
  ASSERT_NE(instance, nullptr);
  const uint8_t values[4] = {0, 0, 1, 0};
  std::vector<Tensor> inputs{View("INPUT0", DataType::kBool, {4, 1}, values + 1, 3)};
  inputs[0].shape = {3, 1};
  std::vector<std::string> names{"OUTPUT0"};
  std::vector<Tensor> outputs;
  ASSERT_TRUE(instance->Run(inputs, names, &outputs, {}).ok());
  EXPECT_EQ(AsOrt(*instance).counters().inputs_copied, 0u);
  EXPECT_EQ(std::memcmp(outputs[0].data, values + 1, 3), 0);
}

TEST_F(OnnxRuntimeBackendTest, OutputsOutliveTheirInstanceAndInput) {
  std::vector<Tensor> outputs;
  {
    auto instance = Load("identity_int64");
    ASSERT_NE(instance, nullptr);
    auto buffer = AllocateTensorBuffer(16);
    const int64_t values[2] = {-7, int64_t{1} << 40};
    std::memcpy(buffer.get(), values, 16);
    std::vector<Tensor> inputs{View("INPUT0", DataType::kInt64, {1, 2}, buffer.get(), 16)};
    std::vector<std::string> names{"OUTPUT0"};
    ASSERT_TRUE(instance->Run(inputs, names, &outputs, {}).ok());
    std::memset(buffer.get(), 0, 16);
  }
  ASSERT_EQ(outputs.size(), 1u);
  const auto* out = reinterpret_cast<const int64_t*>(outputs[0].data);
  EXPECT_EQ(out[0], -7);
  EXPECT_EQ(out[1], int64_t{1} << 40);
}

TEST_F(OnnxRuntimeBackendTest, ZeroElementTensorsRoundTrip) {
  auto instance = Load("identity_fp32");
  ASSERT_NE(instance, nullptr);
  std::vector<Tensor> inputs{View("INPUT0", DataType::kFp32, {0, 3}, nullptr, 0)};
  std::vector<std::string> names{"OUTPUT0"};
  std::vector<Tensor> outputs;
  Status s = instance->Run(inputs, names, &outputs, {});
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_THAT(outputs[0].shape, ElementsAre(0, 3));
  EXPECT_EQ(outputs[0].size_bytes, 0u);

  auto strings = Load("identity_bytes");
  ASSERT_NE(strings, nullptr);
  inputs[0].dtype = DataType::kBytes;
  s = strings->Run(inputs, names, &outputs, {});
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_THAT(outputs[0].shape, ElementsAre(0, 3));
  EXPECT_EQ(outputs[0].size_bytes, 0u);
}

TEST_F(OnnxRuntimeBackendTest, BadRequestsAreErrorsAndTheInstanceStaysUsable) {
  auto instance = Load("add_sub_fp32");
  ASSERT_NE(instance, nullptr);
  alignas(8) float a[5] = {1, 2, 3, 4, 5};
  alignas(8) float b[5] = {1, 1, 1, 1, 1};
  alignas(8) int32_t ints[4] = {1, 2, 3, 4};
  std::vector<std::string> names{"OUTPUT0"};
  std::vector<Tensor> outputs;
  auto in0 = View("INPUT0", DataType::kFp32, {4}, a, 16);
  auto in1 = View("INPUT1", DataType::kFp32, {4}, b, 16);

  struct Case {
    const char* what;
    std::vector<Tensor> inputs;
    std::vector<std::string> outputs;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"too few inputs", {in0}, names, "expects 2 inputs"},
      {"too many inputs", {in0, in1, in1}, names, "expects 2 inputs"},
      {"unknown name", {in0, View("INPUT9", DataType::kFp32, {4}, b, 16)}, names, "INPUT9"},
      {"repeated name", {in0, in0}, names, "twice"},
      {"wrong dtype", {in0, View("INPUT1", DataType::kInt32, {4}, ints, 16)}, names, "INT32"},
      {"wrong byte size", {in0, View("INPUT1", DataType::kFp32, {4}, b, 12)}, names, "12 bytes"},
      {"negative dim", {in0, View("INPUT1", DataType::kFp32, {-4}, b, 16)}, names, "shape"},
      {"shape the model rejects", {in0, View("INPUT1", DataType::kFp32, {5}, b, 20)}, names, ""},
      {"rank the model rejects", {in0, View("INPUT1", DataType::kFp32, {1, 4}, b, 16)}, names, ""},
      {"unknown output", {in0, in1}, {"OUTPUT7"}, "OUTPUT7"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    Status s = instance->Run(c.inputs, c.outputs, &outputs, {});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(c.message));
    EXPECT_TRUE(outputs.empty());
  }

  std::vector<Tensor> good{in0, in1};
  std::vector<std::string> both{"OUTPUT0", "OUTPUT1"};
  Status s = instance->Run(good, both, &outputs, {});
  ASSERT_TRUE(s.ok()) << s.ToString();
  const auto* sum = reinterpret_cast<const float*>(outputs[0].data);
  const auto* diff = reinterpret_cast<const float*>(outputs[1].data);
  EXPECT_EQ(sum[3], 5.0f);
  EXPECT_EQ(diff[3], 3.0f);
}

// Triton's initializer_as_input (tools/make_triton_models.py): INITIALIZER is an initializer
// (ones) also listed as a graph input, which ONNX Runtime calls overridable (probe 63).
TEST_F(OnnxRuntimeBackendTest, AnInputWithAValueInTheModelMayBeLeftOutOrOverridden) {
  ASSERT_FALSE(::harrier::testing::TritonModelDir().empty());
  const std::string path =
      ::harrier::testing::TritonModelDir() + "/initializer_as_input/1/model.onnx";
  auto sig = TheBackend().Inspect(path);
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  ASSERT_EQ(sig->inputs.size(), 1u);
  EXPECT_EQ(sig->inputs[0].name, "INPUT");
  ASSERT_EQ(sig->defaulted_inputs.size(), 1u);
  EXPECT_EQ(sig->defaulted_inputs[0].name, "INITIALIZER");
  EXPECT_EQ(sig->defaulted_inputs[0].dtype, DataType::kFp32);
  EXPECT_THAT(sig->defaulted_inputs[0].dims, ElementsAre(5, 5));

  auto instance = TheBackend().CreateInstance(path, {});
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  ASSERT_EQ((*instance)->signature()->defaulted_inputs.size(), 1u);
  alignas(4) float x[25];
  alignas(4) float tens[25];
  for (int i = 0; i < 25; ++i) {
    x[i] = static_cast<float>(i);
    tens[i] = 10;
  }
  const Tensor input = View("INPUT", DataType::kFp32, {5, 5}, x, sizeof(x));
  const Tensor initializer = View("INITIALIZER", DataType::kFp32, {5, 5}, tens, sizeof(tens));
  const std::vector<std::string> names{"OUTPUT"};
  std::vector<Tensor> outputs;
  for (const auto& [inputs, added] : {std::pair{std::vector<Tensor>{input}, 1.0f},
                                      std::pair{std::vector<Tensor>{initializer, input}, 10.0f}}) {
    SCOPED_TRACE(inputs.size());
    Status s = (*instance)->Run(inputs, names, &outputs, {});
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(outputs.size(), 1u);
    const auto* out = reinterpret_cast<const float*>(outputs[0].data);
    EXPECT_EQ(out[0], added);
    EXPECT_EQ(out[24], 24 + added);
  }
  // The input the model needs, left out: named, whatever else comes.
  const std::vector<Tensor> only_initializer{initializer};
  Status missing = (*instance)->Run(only_initializer, names, &outputs, {});
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.message(), HasSubstr("input 'INPUT' is missing"));
  Status none = (*instance)->Run(std::vector<Tensor>{}, names, &outputs, {});
  EXPECT_THAT(none.message(), HasSubstr("expects 1 inputs ('INPUT') and may take 1 that have a "
                                        "value in the model, got 0"));
}

TEST_F(OnnxRuntimeBackendTest, NoOutputNamesRunsNothing) {
  auto instance = Load("identity_fp32");
  ASSERT_NE(instance, nullptr);
  alignas(4) float x[2] = {1, 2};
  std::vector<Tensor> inputs{View("INPUT0", DataType::kFp32, {1, 2}, x, 8)};
  std::vector<Tensor> outputs(1);
  EXPECT_TRUE(instance->Run(inputs, {}, &outputs, {}).ok());
  EXPECT_TRUE(outputs.empty());
}

TEST_F(OnnxRuntimeBackendTest, InstanceOutlivesItsBackend) {
  auto backend = OnnxRuntimeBackend::Create({});  // shares the process's one ORT environment
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  auto instance = (*backend)->CreateInstance(TestModelPath("identity_int32"), {});
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  backend.value().reset();
  alignas(4) int32_t x[2] = {5, 6};
  std::vector<Tensor> inputs{View("INPUT0", DataType::kInt32, {1, 2}, x, 8)};
  std::vector<std::string> names{"OUTPUT0"};
  std::vector<Tensor> outputs;
  ASSERT_TRUE((*instance)->Run(inputs, names, &outputs, {}).ok());
  EXPECT_EQ(reinterpret_cast<const int32_t*>(outputs[0].data)[1], 6);
}

TEST_F(OnnxRuntimeBackendTest, SessionOptionsFromParametersLoadAndRun) {
  InstanceOptions options;
  options.intra_op_threads = 2;
  options.parallel_execution = true;
  options.inter_op_threads = 2;
  options.graph_optimization_level = 1;
  options.parameters = {{"enable_mem_arena", "0"},
                        {"enable_mem_pattern", "false"},
                        {"session.intra_op.allow_spinning", "1"}};
  auto instance = Load("simple", options);
  ASSERT_NE(instance, nullptr);
  std::vector<int32_t> a(16, 3), b(16, 1);
  std::vector<Tensor> inputs{View("INPUT0", DataType::kInt32, {1, 16}, a.data(), 64),
                             View("INPUT1", DataType::kInt32, {1, 16}, b.data(), 64)};
  std::vector<std::string> names{"OUTPUT1"};
  std::vector<Tensor> outputs;
  ASSERT_TRUE(instance->Run(inputs, names, &outputs, {}).ok());
  EXPECT_EQ(reinterpret_cast<const int32_t*>(outputs[0].data)[15], 2);
}

// share_session_between_instances: the second instance runs the first's session; both run at
// once from two threads, each with its own inputs, and each gets its own answers. Without the
// parameter every instance has its own session.
TEST_F(OnnxRuntimeBackendTest, InstancesShareOneSessionWhenAskedAndRunItConcurrently) {
  InstanceOptions shared;
  shared.parameters = {{"share_session_between_instances", "true"}};
  auto first = Load("simple", shared);
  ASSERT_NE(first, nullptr);
  auto second = TheBackend().CreateAnotherInstance(*first, TestModelPath("simple"), shared);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(AsOrt(**second).SharesSessionWith(AsOrt(*first)));
  auto separate = TheBackend().CreateAnotherInstance(*first, TestModelPath("simple"), {});
  ASSERT_TRUE(separate.ok()) << separate.status().ToString();
  EXPECT_FALSE(AsOrt(**separate).SharesSessionWith(AsOrt(*first)));

  auto run_many = [](ModelInstance* instance, int32_t base, int* wrong) {
    constexpr int kElements = 16;  // simple: INT32 [1, 16] + [1, 16] -> sum, difference
    std::vector<int32_t> a(kElements), b(kElements, 1);
    const std::vector<std::string> names = {"OUTPUT0", "OUTPUT1"};
    for (int k = 0; k < 2000; ++k) {
      for (int i = 0; i < kElements; ++i) a[i] = base + k * kElements + i;
      std::vector<Tensor> inputs = {
          View("INPUT0", DataType::kInt32, {1, kElements}, a.data(), a.size() * sizeof(int32_t)),
          View("INPUT1", DataType::kInt32, {1, kElements}, b.data(), b.size() * sizeof(int32_t))};
      std::vector<Tensor> outputs;
      if (!instance->Run(inputs, names, &outputs, {}).ok() || outputs.size() != 2) {
        ++*wrong;
        continue;
      }
      const auto* sum = reinterpret_cast<const int32_t*>(outputs[0].data);
      const auto* diff = reinterpret_cast<const int32_t*>(outputs[1].data);
      for (int i = 0; i < kElements; ++i) {
        if (sum[i] != a[i] + 1 || diff[i] != a[i] - 1) {
          ++*wrong;
          break;
        }
      }
    }
  };
  int wrong_first = 0, wrong_second = 0;
  std::thread t1(run_many, first.get(), 0, &wrong_first);
  std::thread t2(run_many, second->get(), 1000000, &wrong_second);
  t1.join();
  t2.join();
  EXPECT_EQ(wrong_first, 0);
  EXPECT_EQ(wrong_second, 0);
  // The shared session outlives the instance that created it.
  first.reset();
  int wrong_after = 0;
  run_many(second->get(), 5, &wrong_after);
  EXPECT_EQ(wrong_after, 0);
}

// ---- Cancellation: RunOptions::SetTerminate ------------------------------------------------

namespace cancellation_test {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// The `slow` model's input: kSlowSize floats whose mean is 3.
constexpr int kSlowSize = 1024;  // tools/make_test_models.py SLOW_SIZE

std::vector<float> SlowInput() {
  std::vector<float> v(kSlowSize);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7);  // 0..6
  double sum = 0;
  for (float x : v) sum += x;
  const float shift = static_cast<float>(3.0 - sum / static_cast<double>(v.size()));
  for (float& x : v) x += shift;
  return v;
}

}  // namespace cancellation_test

TEST_F(OnnxRuntimeBackendTest, CancelledBeforeTheRunIsCancelledWithoutRunning) {
  auto instance = Load("add_sub_fp32");
  ASSERT_TRUE(instance);
  const float a[4] = {1, 2, 3, 4}, b[4] = {1, 1, 1, 1};
  std::vector<Tensor> inputs = {View("INPUT0", DataType::kFp32, {4}, a, sizeof(a)),
                                View("INPUT1", DataType::kFp32, {4}, b, sizeof(b))};
  const std::vector<std::string> names = {"OUTPUT0"};
  CancellationToken token;
  token.Cancel();
  std::vector<Tensor> outputs;
  Status s = instance->Run(inputs, names, &outputs, RunContext{&token});
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
  EXPECT_TRUE(outputs.empty());
  ASSERT_TRUE(instance->Run(inputs, names, &outputs, RunContext{}).ok());
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(reinterpret_cast<const float*>(outputs[0].data)[3], 5.0f);
}

// A run of the `slow` model (about a second on one core) is stopped by cancelling its token:
// Run() returns kCancelled within milliseconds of Cancel(), and the instance then runs the next
// request normally (the terminate flag does not stick).
TEST_F(OnnxRuntimeBackendTest, CancellingTerminatesARunningModelWithinMilliseconds) {
  using cancellation_test::Clock;
  using cancellation_test::Ms;
  InstanceOptions options;
  options.intra_op_threads = 1;
  auto instance = Load("slow", options);
  ASSERT_TRUE(instance);
  const std::vector<float> input = cancellation_test::SlowInput();
  std::vector<Tensor> inputs = {View("INPUT0", DataType::kFp32, {1, cancellation_test::kSlowSize},
                                     input.data(), input.size() * sizeof(float))};
  const std::vector<std::string> names = {"OUTPUT0"};

  // Uncancelled: the full run, which must be long enough for the test below to mean something.
  std::vector<Tensor> outputs;
  const auto full_start = Clock::now();
  ASSERT_TRUE(instance->Run(inputs, names, &outputs, RunContext{}).ok());
  const double full_ms = Ms(Clock::now() - full_start);
  ASSERT_EQ(outputs.size(), 1u);
  ASSERT_EQ(outputs[0].size_bytes, cancellation_test::kSlowSize * sizeof(float));
  EXPECT_NEAR(reinterpret_cast<const float*>(outputs[0].data)[0], 3.0f, 1e-3f);
  EXPECT_GT(full_ms, 250.0) << "the slow model ran too fast to test cancellation";

  CancellationToken token;
  Status status;
  Clock::time_point returned;
  std::vector<Tensor> cancelled_outputs;
  std::thread runner([&] {
    status = instance->Run(inputs, names, &cancelled_outputs, RunContext{&token});
    returned = Clock::now();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto cancelled_at = Clock::now();
  token.Cancel();
  runner.join();
  const double cancel_latency_ms = Ms(returned - cancelled_at);
  std::printf("slow model: full run %.1f ms; Run() returned %.2f ms after Cancel()\n", full_ms,
              cancel_latency_ms);
  RecordProperty("full_run_ms", std::to_string(full_ms));
  RecordProperty("cancel_latency_ms", std::to_string(cancel_latency_ms));
  EXPECT_EQ(status.code(), StatusCode::kCancelled) << status.ToString();
  EXPECT_TRUE(cancelled_outputs.empty());
  EXPECT_LT(cancel_latency_ms, 200.0);
  EXPECT_LT(cancel_latency_ms, full_ms / 2);

  // The instance is free and correct afterwards.
  outputs.clear();
  ASSERT_TRUE(instance->Run(inputs, names, &outputs, RunContext{&token}).code() ==
              StatusCode::kCancelled);  // a cancelled token stays cancelled
  CancellationToken fresh;
  outputs.clear();
  const Status again = instance->Run(inputs, names, &outputs, RunContext{&fresh});
  ASSERT_TRUE(again.ok()) << again.ToString();
  ASSERT_EQ(outputs.size(), 1u);
  const float* out = reinterpret_cast<const float*>(outputs[0].data);
  for (int i = 0; i < cancellation_test::kSlowSize; ++i) ASSERT_NEAR(out[i], 3.0f, 1e-3f) << i;
}

}  // namespace
}  // namespace harrier
