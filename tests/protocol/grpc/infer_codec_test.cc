#include "protocol/grpc/infer_codec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "util/bytes_tensor.h"
#include "util/shm_object.h"

namespace harrier::grpc_frontend {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

template <typename T>
std::string RawOf(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::string BytesLayout(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& e : elements) {
    const uint32_t n = static_cast<uint32_t>(e.size());
    out.append(reinterpret_cast<const char*>(&n), 4);  // the test host is little-endian
    out += e;
  }
  return out;
}

std::string TensorBytes(const Tensor& t) {
  return std::string(reinterpret_cast<const char*>(t.data), t.size_bytes);
}

ModelInferRequest OneInput(const std::string& dtype, std::vector<int64_t> shape) {
  ModelInferRequest r;
  r.set_model_name("m");
  auto* in = r.add_inputs();
  in->set_name("INPUT0");
  in->set_datatype(dtype);
  for (int64_t d : shape) in->add_shape(d);
  return r;
}

// One row per data type: its typed field filler and the raw bytes of the same three values.
struct TypeCase {
  const char* dtype;
  std::function<void(inference::InferTensorContents*)> fill;
  std::string raw;
};

std::vector<TypeCase> TypeCases() {
  using C = inference::InferTensorContents;
  return {
      {"BOOL",
       [](C* c) {
         for (bool b : {true, false, true}) c->add_bool_contents(b);
       },
       std::string("\x01\x00\x01", 3)},
      {"UINT8",
       [](C* c) {
         for (uint32_t v : {0u, 7u, 255u}) c->add_uint_contents(v);
       },
       RawOf<uint8_t>({0, 7, 255})},
      {"UINT16",
       [](C* c) {
         for (uint32_t v : {0u, 7u, 65535u}) c->add_uint_contents(v);
       },
       RawOf<uint16_t>({0, 7, 65535})},
      {"UINT32",
       [](C* c) {
         for (uint32_t v : {0u, 7u, 4294967295u}) c->add_uint_contents(v);
       },
       RawOf<uint32_t>({0, 7, 4294967295u})},
      {"UINT64",
       [](C* c) {
         for (uint64_t v : {0ull, 7ull, ~0ull}) c->add_uint64_contents(v);
       },
       RawOf<uint64_t>({0, 7, ~0ull})},
      {"INT8",
       [](C* c) {
         for (int v : {-128, 7, 127}) c->add_int_contents(v);
       },
       RawOf<int8_t>({-128, 7, 127})},
      {"INT16",
       [](C* c) {
         for (int v : {-32768, 7, 32767}) c->add_int_contents(v);
       },
       RawOf<int16_t>({-32768, 7, 32767})},
      {"INT32",
       [](C* c) {
         for (int v : {INT32_MIN, 7, INT32_MAX}) c->add_int_contents(v);
       },
       RawOf<int32_t>({INT32_MIN, 7, INT32_MAX})},
      {"INT64",
       [](C* c) {
         for (int64_t v : {INT64_MIN, int64_t{7}, INT64_MAX}) c->add_int64_contents(v);
       },
       RawOf<int64_t>({INT64_MIN, 7, INT64_MAX})},
      {"FP32",
       [](C* c) {
         for (float v : {1.5f, -2.25f, 1e30f}) c->add_fp32_contents(v);
       },
       RawOf<float>({1.5f, -2.25f, 1e30f})},
      {"FP64",
       [](C* c) {
         for (double v : {1.5, -2.25, 1e300}) c->add_fp64_contents(v);
       },
       RawOf<double>({1.5, -2.25, 1e300})},
      {"BYTES",
       [](C* c) {
         for (const char* s : {"a", "", "xyz"}) c->add_bytes_contents(s);
       },
       BytesLayout({"a", "", "xyz"})},
  };
}

TEST(GrpcInferCodecTest, EveryTypedDatatypeDecodesToTheRawLayoutAndEncodesBack) {
  for (const TypeCase& tc : TypeCases()) {
    SCOPED_TRACE(tc.dtype);
    // Typed in.
    ModelInferRequest typed = OneInput(tc.dtype, {1, 3});
    tc.fill(typed.mutable_inputs(0)->mutable_contents());
    auto decoded = DecodeModelInferRequest(&typed, {});
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(decoded->output_form, OutputForm::kRaw);  // typed in, raw out: as Triton answers
    ASSERT_EQ(decoded->request->inputs.size(), 1u);
    const Tensor& t = decoded->request->inputs[0];
    EXPECT_EQ(DataTypeName(t.dtype), tc.dtype);
    EXPECT_EQ(t.shape, (Shape{1, 3}));
    EXPECT_EQ(TensorBytes(t), tc.raw);

    // Typed out: the same contents as went in.
    InferenceResponse response;
    response.outputs.push_back(t);
    ModelInferResponse typed_out;
    ASSERT_TRUE(
        EncodeModelInferResponse(response, *decoded->request, 0, OutputForm::kTyped, &typed_out)
            .ok());
    EXPECT_EQ(typed_out.raw_output_contents_size(), 0);
    EXPECT_EQ(typed_out.outputs(0).contents().SerializeAsString(),
              typed.inputs(0).contents().SerializeAsString());

    // Raw in and raw out: the bytes as sent.
    ModelInferRequest raw = OneInput(tc.dtype, {1, 3});
    raw.add_raw_input_contents(tc.raw);
    auto raw_decoded = DecodeModelInferRequest(&raw, {});
    ASSERT_TRUE(raw_decoded.ok()) << raw_decoded.status().ToString();
    EXPECT_EQ(raw_decoded->output_form, OutputForm::kRaw);
    EXPECT_EQ(TensorBytes(raw_decoded->request->inputs[0]), tc.raw);
    InferenceResponse raw_response;
    raw_response.outputs.push_back(raw_decoded->request->inputs[0]);
    ModelInferResponse raw_out;
    ASSERT_TRUE(
        EncodeModelInferResponse(raw_response, *raw_decoded->request, 0, OutputForm::kRaw, &raw_out)
            .ok());
    ASSERT_EQ(raw_out.raw_output_contents_size(), 1);
    EXPECT_EQ(raw_out.raw_output_contents(0), tc.raw);
    EXPECT_EQ(raw_out.outputs(0).datatype(), tc.dtype);
    EXPECT_FALSE(raw_out.outputs(0).has_contents());
  }
}

// Outputs are raw whatever form the inputs took (Triton's clients read raw_output_contents);
// the request parameter typed_outputs asks for typed contents.
TEST(GrpcInferCodecTest, OutputsAreRawUnlessTypedOutputsIsAsked) {
  ModelInferRequest typed = OneInput("INT32", {2});
  typed.mutable_inputs(0)->mutable_contents()->add_int_contents(1);
  typed.mutable_inputs(0)->mutable_contents()->add_int_contents(2);
  auto plain = DecodeModelInferRequest(&typed, {});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->output_form, OutputForm::kRaw);

  (*typed.mutable_parameters())["typed_outputs"].set_bool_param(true);
  auto asked = DecodeModelInferRequest(&typed, {});
  ASSERT_TRUE(asked.ok()) << asked.status().ToString();
  EXPECT_EQ(asked->output_form, OutputForm::kTyped);

  // Raw inputs (decoding moves them out of the message, so each decode gets a fresh one).
  auto raw_with = [](auto set) {
    ModelInferRequest raw = OneInput("INT32", {1});
    raw.add_raw_input_contents(std::string(4, '\0'));
    set(&(*raw.mutable_parameters())["typed_outputs"]);
    return raw;
  };
  ModelInferRequest raw = raw_with([](auto* p) { p->set_bool_param(true); });
  auto raw_asked = DecodeModelInferRequest(&raw, {});
  ASSERT_TRUE(raw_asked.ok()) << raw_asked.status().ToString();
  EXPECT_EQ(raw_asked->output_form, OutputForm::kTyped);
  raw = raw_with([](auto* p) { p->set_bool_param(false); });
  auto raw_plain = DecodeModelInferRequest(&raw, {});
  ASSERT_TRUE(raw_plain.ok()) << raw_plain.status().ToString();
  EXPECT_EQ(raw_plain->output_form, OutputForm::kRaw);

  raw = raw_with([](auto* p) { p->set_string_param("yes"); });
  auto bad = DecodeModelInferRequest(&raw, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'typed_outputs' must be a bool"), std::string::npos);
}

TEST(GrpcInferCodecTest, Fp16AndBf16AreRawOnlyAndForceRawResponses) {
  for (const char* dtype : {"FP16", "BF16"}) {
    SCOPED_TRACE(dtype);
    ModelInferRequest raw = OneInput(dtype, {2});
    raw.add_raw_input_contents(std::string("\x00\x3c\x00\xc0", 4));
    auto decoded = DecodeModelInferRequest(&raw, {});
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(decoded->request->inputs[0].size_bytes, 4u);

    ModelInferRequest typed = OneInput(dtype, {2});
    typed.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
    typed.mutable_inputs(0)->mutable_contents()->add_fp32_contents(2);
    auto refused = DecodeModelInferRequest(&typed, {});
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("raw_input_contents"), std::string::npos);

    // A typed response with an FP16 output is sent raw, every output of it.
    InferenceResponse response;
    response.outputs.push_back(decoded->request->inputs[0]);
    Tensor i32{"OTHER", DataType::kInt32, {1}, nullptr, 4, nullptr};
    static const int32_t kSeven = 7;
    i32.data = reinterpret_cast<const std::byte*>(&kSeven);
    response.outputs.push_back(i32);
    ModelInferResponse out;
    ASSERT_TRUE(
        EncodeModelInferResponse(response, *decoded->request, 0, OutputForm::kTyped, &out).ok());
    EXPECT_EQ(out.raw_output_contents_size(), 2);
    EXPECT_EQ(out.outputs(1).contents().int_contents_size(), 0);
  }
}

// Found by grpc_infer_request_fuzzer: an FP16 or BF16 input without elements has nothing to
// send, so it has no contents either way; it used to fail as kInternal ("DecodeTyped:
// unexpected datatype") instead of decoding to an empty tensor as every other datatype does.
TEST(GrpcInferCodecTest, Fp16AndBf16InputsWithoutElementsDecodeEmpty) {
  for (const char* dtype : {"FP16", "BF16"}) {
    SCOPED_TRACE(dtype);
    ModelInferRequest request = OneInput(dtype, {0, 3});
    (*request.mutable_parameters())["typed_outputs"].set_bool_param(true);
    auto decoded = DecodeModelInferRequest(&request, {});
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(decoded->output_form, OutputForm::kTyped);
    const Tensor& t = decoded->request->inputs[0];
    EXPECT_EQ(t.shape, (std::vector<int64_t>{0, 3}));
    EXPECT_EQ(t.size_bytes, 0u);

    // Its echo goes back raw, as FP16 and BF16 outputs always do.
    InferenceResponse response;
    response.outputs.push_back(t);
    ModelInferResponse out;
    ASSERT_TRUE(
        EncodeModelInferResponse(response, *decoded->request, 0, decoded->output_form, &out).ok());
    ASSERT_EQ(out.raw_output_contents_size(), 1);
    EXPECT_TRUE(out.raw_output_contents(0).empty());
  }
}

TEST(GrpcInferCodecTest, RawInputsAreMovedNotCopied) {
  ModelInferRequest r = OneInput("FP32", {1024});
  r.add_raw_input_contents(std::string(4096, '\x01'));
  const char* original = r.raw_input_contents(0).data();
  auto decoded = DecodeModelInferRequest(&r, {});
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(r.raw_input_contents_size(), 0);
  const Tensor& t = decoded->request->inputs[0];
  EXPECT_EQ(reinterpret_cast<const char*>(t.data), original);
  EXPECT_NE(t.owner, nullptr);
  r.Clear();  // the tensor does not depend on the message any more
  EXPECT_EQ(static_cast<char>(t.data[4095]), '\x01');
}

// Triton takes any uint64 priority; one past int64's range, like one past the model's levels,
// asks for the default level (probe 30: it was refused).
TEST(GrpcInferCodecTest, AnyUint64PriorityIsTaken) {
  ModelInferRequest r = OneInput("INT32", {1});
  r.add_raw_input_contents(RawOf<int32_t>({5}));
  (*r.mutable_parameters())["priority"].set_uint64_param(std::numeric_limits<uint64_t>::max());
  auto decoded = DecodeModelInferRequest(&r, {});
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->request->priority, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
}

TEST(GrpcInferCodecTest, HeaderFieldsParametersAndOutputs) {
  ModelInferRequest r = OneInput("INT32", {1});
  r.set_model_version("3");
  r.set_id("req-7");
  r.add_raw_input_contents(RawOf<int32_t>({5}));
  (*r.mutable_parameters())["priority"].set_int64_param(2);
  (*r.mutable_parameters())["timeout"].set_uint64_param(1500);
  (*r.mutable_parameters())["flag"].set_bool_param(true);
  (*r.mutable_parameters())["ratio"].set_double_param(0.5);
  (*r.mutable_parameters())["note"].set_string_param("x");
  auto* out = r.add_outputs();
  out->set_name("OUT");
  (*out->mutable_parameters())["classification"].set_int64_param(3);
  (*out->mutable_parameters())["binary_data"].set_bool_param(true);
  auto decoded = DecodeModelInferRequest(&r, {});
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const InferenceRequest& req = *decoded->request;
  EXPECT_EQ(req.model_name, "m");
  EXPECT_EQ(req.model_version, std::optional<int64_t>(3));
  EXPECT_EQ(req.id, "req-7");
  EXPECT_EQ(req.priority, 2u);
  EXPECT_EQ(req.timeout_us, 1500u);
  EXPECT_EQ(std::get<bool>(req.parameters.at("flag")), true);
  EXPECT_EQ(std::get<double>(req.parameters.at("ratio")), 0.5);
  EXPECT_EQ(std::get<std::string>(req.parameters.at("note")), "x");
  ASSERT_EQ(req.outputs.size(), 1u);
  EXPECT_EQ(req.outputs[0].name, "OUT");
  EXPECT_EQ(req.outputs[0].classification, 3);
}

TEST(GrpcInferCodecTest, EncodeSetsHeaderAndClassifies) {
  InferenceRequest selection;
  selection.model_name = "m";
  selection.id = "req-1";
  RequestedOutput top;
  top.name = "SCORES";
  top.classification = 2;
  selection.outputs.push_back(top);
  static const float kScores[] = {0.1f, 0.7f, 0.2f};
  InferenceResponse response;
  response.model_version = 4;
  response.parameters["sequence_end"] = true;
  response.outputs.push_back({"SCORES",
                              DataType::kFp32,
                              {3},
                              reinterpret_cast<const std::byte*>(kScores),
                              sizeof(kScores),
                              nullptr});
  ModelInferResponse out;
  ASSERT_TRUE(EncodeModelInferResponse(response, selection, 0, OutputForm::kRaw, &out).ok());
  EXPECT_EQ(out.model_name(), "m");
  EXPECT_EQ(out.model_version(), "4");
  EXPECT_EQ(out.id(), "req-1");
  EXPECT_TRUE(out.parameters().at("sequence_end").bool_param());
  EXPECT_EQ(out.outputs(0).datatype(), "BYTES");
  EXPECT_EQ(out.outputs(0).shape_size(), 1);
  EXPECT_EQ(out.outputs(0).shape(0), 2);
  Tensor classified{"SCORES",
                    DataType::kBytes,
                    {2},
                    reinterpret_cast<const std::byte*>(out.raw_output_contents(0).data()),
                    out.raw_output_contents(0).size(),
                    nullptr};
  const std::vector<std::string> entries = testing::Strings(classified);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].substr(entries[0].find(':')), ":1");
  EXPECT_EQ(entries[1].substr(entries[1].find(':')), ":2");
}

TEST(GrpcInferCodecTest, EncodeRefusesOutputsWhoseBytesDoNotMatchTheShape) {
  static const int32_t kTwo[] = {1, 2};
  InferenceResponse response;
  response.outputs.push_back({"O",
                              DataType::kInt32,
                              {3},
                              reinterpret_cast<const std::byte*>(kTwo),
                              sizeof(kTwo),
                              nullptr});
  ModelInferResponse out;
  Status s = EncodeModelInferResponse(response, InferenceRequest{}, 0, OutputForm::kTyped, &out);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
}

struct BadCase {
  const char* what;
  std::function<void(ModelInferRequest*)> mutate;
  StatusCode code;
  const char* message_part;
};

TEST(GrpcInferCodecTest, BadRequestsAreRefusedWithTheirCode) {
  const BadCase cases[] = {
      {"empty model name", [](ModelInferRequest* r) { r->clear_model_name(); },
       StatusCode::kInvalidArgument, "model_name"},
      {"bad version", [](ModelInferRequest* r) { r->set_model_version("1x"); },
       StatusCode::kInvalidArgument, "version"},
      {"zero version", [](ModelInferRequest* r) { r->set_model_version("0"); },
       StatusCode::kInvalidArgument, "version"},
      {"unknown datatype", [](ModelInferRequest* r) { r->mutable_inputs(0)->set_datatype("FP8"); },
       StatusCode::kInvalidArgument, "datatype 'FP8'"},
      {"lower-case datatype",
       [](ModelInferRequest* r) { r->mutable_inputs(0)->set_datatype("int32"); },
       StatusCode::kInvalidArgument, "datatype"},
      {"negative dim", [](ModelInferRequest* r) { r->mutable_inputs(0)->set_shape(1, -2); },
       StatusCode::kInvalidArgument, "negative"},
      {"too many elements",
       [](ModelInferRequest* r) { r->mutable_inputs(0)->set_shape(1, int64_t{1} << 40); },
       StatusCode::kPayloadTooLarge, "claims more than"},
      {"too many dims",
       [](ModelInferRequest* r) {
         for (int i = 0; i < 40; ++i) r->mutable_inputs(0)->add_shape(1);
       },
       StatusCode::kInvalidArgument, "dimensions"},
      {"raw too short", [](ModelInferRequest* r) { r->mutable_raw_input_contents(0)->resize(7); },
       StatusCode::kInvalidArgument, "holds 7 bytes"},
      {"raw too long", [](ModelInferRequest* r) { r->mutable_raw_input_contents(0)->append("x"); },
       StatusCode::kInvalidArgument, "needs 8"},
      {"raw count", [](ModelInferRequest* r) { r->add_raw_input_contents("x"); },
       StatusCode::kInvalidArgument, "one per input"},
      {"raw and typed mixed",
       [](ModelInferRequest* r) { r->mutable_inputs(0)->mutable_contents()->add_int_contents(1); },
       StatusCode::kInvalidArgument,
       "contents field must not be specified when using "
       "raw_input_contents for"},
      // What grpc_explicit_int_content_client.py sends: fewer raw entries than inputs, and
      // the input without one in typed contents. Triton's words, not a count.
      {"raw for one input and typed for another",
       [](ModelInferRequest* r) {
         auto* in = r->add_inputs();
         in->set_name("B");
         in->set_datatype("INT32");
         in->add_shape(2);
         in->mutable_contents()->add_int_contents(1);
         in->mutable_contents()->add_int_contents(2);
         r->mutable_inputs(0)->mutable_contents()->add_int_contents(1);
       },
       StatusCode::kInvalidArgument,
       "contents field must not be specified when using "
       "raw_input_contents for '"},
      {"typed in the wrong field",
       [](ModelInferRequest* r) {
         r->clear_raw_input_contents();
         for (int i = 0; i < 2; ++i) r->mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
       },
       StatusCode::kInvalidArgument, "int_contents"},
      {"typed count",
       [](ModelInferRequest* r) {
         r->clear_raw_input_contents();
         r->mutable_inputs(0)->mutable_contents()->add_int_contents(1);
       },
       StatusCode::kInvalidArgument, "has 1 elements"},
      {"no data at all", [](ModelInferRequest* r) { r->clear_raw_input_contents(); },
       StatusCode::kInvalidArgument, "has 0 elements"},
      {"typed out of range",
       [](ModelInferRequest* r) {
         r->clear_raw_input_contents();
         r->mutable_inputs(0)->set_datatype("INT8");
         r->mutable_inputs(0)->mutable_contents()->add_int_contents(1);
         r->mutable_inputs(0)->mutable_contents()->add_int_contents(200);
       },
       StatusCode::kInvalidArgument, "out of range"},
      {"duplicate input",
       [](ModelInferRequest* r) {
         *r->add_inputs() = r->inputs(0);
         r->add_raw_input_contents(r->raw_input_contents(0));
       },
       StatusCode::kInvalidArgument, "input 'INPUT0' already exists in request"},
      {"nameless input", [](ModelInferRequest* r) { r->mutable_inputs(0)->clear_name(); },
       StatusCode::kInvalidArgument, "no name"},
      {"duplicate output",
       [](ModelInferRequest* r) {
         r->add_outputs()->set_name("O");
         r->add_outputs()->set_name("O");
       },
       StatusCode::kInvalidArgument, "Duplicate output name 'O' is not allowed in a request"},
      {"bad classification",
       [](ModelInferRequest* r) {
         auto* o = r->add_outputs();
         o->set_name("O");
         (*o->mutable_parameters())["classification"].set_string_param("3");
       },
       StatusCode::kInvalidArgument, "parameter 'classification' must be an integer >= 0"},
      {"negative classification",
       [](ModelInferRequest* r) {
         auto* o = r->add_outputs();
         o->set_name("O");
         (*o->mutable_parameters())["classification"].set_int64_param(-1);
       },
       StatusCode::kInvalidArgument, "parameter 'classification' must be an integer >= 0"},
      {"parameter without value", [](ModelInferRequest* r) { (*r->mutable_parameters())["x"]; },
       StatusCode::kInvalidArgument, "has no value"},
      {"uint64 parameter over int64",
       [](ModelInferRequest* r) {
         (*r->mutable_parameters())["x"].set_uint64_param(std::numeric_limits<uint64_t>::max());
       },
       StatusCode::kInvalidArgument, "2^63-1"},
      {"negative priority",
       [](ModelInferRequest* r) { (*r->mutable_parameters())["priority"].set_int64_param(-1); },
       StatusCode::kInvalidArgument, "priority"},
      {"malformed BYTES",
       [](ModelInferRequest* r) {
         r->mutable_inputs(0)->set_datatype("BYTES");
         *r->mutable_raw_input_contents(0) = std::string("\x05\x00\x00\x00x", 5);
       },
       StatusCode::kInvalidArgument, "INPUT0"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    ModelInferRequest r = OneInput("INT32", {1, 2});
    r.add_raw_input_contents(RawOf<int32_t>({1, 2}));
    c.mutate(&r);
    auto decoded = DecodeModelInferRequest(&r, {});
    ASSERT_FALSE(decoded.ok());
    EXPECT_EQ(decoded.status().code(), c.code) << decoded.status().ToString();
    EXPECT_NE(decoded.status().message().find(c.message_part), std::string::npos)
        << decoded.status().message();
  }
}

TEST(GrpcInferCodecTest, TotalInputBytesLimit) {
  ModelInferRequest r = OneInput("UINT8", {100});
  r.add_raw_input_contents(std::string(100, 'x'));
  kserve::DecodeLimits limits;
  limits.max_total_input_bytes = 99;
  auto decoded = DecodeModelInferRequest(&r, limits);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kPayloadTooLarge);
}

TEST(GrpcInferCodecTest, ModelVersionParsing) {
  EXPECT_EQ(*ParseModelVersion(""), std::nullopt);
  EXPECT_EQ(*ParseModelVersion("12"), std::optional<int64_t>(12));
  for (const char* bad : {"0", "-1", "+1", "1.0", " 1", "abc", "99999999999999999999"})
    EXPECT_FALSE(ParseModelVersion(bad).ok()) << bad;
  // Triton's words, which grpc_explicit_int8_content_client.py matches.
  EXPECT_EQ(ParseModelVersion("wrong_specification").status().message(),
            "failed to get model version from specified version string 'wrong_specification': "
            "it must be empty or a positive integer");
}

// Triton's system shared memory: raw_input_contents belong, in order, to the inputs not in
// shared memory; an output in shared memory is written there and keeps an empty raw entry.
TEST(GrpcInferCodecTest, SharedMemoryInputsAndOutputs) {
  harrier::testing::ShmObject object(4096);
  const std::vector<int32_t> a = {1, 2, 3, 4};
  std::memcpy(object.data() + 8, a.data(), 16);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 4096).ok());
  const SharedMemoryContext shm{&registry, "m"};

  auto request = [] {
    ModelInferRequest r;
    r.set_model_name("m");
    for (const char* name : {"A", "B"}) {
      auto* in = r.add_inputs();
      in->set_name(name);
      in->set_datatype("INT32");
      in->add_shape(4);
    }
    auto& p = *r.mutable_inputs(0)->mutable_parameters();
    p["shared_memory_region"].set_string_param("r");
    p["shared_memory_offset"].set_int64_param(8);
    p["shared_memory_byte_size"].set_int64_param(16);
    r.add_raw_input_contents(RawOf<int32_t>({5, 6, 7, 8}));  // B's
    auto* out = r.add_outputs();
    out->set_name("A");
    (*out->mutable_parameters())["shared_memory_region"].set_string_param("r");
    (*out->mutable_parameters())["shared_memory_offset"].set_int64_param(1024);
    (*out->mutable_parameters())["shared_memory_byte_size"].set_uint64_param(16);
    r.add_outputs()->set_name("B");
    return r;
  };
  ModelInferRequest r = request();
  auto decoded = DecodeModelInferRequest(&r, {}, shm);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const Tensor& in_a = decoded->request->inputs[0];
  EXPECT_EQ(in_a.data, registry.Window("r", 8, 16)->data);  // a view into the server's mapping
  EXPECT_EQ(TensorBytes(in_a), RawOf(a));
  EXPECT_EQ(TensorBytes(decoded->request->inputs[1]), RawOf<int32_t>({5, 6, 7, 8}));

  auto outputs = ResolveSharedMemoryOutputs(shm, decoded->request->outputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
  InferenceResponse response;
  response.outputs = {decoded->request->inputs[0], decoded->request->inputs[1]};
  ModelInferResponse out;
  ASSERT_TRUE(
      EncodeModelInferResponse(response, *decoded->request, 0, OutputForm::kRaw, &out, *outputs)
          .ok());
  ASSERT_EQ(out.outputs_size(), 2);
  EXPECT_EQ(out.outputs(0).name(), "A");
  EXPECT_EQ(out.outputs(0).datatype(), "INT32");
  EXPECT_EQ(out.outputs(0).shape(0), 4);
  ASSERT_EQ(out.raw_output_contents_size(), 2);  // one per output, as Triton's clients index
  EXPECT_EQ(out.raw_output_contents(0), "");
  EXPECT_EQ(out.raw_output_contents(1), RawOf<int32_t>({5, 6, 7, 8}));
  EXPECT_EQ(std::memcmp(object.data() + 1024, a.data(), 16), 0);

  // Refusals.
  auto refused = [&](const std::function<void(ModelInferRequest*)>& change,
                     const std::string& fragment) {
    ModelInferRequest bad = request();
    change(&bad);
    auto d = DecodeModelInferRequest(&bad, {}, shm);
    ASSERT_FALSE(d.ok()) << fragment;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(d.status().message().find(fragment), std::string::npos) << d.status().ToString();
  };
  refused(
      [](ModelInferRequest* q) {
        q->add_raw_input_contents(RawOf<int32_t>({1, 1, 1, 1}));
      },
      "raw_input_contents has 2 entries but the request has 1 inputs not in shared memory");
  refused(
      [](ModelInferRequest* q) {
        (*q->mutable_inputs(0)->mutable_parameters())["shared_memory_byte_size"].set_int64_param(
            12);
      },
      "input byte size mismatch for input 'A' for model 'm'. Expected 16, got 12");
  refused(
      [](ModelInferRequest* q) {
        (*q->mutable_inputs(0)->mutable_parameters())["shared_memory_region"].set_string_param(
            "nope");
      },
      "Unable to find shared memory region: 'nope'");
  refused(
      [](ModelInferRequest* q) {
        (*q->mutable_inputs(0)->mutable_parameters())["shared_memory_offset"].set_int64_param(4090);
      },
      "Invalid offset + byte size for shared memory region: 'r'");
  refused(
      [](ModelInferRequest* q) { q->mutable_inputs(0)->mutable_contents()->add_int_contents(1); },
      "has shared memory parameters and also typed contents");
  ModelInferRequest off = request();
  auto d = DecodeModelInferRequest(&off, {});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("--allow-client-shm=true"), std::string::npos);

  // An output too large for its window.
  Tensor big = decoded->request->inputs[1];
  big.name = "A";
  big.shape = {8};
  const std::vector<int32_t> eight(8, 9);
  big.data = reinterpret_cast<const std::byte*>(eight.data());
  big.size_bytes = 32;
  InferenceResponse too_big;
  too_big.outputs = {big};
  ModelInferResponse out2;
  Status s =
      EncodeModelInferResponse(too_big, *decoded->request, 0, OutputForm::kRaw, &out2, *outputs);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("(16 bytes) should be at least 32 bytes"), std::string::npos);
}

}  // namespace
}  // namespace harrier::grpc_frontend
