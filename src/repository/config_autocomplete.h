// AutoCompleteConfig: completes a model config from what the model file says about itself
// (its ModelSignature) and checks the two agree, as Triton's ONNX Runtime backend does. A pure
// function: the caller inspects the model file and parses config.pbtxt.
//
// Rules (docs/model-repository.md explains them with examples):
//   - name: set to the directory name when empty; any other name is an error.
//   - backend / platform: set to the server's backend ("onnxruntime" / "onnxruntime_onnx");
//     a config naming another backend or platform is kUnimplemented.
//   - max_batch_size: when the config does not set it (the field is absent; an explicit
//     `max_batch_size: 0` means "no batching" and is kept) and every model input and output
//     has a variable (-1) first dimension, it becomes options.default_max_batch_size, and a
//     `dynamic_batching {}` is added when that is > 1 and the config has none (Triton's
//     behaviour). Exception, as in Triton: a tensor listed in the config with as many dims as
//     the model has (a full shape) says the user does not batch, so max_batch_size is 0.
//     Otherwise max_batch_size is 0. With max_batch_size > 0, config dims leave out the batch
//     dimension and every model tensor must have a variable first dimension.
//   - inputs / outputs: every model tensor missing from the config is appended, in the
//     model's order, with its data type and dims. A tensor listed without data_type or without
//     dims (and no reshape) gets them from the model. A listed tensor the model lacks, a
//     different data type, or dims of another rank or with a different fixed size, is an
//     error. A -1 in the model matches any config value; a -1 in the config against a fixed
//     model dim is an error. With `reshape`, the reshape shape is what is compared with the
//     model (dims vs reshape is checked by ValidateModelConfig). A model tensor whose dims
//     (after removing the batch dim) are empty becomes dims [1] with reshape { shape: [] },
//     as in Triton, which does not allow empty dims.
//   - instance_group: none given means one group { count: 1, kind: KIND_CPU }; a group with
//     KIND_AUTO becomes KIND_CPU, count 0 becomes 1, an empty name becomes "<model>_<index>".
//     KIND_GPU is rejected by ValidateModelConfig (kUnimplemented): this server has no GPU
//     support, and silently running a GPU config on CPU would hide a large slowdown.
//   - default_model_filename: set from options when empty.
// Finally the completed config goes through ValidateModelConfig.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "harrier/backend.h"
#include "harrier/status.h"
#include "repository/model_config.pb.h"

namespace harrier {

struct AutoCompleteOptions {
  // max_batch_size given to a batchable model whose config does not set it. Triton's ONNX
  // Runtime backend default (--backend-config=onnxruntime,default-max-batch-size=4). 0 turns
  // batch inference off.
  int32_t default_max_batch_size = 4;
  // Written to default_model_filename when the config leaves it empty ("model.onnx" from
  // Backend::default_model_filename()); empty: leave the field alone.
  std::string default_model_filename;
};

// The sections whose defaults are in force written out, as Triton's NormalizeModelConfig does,
// so that a client reading the config (model_analyzer, perf_analyzer's streaming choice) sees
// what Triton would show (probe 63): `version_policy` the latest version, and
// `model_transaction_policy` one response per request. Sections already there are left alone.
// Every model's config gets it, generative ones included.
void WriteOutDefaults(inference::ModelConfig* config);

// Completes `config` in place. On error `config` may be partly completed; discard it.
// Errors: kInvalidArgument naming the tensor (or field) and both the config's and the model's
// values; kUnimplemented for another backend/platform or GPU instance groups; and those of
// ValidateModelConfig. Messages do not name the model or the file: callers add that.
Status AutoCompleteConfig(const ModelSignature& signature, std::string_view model_name,
                          std::string_view backend_name, std::string_view platform,
                          inference::ModelConfig* config, const AutoCompleteOptions& options = {});

}  // namespace harrier
