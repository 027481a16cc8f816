// libFuzzer target: config.pbtxt as the model repository reads it. The input is the file's
// text: ParseModelConfig, then ValidateModelConfig (the check a config override gets), the
// version policy against a fixed set of version directories, and AutoCompleteConfig against
// three synthetic model signatures (what Backend::Inspect would report of an ONNX file: a
// batchable classifier, a model with fixed and scalar shapes, a model with no tensors), then
// ModelConfigToJson of each completed config (GET /v2/models/{m}/config).
//
// Findings besides the sanitizers': an error code the functions do not document; a completed
// config that ValidateModelConfig refuses; a completed config that, written back as
// config.pbtxt (as users copy it from the config endpoint), does not parse or does not
// complete to itself; a version selection out of order or naming a version that is not there.
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "repository/config_autocomplete.h"
#include "repository/config_json.h"
#include "repository/config_validation.h"
#include "repository/model_config_parser.h"
#include "repository/version_policy.h"

namespace {

using harrier::DataType;
using harrier::ModelSignature;
using harrier::Status;
using harrier::StatusCode;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "model_config_fuzzer: %s\n", what.c_str());
  std::abort();
}

void ExpectCodes(const Status& s, const char* what) {
  if (s.ok() || s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kUnimplemented)
    return;
  Fail(std::string(what) + " failed with an undocumented code: " + s.ToString());
}

std::vector<ModelSignature> Signatures() {
  ModelSignature classifier;
  classifier.inputs = {{"INPUT0", DataType::kFp32, {-1, 3, 8, 8}}};
  classifier.outputs = {{"OUTPUT0", DataType::kFp32, {-1, 10}}};
  ModelSignature fixed;
  fixed.inputs = {{"x", DataType::kInt64, {2, 2}}, {"text", DataType::kBytes, {-1}}};
  fixed.outputs = {{"score", DataType::kFp32, {}}, {"mask", DataType::kBool, {2, -1}}};
  return {classifier, fixed, ModelSignature{}};
}

std::string Deterministic(const inference::ModelConfig& config) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  config.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<ModelSignature> signatures = Signatures();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = harrier::ParseModelConfig(text, "config.pbtxt");
  if (!parsed.ok()) {
    if (parsed.status().code() != StatusCode::kInvalidArgument ||
        parsed.status().message().rfind("config.pbtxt:", 0) != 0)
      Fail("a parse error not in the documented form: " + parsed.status().ToString());
    return 0;
  }
  ExpectCodes(harrier::ValidateModelConfig(*parsed), "ValidateModelConfig");

  const harrier::VersionSelection versions =
      harrier::SelectVersions(parsed->version_policy(), {3, 1, 2, 2, 7});
  for (const auto* list : {&versions.selected, &versions.missing}) {
    if (!std::is_sorted(list->begin(), list->end()) ||
        std::adjacent_find(list->begin(), list->end()) != list->end())
      Fail("SelectVersions returned versions out of order or twice");
  }
  for (int64_t v : versions.selected) {
    if (v != 1 && v != 2 && v != 3 && v != 7) Fail("SelectVersions selected a missing version");
  }

  harrier::AutoCompleteOptions options;
  options.default_model_filename = "model.onnx";
  for (const ModelSignature& signature : signatures) {
    inference::ModelConfig config = *parsed;
    const Status completed = harrier::AutoCompleteConfig(signature, "model", "onnxruntime",
                                                         "onnxruntime_onnx", &config, options);
    ExpectCodes(completed, "AutoCompleteConfig");
    if (!completed.ok()) continue;
    const Status valid = harrier::ValidateModelConfig(config);
    if (!valid.ok()) Fail("a completed config does not validate: " + valid.ToString());
    if (harrier::ModelConfigToJson(config).empty()) Fail("ModelConfigToJson wrote nothing");

    std::string written;
    if (!google::protobuf::TextFormat::PrintToString(config, &written))
      Fail("a completed config cannot be printed");
    auto reread = harrier::ParseModelConfig(written, "completed.pbtxt");
    if (!reread.ok()) Fail("a completed config, written out, does not parse: " + written);
    const Status again = harrier::AutoCompleteConfig(signature, "model", "onnxruntime",
                                                     "onnxruntime_onnx", &*reread, options);
    if (!again.ok()) Fail("a completed config does not complete again: " + again.ToString());
    if (Deterministic(*reread) != Deterministic(config))
      Fail("completing a completed config changed it:\n" + written);
  }
  return 0;
}
