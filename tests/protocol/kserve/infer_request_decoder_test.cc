#include "protocol/kserve/infer_request_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "util/bytes_tensor.h"
#include "util/shm_object.h"

namespace harrier::kserve {
namespace {

using ::harrier::testing::Strings;

using ::testing::HasSubstr;

StatusOr<std::unique_ptr<InferenceRequest>> Decode(const std::string& json,
                                                   const std::string& binary = "",
                                                   const DecodeLimits& limits = DecodeLimits()) {
  auto body = std::make_shared<const std::string>(json + binary);
  return DecodeInferRequest(body, json.size(), limits);
}

std::unique_ptr<InferenceRequest> MustDecode(const std::string& json,
                                             const std::string& binary = "") {
  auto r = Decode(json, binary);
  EXPECT_TRUE(r.ok()) << r.status().ToString() << "\n" << json;
  return r.ok() ? std::move(r).value() : nullptr;
}

// Expects a decode failure with `code` whose message contains `fragment`.
void ExpectError(const std::string& json, StatusCode code, const std::string& fragment,
                 const std::string& binary = "", const DecodeLimits& limits = DecodeLimits()) {
  auto r = Decode(json, binary, limits);
  ASSERT_FALSE(r.ok()) << "decoded: " << json;
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr(fragment)) << json;
}

void ExpectInvalid(const std::string& json, const std::string& fragment,
                   const std::string& binary = "") {
  ExpectError(json, StatusCode::kInvalidArgument, fragment, binary);
}

std::string Input(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& data) {
  return R"({"name":")" + name + R"(","datatype":")" + dtype + R"(","shape":)" + shape +
         R"(,"data":)" + data + "}";
}

std::string OneInput(const std::string& dtype, const std::string& shape, const std::string& data) {
  return R"({"inputs":[)" + Input("x", dtype, shape, data) + "]}";
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  std::vector<T> v(t.size_bytes / sizeof(T));
  std::memcpy(v.data(), t.data, t.size_bytes);
  return v;
}

std::string Raw(const void* p, size_t n) {
  return std::string(static_cast<const char*>(p), n);
}

TEST(DecodeInferRequestTest, DecodesFlatFp32WithIdAndParameters) {
  auto r = MustDecode(
      R"({"id":"req-1","parameters":{"priority":2,"flag":true,"ratio":0.5,"tag":"a"},)"
      R"("inputs":[{"name":"INPUT0","shape":[2,2],"datatype":"FP32","data":[1,2.5,-3,4e2]}]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->id, "req-1");
  EXPECT_EQ(std::get<int64_t>(r->parameters.at("priority")), 2);
  EXPECT_EQ(std::get<bool>(r->parameters.at("flag")), true);
  EXPECT_EQ(std::get<double>(r->parameters.at("ratio")), 0.5);
  EXPECT_EQ(std::get<std::string>(r->parameters.at("tag")), "a");
  ASSERT_EQ(r->inputs.size(), 1u);
  const Tensor& t = r->inputs[0];
  EXPECT_EQ(t.name, "INPUT0");
  EXPECT_EQ(t.dtype, DataType::kFp32);
  EXPECT_EQ(t.shape, (Shape{2, 2}));
  EXPECT_EQ(Values<float>(t), (std::vector<float>{1, 2.5f, -3, 400}));
  EXPECT_NE(t.owner, nullptr);  // JSON data is converted into a buffer the tensor owns
  EXPECT_FALSE(r->binary_data_output);
  EXPECT_TRUE(r->outputs.empty());
  EXPECT_NE(r->body, nullptr);
}

TEST(DecodeInferRequestTest, NestedDataEqualsFlat) {
  auto flat = MustDecode(OneInput("INT32", "[2,3]", "[1,2,3,4,5,6]"));
  auto nested = MustDecode(OneInput("INT32", "[2,3]", "[[1,2,3],[4,5,6]]"));
  ASSERT_TRUE(flat && nested);
  EXPECT_EQ(Values<int32_t>(flat->inputs[0]), Values<int32_t>(nested->inputs[0]));
  auto deep = MustDecode(OneInput("INT32", "[1,2,3]", "[[[1,2,3],[4,5,6]]]"));
  ASSERT_TRUE(deep);
  EXPECT_EQ(Values<int32_t>(deep->inputs[0]), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
}

TEST(DecodeInferRequestTest, FieldsInAnyOrder) {
  auto r = MustDecode(
      R"({"outputs":[{"name":"y"}],"inputs":[{"data":[7,8],"shape":[2],"datatype":"INT64",)"
      R"("name":"x"}],"id":"z"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(Values<int64_t>(r->inputs[0]), (std::vector<int64_t>{7, 8}));
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].name, "y");
}

TEST(DecodeInferRequestTest, EveryDatatypeFromJson) {
  EXPECT_EQ(Values<uint8_t>(MustDecode(OneInput("BOOL", "[3]", "[true,false,true]"))->inputs[0]),
            (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(Values<uint8_t>(MustDecode(OneInput("UINT8", "[2]", "[0,255]"))->inputs[0]),
            (std::vector<uint8_t>{0, 255}));
  EXPECT_EQ(Values<uint16_t>(MustDecode(OneInput("UINT16", "[2]", "[0,65535]"))->inputs[0]),
            (std::vector<uint16_t>{0, 65535}));
  EXPECT_EQ(Values<uint32_t>(MustDecode(OneInput("UINT32", "[1]", "[4294967295]"))->inputs[0]),
            (std::vector<uint32_t>{4294967295u}));
  EXPECT_EQ(Values<uint64_t>(
                MustDecode(OneInput("UINT64", "[2]", "[0,18446744073709551615]"))->inputs[0]),
            (std::vector<uint64_t>{0, 18446744073709551615ull}));
  EXPECT_EQ(Values<int8_t>(MustDecode(OneInput("INT8", "[2]", "[-128,127]"))->inputs[0]),
            (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(Values<int16_t>(MustDecode(OneInput("INT16", "[2]", "[-32768,32767]"))->inputs[0]),
            (std::vector<int16_t>{-32768, 32767}));
  EXPECT_EQ(
      Values<int32_t>(MustDecode(OneInput("INT32", "[2]", "[-2147483648,2147483647]"))->inputs[0]),
      (std::vector<int32_t>{INT32_MIN, INT32_MAX}));
  EXPECT_EQ(Values<int64_t>(
                MustDecode(OneInput("INT64", "[2]", "[-9223372036854775808,9223372036854775807]"))
                    ->inputs[0]),
            (std::vector<int64_t>{INT64_MIN, INT64_MAX}));
  EXPECT_EQ(Values<uint16_t>(MustDecode(OneInput("FP16", "[4]", "[1,0.5,-2,65504]"))->inputs[0]),
            (std::vector<uint16_t>{0x3C00, 0x3800, 0xC000, 0x7BFF}));
  EXPECT_EQ(Values<uint16_t>(MustDecode(OneInput("BF16", "[3]", "[1,-2,0.5]"))->inputs[0]),
            (std::vector<uint16_t>{0x3F80, 0xC000, 0x3F00}));
  EXPECT_EQ(Values<float>(MustDecode(OneInput("FP32", "[2]", "[0.1,-3.4028234e38]"))->inputs[0]),
            (std::vector<float>{0.1f, -3.4028234e38f}));
  EXPECT_EQ(Values<double>(MustDecode(OneInput("FP64", "[2]", "[0.1,1e-300]"))->inputs[0]),
            (std::vector<double>{0.1, 1e-300}));
  auto bytes = MustDecode(OneInput("BYTES", "[4]", R"(["abc","","\u00e9\n","a\u0000b"])"));
  ASSERT_TRUE(bytes);
  EXPECT_EQ(Strings(bytes->inputs[0]),
            (std::vector<std::string>{"abc", "", "\xC3\xA9\n", std::string("a\0b", 3)}));
  EXPECT_TRUE(ValidateBytesTensor(bytes->inputs[0].bytes(), 4).ok());
}

TEST(DecodeInferRequestTest, ScalarAndEmptyTensors) {
  auto scalar = MustDecode(OneInput("INT32", "[]", "[7]"));
  ASSERT_TRUE(scalar);
  EXPECT_EQ(Values<int32_t>(scalar->inputs[0]), (std::vector<int32_t>{7}));
  auto empty = MustDecode(OneInput("FP32", "[0,3]", "[]"));
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->inputs[0].size_bytes, 0u);
}

TEST(DecodeInferRequestTest, RejectsValuesOutOfRangeOrOfTheWrongType) {
  ExpectInvalid(OneInput("INT8", "[1]", "[300]"), "300 is out of range for INT8");
  ExpectInvalid(OneInput("INT8", "[1]", "[-129]"), "out of range for INT8");
  ExpectInvalid(OneInput("UINT8", "[1]", "[-1]"), "out of range for UINT8");
  ExpectInvalid(OneInput("UINT8", "[1]", "[256]"), "out of range for UINT8");
  ExpectInvalid(OneInput("UINT16", "[1]", "[65536]"), "out of range for UINT16");
  ExpectInvalid(OneInput("INT32", "[1]", "[2147483648]"), "out of range for INT32");
  ExpectInvalid(OneInput("UINT64", "[1]", "[-1]"), "out of range for UINT64");
  ExpectInvalid(OneInput("INT64", "[1]", "[9223372036854775808]"), "out of range for INT64");
  ExpectInvalid(OneInput("INT32", "[1]", "[1.5]"), "expected an integer for INT32");
  ExpectInvalid(OneInput("INT32", "[1]", "[1.0]"), "expected an integer for INT32");
  ExpectInvalid(OneInput("INT32", "[1]", R"(["1"])"), "got string '1'");
  ExpectInvalid(OneInput("FP32", "[1]", "[true]"), "expected a number, got a bool");
  ExpectInvalid(OneInput("FP32", "[1]", "[null]"), "expected a number, got null");
  ExpectInvalid(OneInput("FP32", "[1]", "[1e39]"), "out of range for FP32");
  ExpectInvalid(OneInput("FP16", "[1]", "[65520]"), "out of range for FP16");
  ExpectInvalid(OneInput("BF16", "[1]", "[1e39]"), "out of range for BF16");
  ExpectInvalid(OneInput("BOOL", "[1]", "[1]"), "expected true or false for BOOL");
  ExpectInvalid(OneInput("BYTES", "[1]", "[1]"), "expected a string for BYTES");
  ExpectInvalid(OneInput("FP32", "[2]", "[1,[2]]"), "data[1]");
  ExpectInvalid(OneInput("FP32", "[2,1]", "[[1],2]"), "mixes arrays and values");
}

TEST(DecodeInferRequestTest, FloatsJustBelowTheOverflowThresholdRoundToTheMaximum) {
  auto fp16 = MustDecode(OneInput("FP16", "[1]", "[65519]"));
  ASSERT_TRUE(fp16);
  EXPECT_EQ(Values<uint16_t>(fp16->inputs[0]), (std::vector<uint16_t>{0x7BFF}));
  auto fp32 = MustDecode(OneInput("FP32", "[1]", "[3.4028235e38]"));
  ASSERT_TRUE(fp32);
  EXPECT_EQ(Values<float>(fp32->inputs[0])[0], 3.4028234663852886e38f);
}

TEST(DecodeInferRequestTest, RejectsNonJsonNumbersAndInvalidUtf8) {
  ExpectInvalid(OneInput("FP32", "[1]", "[NaN]"), "invalid JSON");
  ExpectInvalid(OneInput("FP32", "[1]", "[Infinity]"), "invalid JSON");
  ExpectInvalid(OneInput("FP32", "[1]", "[-Infinity]"), "invalid JSON");
  ExpectInvalid(OneInput("BYTES", "[1]", "[\"a\xff\"]"), "invalid JSON");
  ExpectInvalid(OneInput("BYTES", "[1]", "[\"\xc3\"]"), "invalid JSON");
  ExpectInvalid(OneInput("BYTES", "[1]", R"(["\ud800"])"), "invalid JSON");
}

TEST(DecodeInferRequestTest, RejectsCountMismatches) {
  // Triton's words first (its QA tests match them), Harrier's detail after.
  ExpectInvalid(OneInput("FP32", "[2,2]", "[1,2,3]"),
                "Unable to parse 'data': Shape does not match true shape of 'data' field; "
                "input 'x': data holds 3 values but shape [2,2] needs 4");
  ExpectInvalid(OneInput("FP32", "[2,2]", "[1,2,3,4,5]"),
                "Unable to parse 'data': Shape does not match true shape of 'data' field");
  ExpectInvalid(OneInput("FP32", "[2,2]", "[1,2,3,4,5]"), "more than the 4 values");
  ExpectInvalid(OneInput("FP32", "[2,2]", "[[1,2],[3]]"), "holds 3 values");
  ExpectInvalid(OneInput("BYTES", "[2]", R"(["a"])"), "data holds 1 values");
  ExpectInvalid(OneInput("BYTES", "[1]", R"(["a","b"])"), "more than the 1 values");
  // A claim the JSON cannot possibly hold is rejected before its buffer is allocated.
  ExpectInvalid(OneInput("FP32", "[100000]", "[1]"), "cannot hold that many");
}

TEST(DecodeInferRequestTest, RejectsHugeShapeClaimsBeforeAllocating) {
  ExpectError(OneInput("FP32", "[1000000000]", "[1]"), StatusCode::kPayloadTooLarge,
              "claims more than 268435456 elements");
  ExpectError(OneInput("FP32", "[10,1024,1024,1024]", "[1]"), StatusCode::kPayloadTooLarge,
              "shape [10,1024,1024,1024]");
  // Overflows are malformed (400, Triton's words), not over a limit.
  ExpectInvalid(OneInput("FP32", "[4294967296,4294967296,4294967296]", "[1]"),
                "causes total element count to exceed maximum size of 9223372036854775807");
  ExpectInvalid(OneInput("FP32", "[4,1152921504606846978]", "[1]"),
                "byte size overflow for input 'x'");
  // The same claim on a binary input.
  ExpectError(
      R"({"inputs":[{"name":"x","shape":[1000000000],"datatype":"UINT8","parameters":{"binary_data_size":4}}]})",
      StatusCode::kPayloadTooLarge, "claims more than", "abcd");
}

TEST(DecodeInferRequestTest, EnforcesConfiguredLimits) {
  DecodeLimits limits;
  limits.max_tensor_elements = 4;
  ExpectError(OneInput("FP32", "[5]", "[1,2,3,4,5]"), StatusCode::kPayloadTooLarge,
              "claims more than 4", "", limits);
  limits = DecodeLimits();
  limits.max_total_input_bytes = 24;
  const std::string two = R"({"inputs":[)" + Input("a", "FP32", "[4]", "[1,2,3,4]") + "," +
                          Input("b", "FP32", "[4]", "[1,2,3,4]") + "]}";
  ExpectError(two, StatusCode::kPayloadTooLarge, "input 'b'", "", limits);
  ExpectError(OneInput("BYTES", "[2]", R"(["0123456789","0123456789abcdef"])"),
              StatusCode::kPayloadTooLarge, "BYTES data exceeds", "", limits);
  limits = DecodeLimits();
  limits.max_shape_dims = 2;
  ExpectError(OneInput("FP32", "[1,1,1]", "[1]"), StatusCode::kInvalidArgument,
              "at most 2 are allowed", "", limits);
}

TEST(DecodeInferRequestTest, RejectsBadShapes) {
  ExpectInvalid(OneInput("FP32", "[-1,2]", "[1,2]"),
                "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as "
                "unsigned-integer; input 'x': shape dimension -1 is negative");
  ExpectInvalid(OneInput("FP32", "[1.5]", "[1]"), "'shape' must hold integers");
  ExpectInvalid(OneInput("FP32", R"(["2"])", "[1,2]"), "'shape' must hold integers");
  ExpectInvalid(OneInput("FP32", "2", "[1,2]"), "'shape' must be an array");
  std::string many = "[";
  for (int i = 0; i < 33; ++i) many += i ? ",1" : "1";
  many += "]";
  ExpectInvalid(OneInput("FP32", many, "[1]"), "has 33 dimensions");
}

TEST(DecodeInferRequestTest, RejectsMalformedStructure) {
  ExpectInvalid("", "no JSON header");
  ExpectInvalid("   ", "invalid JSON");
  ExpectInvalid("[]", "must be a JSON object");
  ExpectInvalid(R"({"inputs":[)", "invalid JSON");
  ExpectInvalid(R"({"inputs":[]} x)", "invalid JSON");
  ExpectInvalid(R"({"id":"a"})", "missing required field 'inputs'");
  ExpectInvalid(R"({"inputs":{}})", "'inputs' must be an array");
  ExpectInvalid(R"({"inputs":[1]})", "inputs[0] must be an object");
  ExpectInvalid(R"({"inputs":[{"shape":[1],"datatype":"FP32","data":[1]}]})",
                "inputs[0]: missing required field 'name'");
  ExpectInvalid(R"({"inputs":[{"name":"","shape":[1],"datatype":"FP32","data":[1]}]})",
                "'name' must be a non-empty string");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[1],"data":[1]}]})",
                "input 'x': missing required field 'datatype'");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","data":[1]}]})",
                "missing required field 'shape'");
  ExpectInvalid(OneInput("FLOAT32", "[1]", "[1]"), "unknown datatype 'FLOAT32'");
  ExpectInvalid(OneInput("fp32", "[1]", "[1]"), "unknown datatype 'fp32'");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32"}]})",
                "has neither 'data' nor parameter 'binary_data_size'");
  ExpectInvalid(OneInput("FP32", "[1]", "1"), "'data' must be an array");
  ExpectInvalid(R"({"id":5,"inputs":[]})", "'id' must be a string");
  ExpectInvalid(R"({"inputs":[],"outputs":{}})", "'outputs' must be an array");
  ExpectInvalid(R"({"inputs":[],"outputs":["y"]})", "outputs[0] must be an object");
  ExpectInvalid(R"({"inputs":[],"outputs":[{}]})", "outputs[0]: missing required field 'name'");
}

TEST(DecodeInferRequestTest, RejectsUnknownAndRepeatedFields) {
  ExpectInvalid(R"({"inputs":[],"input":[]})", "request: unknown field 'input'");
  ExpectInvalid(
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1],"shapes":[1]}]})",
      "unknown field 'shapes'");
  ExpectInvalid(R"({"inputs":[],"outputs":[{"name":"y","binary":true}]})",
                "outputs[0]: unknown field 'binary'");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[1],"shape":[1],"datatype":"FP32","data":[1]}]})",
                "field 'shape' appears twice");
  ExpectInvalid(R"({"inputs":[],"inputs":[]})", "field 'inputs' appears twice");
  ExpectInvalid(R"({"inputs":[],"parameters":{"a":1,"a":2}})", "parameter 'a' appears twice");
}

TEST(DecodeInferRequestTest, RejectsDuplicateNames) {
  ExpectInvalid(R"({"inputs":[)" + Input("x", "FP32", "[1]", "[1]") + "," +
                    Input("x", "FP32", "[1]", "[2]") + "]}",
                "input 'x' already exists in request");
  ExpectInvalid(R"({"inputs":[],"outputs":[{"name":"y"},{"name":"y"}]})",
                "Duplicate output name 'y' is not allowed in a request");
}

TEST(DecodeInferRequestTest, NullOptionalFieldsAreAbsent) {
  auto r = MustDecode(R"({"id":null,"parameters":null,"inputs":[],"outputs":null})");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->id.empty());
  EXPECT_TRUE(r->parameters.empty());
}

TEST(DecodeInferRequestTest, RejectsBadParameters) {
  ExpectInvalid(R"({"inputs":[],"parameters":[]})", "'parameters' must be an object");
  ExpectInvalid(R"({"inputs":[],"parameters":{"a":{}}})", "parameter 'a' must be a bool");
  ExpectInvalid(R"({"inputs":[],"parameters":{"a":null}})", "got null");
  ExpectInvalid(R"({"inputs":[],"parameters":{"a":18446744073709551615}})", "out of int64 range");
  ExpectInvalid(R"({"inputs":[],"parameters":{"binary_data_output":1}})",
                "'binary_data_output' must be a bool");
  ExpectInvalid(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"binary_data":"yes"}}]})",
                "'binary_data' must be a bool");
  ExpectInvalid(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"classification":-1}}]})",
                "'classification' must be an integer >= 0");
  ExpectInvalid(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"classification":1.5}}]})",
                "'classification' must be an integer >= 0");
  ExpectInvalid(
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","parameters":{"shared_memory_region":"r"}}]})",
      "must specify both 'shared_memory_region' and 'shared_memory_byte_size'");
  // Without a registry (--allow-client-shm off) a region is refused, saying how to turn it on.
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","parameters":)"
                R"({"shared_memory_region":"r","shared_memory_byte_size":4}}]})",
                "start it with --allow-client-shm=true");
}

TEST(DecodeInferRequestTest, SharedMemoryInputsPointIntoTheRegion) {
  testing::ShmObject object(4096);
  const float values[2] = {1.5f, -2.0f};
  std::memcpy(object.data() + 64, values, sizeof(values));
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("in", object.key(), 0, 4096).ok());
  const SharedMemoryContext shm{&registry, "m"};
  const std::string json =
      R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":)"
      R"({"shared_memory_region":"in","shared_memory_offset":64,"shared_memory_byte_size":8}},)"
      R"({"name":"y","shape":[1],"datatype":"INT32","data":[3]}]})";
  auto r = DecodeInferRequest(std::make_shared<const std::string>(json), json.size(),
                              DecodeLimits(), shm);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tensor& x = (*r)->inputs[0];
  // The server's own mapping of the region (the test's is another address for the same pages).
  EXPECT_EQ(x.data, registry.Window("in", 64, 8)->data) << "not a view into the mapping";
  EXPECT_EQ(x.size_bytes, 8u);
  EXPECT_THAT(Values<float>(x), ::testing::ElementsAre(1.5f, -2.0f));
  EXPECT_NE(x.owner, nullptr);  // pins the mapping
  registry.UnregisterAll();
  EXPECT_THAT(Values<float>(x), ::testing::ElementsAre(1.5f, -2.0f));  // still mapped

  ASSERT_TRUE(registry.Register("in", object.key(), 0, 4096).ok());
  auto decode = [&](const std::string& params, const std::string& extra = "") {
    const std::string j = R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32",)" + extra +
                          R"("parameters":{)" + params + "}}]}";
    return DecodeInferRequest(std::make_shared<const std::string>(j), j.size(), DecodeLimits(),
                              shm);
  };
  auto expect = [](const auto& result, const std::string& fragment) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(result.status().message(), HasSubstr(fragment));
  };
  expect(decode(R"("shared_memory_region":"in","shared_memory_byte_size":12)"),
         "input byte size mismatch for input 'x' for model 'm'. Expected 8, got 12");
  expect(decode(R"("shared_memory_region":"nope","shared_memory_byte_size":8)"),
         "Unable to find shared memory region: 'nope'");
  expect(decode(R"("shared_memory_region":"in","shared_memory_offset":4090,)"
                R"("shared_memory_byte_size":8)"),
         "Invalid offset + byte size for shared memory region: 'in'");
  expect(decode(R"("shared_memory_region":"in","shared_memory_offset":-1,)"
                R"("shared_memory_byte_size":8)"),
         "'shared_memory_offset' must be an integer >= 0");
  expect(decode(R"("shared_memory_byte_size":8)"), "must specify both");
  expect(decode(R"("shared_memory_region":7,"shared_memory_byte_size":8)"),
         "'shared_memory_region' must be a non-empty string");
  expect(decode(R"("shared_memory_region":"in","shared_memory_byte_size":8)", R"("data":[1,2],)"),
         "has shared memory parameters and also 'data'");
  expect(decode(R"("shared_memory_region":"in","shared_memory_byte_size":8,)"
                R"("binary_data_size":8)"),
         "has shared memory parameters and also parameter 'binary_data_size'");
}

TEST(DecodeInferRequestTest, OutputSelection) {
  auto r = MustDecode(R"({"inputs":[],"parameters":{"binary_data_output":true},"outputs":[)"
                      R"({"name":"a"},{"name":"b","parameters":{"binary_data":false}},)"
                      R"({"name":"c","parameters":{"classification":3,"extra":"kept"}}]})");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->binary_data_output);
  ASSERT_EQ(r->outputs.size(), 3u);
  EXPECT_FALSE(r->outputs[0].binary_data);  // JSON when named without binary_data (Triton)
  EXPECT_FALSE(r->outputs[1].binary_data);
  EXPECT_EQ(r->outputs[2].classification, 3);
  EXPECT_EQ(std::get<std::string>(r->outputs[2].parameters.at("extra")), "kept");
  // The two read into fields are not kept in the map as well.
  EXPECT_TRUE(r->outputs[1].parameters.empty());
  EXPECT_EQ(r->outputs[2].parameters.size(), 1u);
}

TEST(DecodeInferRequestTest, DeeplyNestedDataIsRejectedWithoutRecursingDeeply) {
  const std::string deep(100000, '[');
  ExpectInvalid(OneInput("FP32", "[1]", deep + "1" + std::string(100000, ']')),
                "JSON nesting depth exceeds maximum allowed limit (100)");
  ExpectInvalid(R"({"inputs":[],"x":)" + deep + std::string(100000, ']') + "}",
                "JSON nesting depth exceeds maximum allowed limit (100)");
  // Triton's limit: 120 levels of data are refused, 50 are flattened whatever the rank.
  ExpectInvalid(OneInput("INT64", "[1,1]", std::string(120, '[') + "7" + std::string(120, ']')),
                "JSON nesting depth exceeds maximum allowed limit (100)");
  auto r =
      MustDecode(OneInput("INT64", "[1,1]", std::string(50, '[') + "7" + std::string(50, ']')));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(Values<int64_t>(r->inputs[0]), std::vector<int64_t>{7});
}

// ---- binary tensor data --------------------------------------------------------------------

std::string FloatBytes(std::vector<float> v) {
  return Raw(v.data(), v.size() * 4);
}

TEST(DecodeInferRequestTest, BinaryInputsPointIntoTheBody) {
  const std::string json =
      R"({"inputs":[{"name":"a","shape":[2,2],"datatype":"FP32","parameters":{"binary_data_size":16}},)" +
      Input("b", "INT32", "[1]", "[5]") +
      R"(,{"name":"c","shape":[3],"datatype":"UINT8","parameters":{"binary_data_size":3}}]})";
  const std::string binary = FloatBytes({1, 2, 3, 4}) + "xyz";
  auto body = std::make_shared<const std::string>(json + binary);
  auto r = DecodeInferRequest(body, json.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& req = *r.value();
  ASSERT_EQ(req.inputs.size(), 3u);
  const Tensor& a = req.inputs[0];
  EXPECT_EQ(a.data, reinterpret_cast<const std::byte*>(body->data()) + json.size());
  EXPECT_EQ(a.owner, nullptr);
  EXPECT_EQ(Values<float>(a), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(Values<int32_t>(req.inputs[1]), (std::vector<int32_t>{5}));
  EXPECT_EQ(Raw(req.inputs[2].data, 3), "xyz");
  EXPECT_EQ(req.inputs[2].data, a.data + 16);
  EXPECT_EQ(req.body, body);
}

TEST(DecodeInferRequestTest, BinaryBytesInput) {
  std::string bytes;
  for (std::string s : {"hi", "", "\xff\xfe"}) {
    uint32_t n = static_cast<uint32_t>(s.size());
    bytes += Raw(&n, 4) + s;
  }
  const std::string json =
      R"({"inputs":[{"name":"s","shape":[3],"datatype":"BYTES","parameters":{"binary_data_size":)" +
      std::to_string(bytes.size()) + "}}]}";
  auto r = MustDecode(json, bytes);
  ASSERT_TRUE(r);
  EXPECT_EQ(Strings(r->inputs[0]), (std::vector<std::string>{"hi", "", "\xff\xfe"}));
  // A BYTES slice whose serialization is broken.
  std::string broken = bytes;
  broken[0] = 9;
  ExpectInvalid(json, "input 's': BYTES element 1 of 3: truncated", broken);
}

std::string BinaryFp32(const std::string& name, int elements, int64_t size) {
  return R"({"name":")" + name + R"(","shape":[)" + std::to_string(elements) +
         R"(],"datatype":"FP32","parameters":{"binary_data_size":)" + std::to_string(size) + "}}";
}

TEST(DecodeInferRequestTest, RejectsBinarySizeMismatches) {
  const std::string one = R"({"inputs":[)" + BinaryFp32("a", 4, 16) + "]}";
  ExpectInvalid(one, "only 8 bytes of binary data remain", FloatBytes({1, 2}));  // truncated
  ExpectInvalid(one, "4 bytes after the JSON header that no input claims",
                FloatBytes({1, 2, 3, 4, 5}));  // leftover
  ExpectInvalid(R"({"inputs":[)" + BinaryFp32("a", 4, 12) + "]}",
                "'binary_data_size' is 12 but shape [4] of FP32 needs 16 bytes",
                FloatBytes({1, 2, 3}));
  ExpectInvalid(one, "only 0 bytes");  // no binary part at all
  ExpectInvalid(OneInput("FP32", "[1]", "[1]"), "no input claims", "junk");
  ExpectInvalid(
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1],"parameters":{"binary_data_size":4}}]})",
      "has both 'data' and parameter 'binary_data_size'", FloatBytes({1}));
  ExpectInvalid(
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":-4}}]})",
      "'binary_data_size' must be an integer >= 0");
  ExpectInvalid(
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":true}}]})",
      "'binary_data_size' must be an integer >= 0");
}

TEST(DecodeInferRequestTest, RejectsLyingHeaderLengths) {
  const std::string json = R"({"inputs":[)" + BinaryFp32("a", 1, 4) + "]}";
  auto body = std::make_shared<const std::string>(json + FloatBytes({1}));
  auto too_long = DecodeInferRequest(body, body->size() + 1);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(too_long.status().message(), HasSubstr("Inference-Header-Content-Length"));
  auto short_header = DecodeInferRequest(body, json.size() - 1);  // cuts the JSON
  ASSERT_FALSE(short_header.ok());
  EXPECT_THAT(short_header.status().message(), HasSubstr("invalid JSON"));
  auto long_header = DecodeInferRequest(body, json.size() + 2);  // swallows binary bytes
  ASSERT_FALSE(long_header.ok());
  EXPECT_EQ(long_header.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(DecodeInferRequest(nullptr, 0).ok());
}

TEST(DecodeInferRequestTest, ParsesInPlaceOrFromScratchAlike) {
  const std::string json = OneInput("FP32", "[3]", "[1,2,3]");
  auto exact = std::make_shared<std::string>(json);
  exact->shrink_to_fit();
  auto padded = std::make_shared<std::string>();
  padded->reserve(json.size() + kJsonPaddingBytes);
  padded->assign(json);
  for (const auto& body : {exact, padded}) {
    auto r = DecodeInferRequest(body, body->size());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(Values<float>(r.value()->inputs[0]), (std::vector<float>{1, 2, 3}));
  }
}

TEST(DecodeInferRequestTest, LargeFp32Tensor) {
  const int n = 3 * 224 * 224;
  std::string data = "[";
  for (int i = 0; i < n; ++i) {
    if (i) data += ',';
    data += std::to_string(i % 1000) + ".25";
  }
  data += "]";
  auto r = MustDecode(OneInput("FP32", "[1,3,224,224]", data));
  ASSERT_TRUE(r);
  const auto v = Values<float>(r->inputs[0]);
  ASSERT_EQ(v.size(), static_cast<size_t>(n));
  EXPECT_EQ(v[0], 0.25f);
  EXPECT_EQ(v[n - 1], static_cast<float>((n - 1) % 1000) + 0.25f);
}

// Triton's raw binary request: the body is the only input; its shape comes from the model.
TEST(DecodeRawInferRequestTest, DeducesTheShapeFromTheModelAndTheBodySize) {
  auto body = std::make_shared<const std::string>(std::string(3 * 2 * 2 * 4, '\x01'));
  const std::vector<TensorSpec> batched = {{"image", DataType::kFp32, {-1, 2, 2}}};
  auto r = DecodeRawInferRequest(body, "m", batched, 4);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)->inputs.size(), 1u);
  const Tensor& t = (*r)->inputs[0];
  EXPECT_EQ(t.name, "image");
  EXPECT_EQ(t.dtype, DataType::kFp32);
  EXPECT_EQ(t.shape, (Shape{3, 2, 2}));
  EXPECT_EQ(t.size_bytes, body->size());
  EXPECT_EQ(static_cast<const void*>(t.data), static_cast<const void*>(body->data()));  // no copy
  EXPECT_TRUE((*r)->outputs.empty());

  EXPECT_TRUE((*r)->binary_data_output);  // Triton answers raw requests in binary

  const std::vector<TensorSpec> fixed = {{"x", DataType::kInt16, {2, 3}}};
  auto f = DecodeRawInferRequest(std::make_shared<const std::string>(12, '\0'), "m", fixed, 0);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->inputs[0].shape, (Shape{2, 3}));

  // Triton's deduction: one variable dim besides the batch is the size; the batch is 1.
  const std::vector<TensorSpec> free_dim = {{"v", DataType::kFp32, {-1, 2, -1}}};
  auto v = DecodeRawInferRequest(std::make_shared<const std::string>(24, '\0'), "m", free_dim, 8);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ((*v)->inputs[0].shape, (Shape{1, 2, 3}));
  const std::vector<TensorSpec> free_nobatch = {{"v", DataType::kInt32, {-1}}};
  v = DecodeRawInferRequest(std::make_shared<const std::string>(20, '\0'), "m", free_nobatch, 0);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ((*v)->inputs[0].shape, (Shape{5}));

  // A one-element BYTES input: the body is the element, its length prepended.
  const std::vector<TensorSpec> one_string = {{"s", DataType::kBytes, {-1, 1}}};
  auto b = DecodeRawInferRequest(std::make_shared<const std::string>("427"), "m", one_string, 8);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->inputs[0].shape, (Shape{1, 1}));
  EXPECT_EQ(
      std::string(reinterpret_cast<const char*>((*b)->inputs[0].data), (*b)->inputs[0].size_bytes),
      std::string("\x03\0\0\0", 4) + "427");
}

TEST(DecodeRawInferRequestTest, RefusesWhatCannotBeDeduced) {
  auto body = [](size_t n) { return std::make_shared<const std::string>(n, '\0'); };
  struct Case {
    const char* what;
    std::vector<TensorSpec> inputs;
    int64_t max_batch_size;
    size_t bytes;
    const char* want;
  };
  const Case cases[] = {
      {"two inputs",
       {{"a", DataType::kFp32, {4}}, {"b", DataType::kFp32, {4}}},
       0,
       16,
       "Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'm' "
       "model configuration"},
      {"no input", {}, 0, 0, "but got 0 inputs"},
      {"bytes of several elements",
       {{"s", DataType::kBytes, {-1, -1}}},
       8,
       8,
       "For BYTE datatype raw input 's', the model must have input shape [1]"},
      {"bytes of two", {{"s", DataType::kBytes, {2}}}, 0, 8, "must have input shape [1]"},
      {"two variable dims",
       {{"v", DataType::kFp32, {-1, -1, -1}}},
       4,
       16,
       "The shape of the raw input 'v' can not be deduced because there are more than one "
       "variable-sized dimension"},
      {"partial row", {{"v", DataType::kFp32, {-1, -1, 2}}}, 4, 12, "whole number of 8-byte rows"},
      {"partial item", {{"x", DataType::kFp32, {-1, 4}}}, 8, 20, "are not 1 to 8 items of 16"},
      {"batch too large", {{"x", DataType::kFp32, {-1, 4}}}, 2, 48, "are not 1 to 2 items"},
      {"empty batch", {{"x", DataType::kFp32, {-1, 4}}}, 2, 0, "are not 1 to 2 items"},
      {"wrong size", {{"x", DataType::kFp32, {2, 2}}}, 0, 12, "the body has 12 bytes"},
  };
  for (const Case& c : cases) {
    auto r = DecodeRawInferRequest(body(c.bytes), "m", c.inputs, c.max_batch_size);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(r.status().message(), HasSubstr(c.want)) << c.what;
  }
}

}  // namespace
}  // namespace harrier::kserve
