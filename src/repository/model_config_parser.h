// Parsing Triton's config.pbtxt (protobuf text format) into inference::ModelConfig.
//
// Only the fields declared in model_config.proto are accepted: an unknown field is an error,
// as in Triton, so that a setting Harrier does not support is never silently ignored. Parsing
// checks syntax and types only; ValidateModelConfig (config_validation.h) and
// AutoCompleteConfig (config_autocomplete.h) check meaning.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "harrier/status.h"
#include "repository/file_system.h"
#include "repository/model_config.pb.h"

namespace harrier {

// Parses config text. Empty text (or only whitespace and comments) is an empty config.
// Errors: kInvalidArgument, with a message "<path_for_errors>:<line>:<column>: <problem>"
// (1-based) for a syntax error, an unknown field, a value of the wrong type, an unknown enum
// name, a non-repeated field given twice, or a string that is not UTF-8 (CheckUtf8Strings).
// `path_for_errors` is only used in messages.
StatusOr<inference::ModelConfig> ParseModelConfig(std::string_view pbtxt,
                                                  const std::string& path_for_errors);

// kInvalidArgument naming the first string field of `config` (depth first, as
// "parameters[\"k\"].string_value") that is not UTF-8. A config's strings go into JSON (the
// config endpoint, the index's reasons) and metric labels, which must be UTF-8: the text
// format parser takes any bytes, and one such string made whole documents unreadable (probe 29).
Status CheckUtf8Strings(const google::protobuf::Message& config);

// The largest config.pbtxt read (a config is a few KiB; a poll must not read a stray large file
// into memory every rotation). ModelFingerprint digests a larger one by its size and time.
inline constexpr uint64_t kMaxModelConfigBytes = 1 << 20;

// The size of the file at `path` on the local file system when it is over kMaxModelConfigBytes;
// nullopt otherwise (or when it cannot be told: the read that follows says why).
std::optional<uint64_t> OversizedConfigFile(const std::string& path);

// Reads and parses the config file at `path`. A missing file is an empty config (a model
// without config.pbtxt is auto-completed from the model file). Errors: those of
// ParseModelConfig; kInvalidArgument when `path` is not a regular file or is over
// kMaxModelConfigBytes; kInternal when it cannot be read.
StatusOr<inference::ModelConfig> ReadModelConfigFile(const std::string& path,
                                                     const FileSystem& fs = LocalFileSystem());

}  // namespace harrier
