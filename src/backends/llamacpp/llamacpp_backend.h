// LlamaCppBackend: the GenerativeBackend for GGUF models (docs/generation.md): a model whose
// config says `backend: "llama.cpp"`, or whose version directory holds model.gguf, loads as a
// LlamaEngine with the options its config's `parameters` give:
//
//   context_size         KV cells shared by the sequences          (default 4096)
//   threads              llama.cpp's compute threads; 0 = the usable cores (default 0)
//   parallel_sequences   sequences decoded together                 (default 4)
//   batch_size           most tokens one step decodes               (default 512)
//   ubatch_size          most tokens one graph computes             (default 512)
//   max_waiting_requests requests that may wait for a sequence      (default 64)
//
// Values are decimal integers; anything else, or a parameter the engine refuses, fails the load
// with the parameter's name. Parameters it does not know are left to other layers.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "harrier/backend.h"

namespace harrier {

class LlamaCppBackend : public GenerativeBackend {
 public:
  std::string_view name() const override { return "llama.cpp"; }
  std::string_view platform() const override { return "llama.cpp"; }
  std::string_view default_model_filename() const override { return "model.gguf"; }
  StatusOr<std::unique_ptr<GenerativeModel>> Load(
      const std::string& model_path, const std::map<std::string, std::string>& parameters,
      int usable_cores) override;
};

}  // namespace harrier
