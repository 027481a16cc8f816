// KServe v2 codec micro-benchmarks: decoding requests and encoding responses for the two models
// of the benchmark kit (../shared/bench): ResNet-50's input, FP32 [1,3,224,224], and the tiny
// model's, FP32 [1,16]; as JSON and with the binary tensor extension.
//
// JSON values are written the way Python clients write them: json.dumps(float(np.float32(x)))
// prints the shortest repr of the double, ~17 significant digits ("0.12345678918552399").

#include <benchmark/benchmark.h>

#include <charconv>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "protocol/kserve/infer_request_decoder.h"
#include "protocol/kserve/infer_response_encoder.h"

namespace harrier::kserve {
namespace {

constexpr int64_t kResnetElements = 3 * 224 * 224;
constexpr int64_t kTinyElements = 16;

std::vector<float> RandomFloats(int64_t n) {
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

std::string ShapeJson(int64_t n) {
  return n == kResnetElements ? "[1,3,224,224]" : "[1," + std::to_string(n) + "]";
}

// A body as a front end would hand it over: capacity for the parser's padding reserved.
std::shared_ptr<const std::string> Padded(const std::string& s, bool reserve_padding) {
  auto body = std::make_shared<std::string>();
  body->reserve(s.size() + (reserve_padding ? kJsonPaddingBytes : 0));
  body->append(s);
  return body;
}

std::string JsonBody(int64_t n) {
  std::string json =
      R"({"inputs":[{"name":"INPUT0","shape":)" + ShapeJson(n) + R"(,"datatype":"FP32","data":[)";
  char buf[32];
  bool first = true;
  for (float f : RandomFloats(n)) {
    if (!first) json += ", ";  // Python's default separator
    first = false;
    auto r = std::to_chars(buf, buf + sizeof(buf), static_cast<double>(f));
    json.append(buf, r.ptr);
  }
  json += "]}]}";
  return json;
}

std::string BinaryHeader(int64_t n) {
  return R"({"inputs":[{"name":"INPUT0","shape":)" + ShapeJson(n) +
         R"(,"datatype":"FP32","parameters":{"binary_data_size":)" + std::to_string(n * 4) +
         R"(}}],"parameters":{"binary_data_output":true}})";
}

void BM_DecodeJson(benchmark::State& state) {
  const int64_t n = state.range(0);
  const bool padded = state.range(1) != 0;
  auto body = Padded(JsonBody(n), padded);
  for (auto _ : state) {
    auto r = DecodeInferRequest(body, body->size());
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(body->size()));
  state.counters["body_bytes"] = static_cast<double>(body->size());
}
BENCHMARK(BM_DecodeJson)
    ->ArgNames({"elements", "padded"})
    ->Args({kTinyElements, 1})
    ->Args({kResnetElements, 1})
    ->Args({kResnetElements, 0})
    ->Unit(benchmark::kMicrosecond);

void BM_DecodeBinary(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::string header = BinaryHeader(n);
  const std::vector<float> values = RandomFloats(n);
  auto body = Padded(header + std::string(reinterpret_cast<const char*>(values.data()), n * 4),
                     false);  // the binary tail is the padding
  for (auto _ : state) {
    auto r = DecodeInferRequest(body, header.size());
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(body->size()));
}
BENCHMARK(BM_DecodeBinary)
    ->ArgName("elements")
    ->Arg(kTinyElements)
    ->Arg(kResnetElements)
    ->Unit(benchmark::kMicrosecond);

// Encodes the same tensor as a response output (the tiny model's output has its input's shape).
void Encode(benchmark::State& state, bool binary) {
  const int64_t n = state.range(0);
  auto values = std::make_shared<std::vector<float>>(RandomFloats(n));
  InferenceResponse response;
  response.model_name = "resnet50";
  response.model_version = 1;
  Tensor t;
  t.name = "OUTPUT0";
  t.dtype = DataType::kFp32;
  t.shape = n == kResnetElements ? Shape{1, 3, 224, 224} : Shape{1, n};
  t.data = reinterpret_cast<const std::byte*>(values->data());
  t.size_bytes = static_cast<size_t>(n) * 4;
  t.owner = values;
  response.outputs.push_back(t);
  InferenceRequest request;
  request.binary_data_output = binary;
  size_t size = 0;
  for (auto _ : state) {
    auto r = EncodeInferResponse(response, request);
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    size = r->body.size();
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(size));
  state.counters["body_bytes"] = static_cast<double>(size);
}

void BM_EncodeJson(benchmark::State& state) {
  Encode(state, false);
}
void BM_EncodeBinary(benchmark::State& state) {
  Encode(state, true);
}
BENCHMARK(BM_EncodeJson)
    ->ArgName("elements")
    ->Arg(kTinyElements)
    ->Arg(kResnetElements)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EncodeBinary)
    ->ArgName("elements")
    ->Arg(kTinyElements)
    ->Arg(kResnetElements)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace harrier::kserve

BENCHMARK_MAIN();
