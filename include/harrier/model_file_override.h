// ModelFileOverride: one file of a load request's file overrides (Triton's "file:<path>" load
// parameters; docs/model-lifecycle.md): a model is then loaded from these files instead of its
// directory in the repository.
#pragma once

#include <string>

namespace harrier {

struct ModelFileOverride {
  // Relative to the model's directory, "<version>/<name>" (e.g. "1/model.onnx"), as the request
  // spelled it after "file:"; checked by ValidateFileOverrides() (repository/override_directory.h).
  std::string path;
  std::string content;  // the file's bytes (decoded from base64 in a JSON body)
};

}  // namespace harrier
