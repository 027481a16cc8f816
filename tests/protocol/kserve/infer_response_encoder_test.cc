#include "protocol/kserve/infer_response_encoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "protocol/kserve/infer_request_decoder.h"
#include "util/shm_object.h"

namespace harrier::kserve {
namespace {

using ::testing::HasSubstr;

template <typename T>
Tensor MakeTensor(std::string name, DataType dtype, Shape shape, std::vector<T> values) {
  auto buf = std::make_shared<std::vector<T>>(std::move(values));
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = reinterpret_cast<const std::byte*>(buf->data());
  t.size_bytes = buf->size() * sizeof(T);
  t.owner = buf;
  return t;
}

Tensor MakeBytes(std::string name, std::vector<std::string> strings) {
  auto buf = std::make_shared<std::string>();
  for (const auto& s : strings) {
    uint32_t n = static_cast<uint32_t>(s.size());
    buf->append(reinterpret_cast<const char*>(&n), 4);
    buf->append(s);
  }
  Tensor t;
  t.name = std::move(name);
  t.dtype = DataType::kBytes;
  t.shape = {static_cast<int64_t>(strings.size())};
  t.data = reinterpret_cast<const std::byte*>(buf->data());
  t.size_bytes = buf->size();
  t.owner = buf;
  return t;
}

InferenceResponse Response(std::vector<Tensor> outputs) {
  InferenceResponse r;
  r.model_name = "m";
  r.model_version = 3;
  r.outputs = std::move(outputs);
  return r;
}

TEST(EncodeInferResponseTest, JsonOutput) {
  InferenceRequest request;
  request.id = "abc";
  auto r = EncodeInferResponse(
      Response({MakeTensor<float>("y", DataType::kFp32, {2}, {1.5f, -0.1f})}), request);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, R"({"model_name":"m","model_version":"3","id":"abc","outputs":[)"
                     R"({"name":"y","datatype":"FP32","shape":[2],"data":[1.5,-0.1]}]})");
  EXPECT_EQ(r->json_header_length, r->body.size());
  EXPECT_FALSE(r->binary);
}

TEST(EncodeInferResponseTest, ResponseIdAndParametersWin) {
  InferenceRequest request;
  request.id = "from-request";
  InferenceResponse response = Response({});
  response.id = "from-model";
  response.parameters = {{"a", true}, {"b", int64_t{-2}}, {"c", 0.5}, {"d", std::string("x\"")}};
  auto r = EncodeInferResponse(response, request);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, R"({"model_name":"m","model_version":"3","id":"from-model",)"
                     R"("parameters":{"a":true,"b":-2,"c":0.5,"d":"x\""},"outputs":[]})");
}

TEST(EncodeInferResponseTest, NonFiniteFloatsUseTritonsTokens) {
  const float inf = std::numeric_limits<float>::infinity();
  auto r = EncodeInferResponse(
      Response({MakeTensor<float>("y", DataType::kFp32, {3}, {std::nanf(""), inf, -inf})}),
      InferenceRequest());
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->body, HasSubstr(R"("data":[NaN,Infinity,-Infinity])"));
}

// A negative zero keeps its sign: "-0" is read as the integer 0 by Python's json (probe 27).
TEST(EncodeInferResponseTest, NegativeZeroIsWrittenAsAFloat) {
  auto r = EncodeInferResponse(
      Response({MakeTensor<float>("y", DataType::kFp32, {3}, {-0.0f, 0.0f, -1.5f}),
                MakeTensor<double>("z", DataType::kFp64, {1}, {-0.0})}),
      InferenceRequest());
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->body, HasSubstr(R"("data":[-0.0,0,-1.5])"));
  EXPECT_THAT(r->body, HasSubstr(R"("data":[-0.0])"));
}

// Decodes `data` as an input of `dtype`, echoes it as an output and encodes it back as JSON:
// the text must come back unchanged.
void ExpectJsonRoundTrip(const std::string& dtype, const std::string& shape,
                         const std::string& data) {
  const std::string json = R"({"inputs":[{"name":"x","datatype":")" + dtype + R"(","shape":)" +
                           shape + R"(,"data":)" + data + "}]}";
  auto decoded = DecodeInferRequest(std::make_shared<const std::string>(json), json.size());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  auto encoded = EncodeInferResponse(Response({decoded.value()->inputs[0]}), *decoded.value());
  ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
  EXPECT_THAT(encoded->body, HasSubstr(R"("datatype":")" + dtype + R"(","shape":)" + shape +
                                       R"(,"data":)" + data + "}"));
}

TEST(EncodeInferResponseTest, EveryDatatypeRoundTripsThroughJson) {
  ExpectJsonRoundTrip("BOOL", "[2]", "[true,false]");
  ExpectJsonRoundTrip("UINT8", "[2]", "[0,255]");
  ExpectJsonRoundTrip("UINT16", "[2]", "[0,65535]");
  ExpectJsonRoundTrip("UINT32", "[1]", "[4294967295]");
  ExpectJsonRoundTrip("UINT64", "[1]", "[18446744073709551615]");
  ExpectJsonRoundTrip("INT8", "[2]", "[-128,127]");
  ExpectJsonRoundTrip("INT16", "[2]", "[-32768,32767]");
  ExpectJsonRoundTrip("INT32", "[2]", "[-2147483648,2147483647]");
  ExpectJsonRoundTrip("INT64", "[2]", "[-9223372036854775808,9223372036854775807]");
  ExpectJsonRoundTrip("FP16", "[4]", "[1,0.5,-2,65504]");
  ExpectJsonRoundTrip("BF16", "[3]", "[1,-2,0.5]");
  ExpectJsonRoundTrip("FP32", "[2,2]", "[0.1,-3e+38,1e-45,16777216]");
  ExpectJsonRoundTrip("FP64", "[3]", "[0.1,1e-300,-2.2250738585072014e-308]");
  ExpectJsonRoundTrip("BYTES", "[4]", R"(["abc","","\"q\"\\\n","\u0001é"])");
  ExpectJsonRoundTrip("FP32", "[0]", "[]");
}

std::string Raw(const void* p, size_t n) {
  return std::string(static_cast<const char*>(p), n);
}

TEST(EncodeInferResponseTest, BinaryOutputsFollowTheHeader) {
  InferenceRequest request;
  request.binary_data_output = true;
  std::vector<float> f{1, 2, 3};
  auto r = EncodeInferResponse(Response({MakeTensor<float>("a", DataType::kFp32, {3}, f),
                                         MakeTensor<int8_t>("b", DataType::kInt8, {2}, {-1, 1})}),
                               request);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->binary);
  const std::string header = r->body.substr(0, r->json_header_length);
  EXPECT_EQ(header,
            R"({"model_name":"m","model_version":"3","outputs":[)"
            R"({"name":"a","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}},)"
            R"({"name":"b","datatype":"INT8","shape":[2],"parameters":{"binary_data_size":2}}]})");
  EXPECT_EQ(r->body.substr(r->json_header_length), Raw(f.data(), 12) + "\xff\x01");
  EXPECT_GE(r->body.capacity(), r->body.size());
}

TEST(EncodeInferResponseTest, PerOutputBinaryChoice) {
  InferenceRequest request;
  RequestedOutput a, b;
  a.name = "a";
  a.binary_data = true;
  b.name = "b";
  request.outputs = {a, b};
  auto r = EncodeInferResponse(Response({MakeTensor<int32_t>("a", DataType::kInt32, {1}, {7}),
                                         MakeTensor<int32_t>("b", DataType::kInt32, {1}, {8})}),
                               request);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->binary);
  EXPECT_THAT(r->body.substr(0, r->json_header_length),
              HasSubstr(R"({"name":"b","datatype":"INT32","shape":[1],"data":[8]})"));
  EXPECT_EQ(r->body.size() - r->json_header_length, 4u);
}

TEST(EncodeInferResponseTest, SharedMemoryOutputsAreWrittenToTheirRegionAndCarryNoData) {
  testing::ShmObject object(64);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("out", object.key(), 0, 64).ok());
  InferenceRequest request;
  RequestedOutput a, b;
  a.name = "a";
  a.binary_data = true;  // shared memory wins, as in Triton
  a.parameters = {{"shared_memory_region", std::string("out")},
                  {"shared_memory_offset", int64_t{16}},
                  {"shared_memory_byte_size", int64_t{8}}};
  b.name = "b";
  request.outputs = {a, b};
  auto resolved = ResolveSharedMemoryOutputs({&registry, "m"}, request.outputs);
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  ASSERT_EQ(resolved->size(), 1u);

  auto r = EncodeInferResponse(Response({MakeTensor<int32_t>("a", DataType::kInt32, {2}, {7, -1}),
                                         MakeTensor<int32_t>("b", DataType::kInt32, {1}, {8})}),
                               request, *resolved);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, R"({"model_name":"m","model_version":"3","outputs":[)"
                     R"({"name":"a","datatype":"INT32","shape":[2]},)"
                     R"({"name":"b","datatype":"INT32","shape":[1],"data":[8]}]})");
  EXPECT_FALSE(r->binary);
  int32_t written[2];
  std::memcpy(written, object.data() + 16, 8);
  EXPECT_EQ(written[0], 7);
  EXPECT_EQ(written[1], -1);

  // Too large for its window: Triton's message, and no region is written.
  std::memset(object.data(), 0, 64);
  auto too_big =
      EncodeInferResponse(Response({MakeTensor<int32_t>("b", DataType::kInt32, {1}, {8}),
                                    MakeTensor<int32_t>("a", DataType::kInt32, {3}, {1, 2, 3})}),
                          request, *resolved);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(too_big.status().message(),
              HasSubstr("shared memory size specified with the request for output 'a' (8 bytes) "
                        "should be at least 12 bytes to hold the results"));
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(object.data()[i], std::byte{0});

  // A later JSON output that fails (BYTES that are not UTF-8) after a region's output: the region
  // is not written either (probe 27 saw it written before the 400).
  auto late_failure =
      EncodeInferResponse(Response({MakeTensor<int32_t>("a", DataType::kInt32, {2}, {7, -1}),
                                    MakeBytes("b", {"\xff"})}),
                          request, *resolved);
  ASSERT_FALSE(late_failure.ok());
  EXPECT_THAT(late_failure.status().message(), HasSubstr("not valid UTF-8"));
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(object.data()[i], std::byte{0});
}

TEST(EncodeInferResponseTest, BytesOutputs) {
  InferenceRequest json_request;
  auto bad = EncodeInferResponse(Response({MakeBytes("s", {"ok", "\xff"})}), json_request);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("not valid UTF-8"));
  EXPECT_THAT(bad.status().message(), HasSubstr("binary_data"));

  InferenceRequest binary_request;
  binary_request.binary_data_output = true;
  Tensor t = MakeBytes("s", {"ok", "\xff"});
  auto good = EncodeInferResponse(Response({t}), binary_request);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->body.substr(good->json_header_length), Raw(t.data, t.size_bytes));
}

TEST(EncodeInferResponseTest, RejectsOutputsThatDoNotMatchTheirShape) {
  Tensor t = MakeTensor<float>("y", DataType::kFp32, {3}, {1, 2});
  auto r = EncodeInferResponse(Response({t}), InferenceRequest());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  Tensor b = MakeBytes("s", {"a"});
  b.shape = {2};
  EXPECT_EQ(EncodeInferResponse(Response({b}), InferenceRequest()).status().code(),
            StatusCode::kInternal);
}

}  // namespace
}  // namespace harrier::kserve
