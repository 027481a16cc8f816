// ModelIO: a model version's inputs and outputs as its completed config declares them, in the
// form the request path needs (no protobuf), plus the checks every inference request passes
// before it is queued.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harrier/data_type.h"
#include "harrier/inference_request.h"
#include "harrier/status.h"

namespace harrier {

struct IoSpec {
  std::string name;
  DataType dtype = DataType::kInvalid;
  // Without the batch dim when max_batch_size > 0; -1 for a free dim.
  std::vector<int64_t> dims;
  // Config `reshape`: the shape the model receives (an input) or gives (an output) instead of
  // `dims` (batch dim excluded).
  std::optional<std::vector<int64_t>> reshape;
  bool optional = false;  // an input the request may leave out
};

struct ModelIO {
  int64_t max_batch_size = 0;
  std::vector<IoSpec> inputs;
  std::vector<IoSpec> outputs;
  // Outputs' classification labels (config label_filename), read at load, by output name.
  std::map<std::string, std::shared_ptr<const std::vector<std::string>>, std::less<>> labels;

  const IoSpec* FindInput(std::string_view name) const;
  const IoSpec* FindOutput(std::string_view name) const;
  // The shape clients see (metadata): [-1] + dims when max_batch_size > 0.
  std::vector<int64_t> ClientShape(const IoSpec& spec) const;
};

// Checks `request` against `io` and prepares it for the backend: every required input present
// once, no unknown input, datatype equal, shape compatible with dims (and the batch dim within
// 1..max_batch_size), data size equal to what dtype x shape needs (BYTES: a well-formed
// serialization), requested outputs known and not repeated. Applies `reshape` to input shapes
// (an input with a reshape may also come in the reshape's shape: a rank-0 request for a scalar).
// Fills `output_names` with the outputs to compute, in response order — except, with
// AllOutputs::kLeftEmpty, when the request asks for every output (`outputs` empty): then it is
// left empty and the caller uses the model's own list (LoadedModel: no names copied per request).
// Errors: kInvalidArgument with a message that names the model, the tensor and both values.
enum class AllOutputs { kListed, kLeftEmpty };
Status ValidateAndPrepare(const ModelIO& io, std::string_view model_name, InferenceRequest* request,
                          std::vector<std::string>* output_names,
                          AllOutputs all_outputs = AllOutputs::kListed);

// Presents the model's outputs as the config declares them, as Triton does: an output with a
// `reshape` gets its batch dim (when batching) followed by its config `dims`, variable dims
// taking the model's sizes (a scalar output, dims [1] reshape [], is answered as [1] or
// [batch, 1]). The data is untouched. kInternal when the model's shape cannot be presented so.
Status PresentOutputs(const ModelIO& io, std::string_view model_name, std::vector<Tensor>* outputs);

}  // namespace harrier
