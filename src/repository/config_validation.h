// ValidateModelConfig: the checks on a model config that need no model file, applied to the
// completed config (AutoCompleteConfig calls it last; a config override given through the
// repository API can be checked with it directly).
//
// It checks, in Harrier's terms (docs/model-repository.md has the full list):
//   - name is set; max_batch_size in [0, kMaxBatchSize];
//   - every input and output has a name, unique among the inputs (outputs), a data_type other
//     than TYPE_INVALID, dims and reshape values that are -1 or >= 0 (ONNX allows empty
//     tensors, so a 0 dimension is valid), a reshape with the same
//     number of elements as dims, FORMAT_NHWC/NCHW only with 3 dims;
//   - version_policy: specific.versions non-empty and >= 1;
//   - instance_group: count >= 0 (0 means 1), at most kMaxInstances in all groups;
//   - dynamic_batching: preferred_batch_size within [1, max_batch_size], priority_levels at
//     most kMaxPriorityLevels, and priority levels and per-level queue policies within
//     [1, priority_levels];
//   - response_cache.enable false (ValidateResponseCache), model_transaction_policy.decoupled
//     false: a tensor model answers one response per request;
//   - model_warmup: a name, batch_size within [1, max(1, max_batch_size)], count at most
//     kMaxWarmupCount, each input naming a config input, with a data_type and a data source.
#pragma once

#include <cstdint>
#include <string_view>

#include "harrier/status.h"
#include "repository/model_config.pb.h"

namespace harrier {

// max_batch_size (the scheduler's adaptive delay keeps a figure per batch size).
inline constexpr int32_t kMaxBatchSize = 1 << 20;
// model_warmup's count: the runs of one sample (on each instance) before a version serves.
inline constexpr uint32_t kMaxWarmupCount = 10'000;
// A version's instances, all groups together (each is a worker thread and an engine session).
inline constexpr int64_t kMaxInstances = 128;
// dynamic_batching.priority_levels (the scheduler keeps and scans a queue per level).
inline constexpr uint64_t kMaxPriorityLevels = 1000;

// Errors: kInvalidArgument naming the field (and the tensor) and the offending value;
// kUnimplemented for settings Harrier does not support (KIND_GPU, `gpus`, shape tensors, a
// response cache, a decoupled tensor model).
// Messages do not name the model or the file: callers add that (Status::WithContext).
Status ValidateModelConfig(const inference::ModelConfig& config);

// The instances a config's groups make in all: a count of 0 means 1, and no group means one
// instance.
int64_t InstanceCount(const inference::ModelConfig& config);

// Every `parameters` key under "harrier." is one Harrier reads (a misspelt one is refused,
// naming it and listing the known ones); other keys are the backend's. Every model's config gets
// it, generative ones included.
Status ValidateHarrierParameters(const inference::ModelConfig& config);

// The check every model's config gets, generative ones included: response_cache.enable is
// false (Harrier has no response cache; Triton's default, written out, is accepted).
Status ValidateResponseCache(const inference::ModelConfig& config);

// version_policy alone (part of ValidateModelConfig): `specific` lists at least one version,
// each >= 1. Checked before the versions are chosen by it, so that its own words are the reason.
Status ValidateVersionPolicy(const inference::ModelVersionPolicy& policy);

// The check every model's config gets before its file is opened: default_model_filename, when
// set, names a file in the version's directory, which the loader joins it to — one path
// component, not "." or "..", no NUL, at most 255 bytes. A config override through the
// repository API can set it, so this is what keeps a load from reading (or hanging on) a file
// outside the repository.
Status ValidateModelFilename(const inference::ModelConfig& config);

// The checks on a text generator's config (`engine` names it in messages: "llama.cpp"): no
// input, output, max_batch_size or model_warmup (it takes text, and warms up with one token);
// no response cache; model_transaction_policy.decoupled not false (it answers many responses);
// instance groups as ValidateModelConfig checks them (no GPU), one instance in all (the
// engine's concurrency is its parallel_sequences). Errors as ValidateModelConfig's.
Status ValidateGenerativeConfig(const inference::ModelConfig& config, std::string_view engine);

}  // namespace harrier
