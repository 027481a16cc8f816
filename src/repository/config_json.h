// ModelConfigToJson: a model config as JSON in the shape Triton returns from
// GET /v2/models/{m}/config — the protobuf JSON mapping with the proto field names
// ("max_batch_size", not "maxBatchSize") — with Triton's two differences from the standard
// mapping: every scalar and repeated field is printed even when it holds its default, and
// 64-bit integers are JSON numbers ("dims": [16]), not strings.
//
// Details: enums print as their names ("TYPE_FP32"); unset message fields and unset oneof
// members are left out; maps are objects with string keys, sorted (numerically for integer
// keys) so the output is deterministic; fields come in declaration order. Written by walking
// the message with protobuf reflection, so new fields in model_config.proto need no change
// here.
#pragma once

#include <string>

#include "harrier/status.h"
#include "repository/model_config.pb.h"

namespace harrier {

// Compact JSON (no spaces or newlines).
std::string ModelConfigToJson(const inference::ModelConfig& config);

// The other way, for a load request's `parameters.config` (Triton's config override): the
// protobuf JSON mapping, proto or JSON field names, 64-bit integers as numbers or strings.
// Errors: kInvalidArgument naming what protobuf's parser found wrong (an unknown field, a
// wrong type, JSON that does not parse), or for JSON over kMaxModelConfigBytes, the bound a
// config.pbtxt has (a 20 MB override loaded, and GET .../config echoed it whole; probe 29).
StatusOr<inference::ModelConfig> ParseModelConfigJson(const std::string& json);

}  // namespace harrier
