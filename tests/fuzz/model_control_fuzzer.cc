// libFuzzer target: the body of POST /v2/repository/models/{m}/load and /unload as the load
// takes it apart before anything is written or loaded (docs/model-lifecycle.md, "The load and
// unload API"): ParseModelControlParameters (the JSON, "parameters.config", the base64
// "file:<path>" parameters), then, for a load, ValidateFileOverrides (the path rules, the file
// cap, the config Triton demands beside files) and ParseModelConfigJson of the config, then what
// the load does with that config: SelectVersions over the versions the files name,
// AutoCompleteConfig against a synthetic model signature, ValidateModelConfig. No model is
// loaded and no file is written.
//
// Findings besides the sanitizers': an error code the functions do not document (each refuses
// with kInvalidArgument only); an unload body that yields load options; accepted file paths that
// break a rule ValidateFileOverrides documents, read plainly here, or versions that are not the
// ones the paths name, ascending; a version selection out of order or naming a version the files
// do not; a completed config that does not validate, or whose JSON (GET /v2/models/{m}/config,
// which a client may send back as parameters.config) does not parse back to the same config.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/kserve/model_control_parameters.h"
#include "repository/config_autocomplete.h"
#include "repository/config_json.h"
#include "repository/config_validation.h"
#include "repository/override_directory.h"
#include "repository/repository_scan.h"
#include "repository/version_policy.h"

namespace {

using harrier::Status;
using harrier::StatusCode;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "model_control_fuzzer: %s\n", what.c_str());
  std::abort();
}

void ExpectInvalidArgument(const Status& s, const char* what) {
  if (s.ok() || s.code() == StatusCode::kInvalidArgument) return;
  Fail(std::string(what) + " failed with an undocumented code: " + s.ToString());
}

// ValidateModelConfig and AutoCompleteConfig: kUnimplemented too (another backend, a GPU).
void ExpectConfigCodes(const Status& s, const char* what) {
  if (s.code() == StatusCode::kUnimplemented) return;
  ExpectInvalidArgument(s, what);
}

// ValidateFileOverrides' rules for one accepted path, read plainly: 1 to 1024 bytes, no NUL,
// segments split on '/' none empty, "." or "..", and either <version>/<name>... with a version
// as the scan reads it, or one top-level name that is neither a version nor config.pbtxt.
void CheckAcceptedPath(const std::string& path) {
  if (path.empty() || path.size() > 1024)
    Fail("an accepted path of " + std::to_string(path.size()) + " bytes");
  if (path.find('\0') != std::string::npos) Fail("an accepted path holds a NUL byte");
  std::vector<std::string> segments;
  size_t start = 0;
  for (;;) {
    const size_t slash = path.find('/', start);
    segments.push_back(path.substr(start, slash == std::string::npos ? slash : slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  for (const std::string& s : segments) {
    if (s.empty() || s == "." || s == "..")
      Fail("an accepted path with segment '" + s + "': " + path);
  }
  const int64_t version = harrier::ParseVersionDirectoryName(segments.front());
  if (segments.size() > 1 && version <= 0) Fail("an accepted path without a version: " + path);
  if (segments.size() == 1 && (version > 0 || segments.front() == "config.pbtxt"))
    Fail("an accepted top-level file named like a version or the config: " + path);
  if (segments.size() > 1 && std::to_string(version) != segments.front())
    Fail("an accepted version that is not written as its number: " + path);
}

std::string Deterministic(const inference::ModelConfig& config) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);  // `parameters` is a map
  config.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

}  // namespace

// The input: one byte (even: load, odd: unload), then the body.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto action = data[0] % 2 ? harrier::kserve::ModelControlAction::kUnload
                                  : harrier::kserve::ModelControlAction::kLoad;
  auto body =
      std::make_shared<const std::string>(reinterpret_cast<const char*>(data + 1), size - 1);
  auto parsed = harrier::kserve::ParseModelControlParameters(body, action);
  if (!parsed.ok()) {
    ExpectInvalidArgument(parsed.status(), "ParseModelControlParameters");
    return 0;
  }
  if (action == harrier::kserve::ModelControlAction::kUnload) {
    if (parsed->config_json || !parsed->files.empty()) Fail("an unload body gave load options");
    return 0;
  }

  auto versions = harrier::ValidateFileOverrides(parsed->files, parsed->config_json.has_value());
  if (!versions.ok()) {
    ExpectInvalidArgument(versions.status(), "ValidateFileOverrides");
    return 0;
  }
  if (parsed->files.size() > harrier::kMaxFileOverrides) Fail("more files accepted than the cap");
  if (!parsed->files.empty() && !parsed->config_json) Fail("files accepted without a config");
  std::set<std::string> paths;
  std::set<int64_t> named;
  for (const harrier::ModelFileOverride& file : parsed->files) {
    CheckAcceptedPath(file.path);
    if (!paths.insert(file.path).second) Fail("a path accepted twice: " + file.path);
    if (file.path.find('/') != std::string::npos)
      named.insert(harrier::ParseVersionDirectoryName(file.path.substr(0, file.path.find('/'))));
  }
  for (const std::string& path : paths) {
    if (paths.lower_bound(path + "/") != paths.end() &&
        paths.lower_bound(path + "/")->rfind(path + "/", 0) == 0)
      Fail("an accepted path that is also another's directory: " + path);
  }
  if (std::vector<int64_t>(named.begin(), named.end()) != *versions)
    Fail("ValidateFileOverrides returned other versions than the paths name");
  if (!parsed->files.empty() && versions->empty()) Fail("files accepted that name no version");

  if (!parsed->config_json) return 0;
  auto config = harrier::ParseModelConfigJson(*parsed->config_json);
  if (!config.ok()) {
    ExpectInvalidArgument(config.status(), "ParseModelConfigJson");
    return 0;
  }
  ExpectConfigCodes(harrier::ValidateModelConfig(*config), "ValidateModelConfig");
  // The versions the load would choose among: the files', or a repository's.
  const std::vector<int64_t> available =
      versions->empty() ? std::vector<int64_t>{1, 2, 3} : *versions;
  const harrier::VersionSelection selection =
      harrier::SelectVersions(config->version_policy(), available);
  for (const auto* list : {&selection.selected, &selection.missing}) {
    if (!std::is_sorted(list->begin(), list->end()) ||
        std::adjacent_find(list->begin(), list->end()) != list->end())
      Fail("SelectVersions returned versions out of order or twice");
  }
  for (int64_t v : selection.selected) {
    if (std::find(available.begin(), available.end(), v) == available.end())
      Fail("SelectVersions selected a version the files do not name");
  }

  // As the loader completes it from the model file: a batchable classifier's signature.
  harrier::ModelSignature signature;
  signature.inputs = {{"INPUT0", harrier::DataType::kFp32, {-1, 3, 8, 8}}};
  signature.outputs = {{"OUTPUT0", harrier::DataType::kFp32, {-1, 10}}};
  harrier::AutoCompleteOptions options;
  options.default_model_filename = "model.onnx";
  inference::ModelConfig completed = *config;
  const Status complete = harrier::AutoCompleteConfig(signature, "model", "onnxruntime",
                                                      "onnxruntime_onnx", &completed, options);
  if (!complete.ok()) {
    ExpectConfigCodes(complete, "AutoCompleteConfig");
    return 0;
  }
  const Status valid = harrier::ValidateModelConfig(completed);
  if (!valid.ok()) Fail("a completed config does not validate: " + valid.ToString());
  const std::string json = harrier::ModelConfigToJson(completed);
  auto reread = harrier::ParseModelConfigJson(json);
  if (!reread.ok())
    Fail("the config endpoint's JSON does not parse as a config: " + json + "\n" +
         reread.status().ToString());
  if (Deterministic(*reread) != Deterministic(completed))
    Fail("the config endpoint's JSON parses to another config: " + json);
  return 0;
}
