// BackendRegistry: the engines this build of the server has — tensor backends (Backend: ONNX
// Runtime) and text generators (GenerativeBackend: llama.cpp) — each known by its name, its
// platform and its default model file, and the choice of one for each model version. main.cc
// registers what the build has; ModelLoader asks per version, so that backends are chosen per
// model, not one for the whole server.
//
// The choice for a version (its config, its directory):
//   1. the config's `backend` or `platform` is a registered generator's: that generator;
//   2. the config's `backend` is a generator this build does not have (KnownGenerators():
//      "llama.cpp"): a text generator that cannot be loaded (Choice::missing says which);
//   3. the config names a backend or a platform: the tensor backend of that name or platform,
//      else the default one (the first registered), which auto-complete then finds at odds with
//      the config; a `backend` that is no engine's name is Choice::unknown as well;
//   4. neither: a registered generator whose model file (the config's default_model_filename, or
//      the generator's) is in the directory while no tensor backend's default file is; for a
//      generator this build lacks, its default file ("model.gguf"); then
//   5. a tensor backend whose default file is in the directory, else the default one.
//
// Thread safety: Add*() before the first Choose(); then const and safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "harrier/backend.h"
#include "repository/file_system.h"

// The generated config message stays out of this header (main.cc includes it).
namespace inference {
class ModelConfig;
}  // namespace inference

namespace harrier {

class BackendRegistry {
 public:
  // A generator that some builds have, by the name a config gives it and its default file.
  struct KnownGenerator {
    std::string_view name;
    std::string_view default_model_filename;
  };
  static std::vector<KnownGenerator> KnownGenerators();

  // Not owned; each must outlive the registry and every model loaded through it.
  void AddTensorBackend(Backend* backend);
  void AddGenerativeBackend(GenerativeBackend* backend);

  // The default tensor backend (the first added); null: none.
  Backend* default_tensor_backend() const { return tensor_.empty() ? nullptr : tensor_.front(); }

  struct Choice {
    bool generative = false;
    Backend* tensor = nullptr;               // a tensor model's backend (!generative)
    GenerativeBackend* generator = nullptr;  // a text generator's; null when missing
    std::string_view missing;                // a generator this build has not ("llama.cpp")
    // The config's `backend` when it names no engine this build has or knows of ("llamacpp"):
    // the load fails naming the ones it has (before, the default backend's file was looked
    // for, and the error spoke of model.onnx; probe 29).
    std::string unknown;
    // The config's `platform`, with no `backend`, when no engine here runs it
    // ("tensorrt_plan"): the load fails naming it before any file is opened (probe 63: the
    // error spoke of a missing model.onnx, or of ONNX Runtime failing to parse model.plan).
    std::string unknown_platform;
  };
  // The names of the engines this build has, tensor backends first ("'onnxruntime', 'llama.cpp'").
  std::string Names() const;
  // `version_dir`: the version's directory, ending in '/'. REQUIRES: a tensor backend is added.
  Choice Choose(const inference::ModelConfig& config, const std::string& version_dir,
                const FileSystem& files) const;

 private:
  std::vector<Backend*> tensor_;
  std::vector<GenerativeBackend*> generative_;
};

}  // namespace harrier
