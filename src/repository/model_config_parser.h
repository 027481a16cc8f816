// Parsing Triton's config.pbtxt (protobuf text format) into inference::ModelConfig.
//
// Only the fields declared in model_config.proto are accepted: an unknown field is an error,
// as in Triton, so that a setting Harrier does not support is never silently ignored. Parsing
// checks syntax and types only; ValidateModelConfig (config_validation.h) and
// AutoCompleteConfig (config_autocomplete.h) check meaning.
#pragma once

#include <string>
#include <string_view>

#include "harrier/status.h"
#include "repository/file_system.h"
#include "repository/model_config.pb.h"

namespace harrier {

// Parses config text. Empty text (or only whitespace and comments) is an empty config.
// Errors: kInvalidArgument, with a message "<path_for_errors>:<line>:<column>: <problem>"
// (1-based) for a syntax error, an unknown field, a value of the wrong type, an unknown enum
// name or a non-repeated field given twice. `path_for_errors` is only used in messages.
StatusOr<inference::ModelConfig> ParseModelConfig(std::string_view pbtxt,
                                                  const std::string& path_for_errors);

// Reads and parses the config file at `path`. A missing file is an empty config (a model
// without config.pbtxt is auto-completed from the model file). Errors: those of
// ParseModelConfig; kInvalidArgument when `path` is not a regular file; kInternal when it
// cannot be read.
StatusOr<inference::ModelConfig> ReadModelConfigFile(const std::string& path,
                                                     const FileSystem& fs = LocalFileSystem());

}  // namespace harrier
