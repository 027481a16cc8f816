// The optional JSON body of Triton's POST /v2/repository/models/{m}/load and /unload:
//
//   {"parameters": {"config": "<the model config as JSON>",
//                   "file:<version>/<name>": "<the file's content, base64>", ...}}   (load)
//   {"parameters": {"unload_dependents": bool}}                                      (unload)
//
// Thread safety: pure functions.
#pragma once

#include <memory>
#include <string>

#include "harrier/model_manager.h"
#include "harrier/status.h"

namespace harrier::kserve {

// Which endpoint the body came to.
enum class ModelControlAction { kLoad, kUnload };

// The load options the body asks for (an empty or absent body: none). kInvalidArgument: not a
// JSON object, an unknown field or parameter, a parameter of the wrong type, or a "file:"
// value that is not base64 (RFC 4648, with padding). What the file paths and the need for a
// config demand is checked by the model manager (the same rules for gRPC), not here.
StatusOr<ModelLoadOptions> ParseModelControlParameters(
    const std::shared_ptr<const std::string>& body, ModelControlAction action);

}  // namespace harrier::kserve
