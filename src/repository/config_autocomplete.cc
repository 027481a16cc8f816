#include "repository/config_autocomplete.h"

#include <span>
#include <vector>

#include "harrier/tensor.h"
#include "repository/config_data_type.h"
#include "repository/config_validation.h"

namespace harrier {
namespace {

using Dims = google::protobuf::RepeatedField<int64_t>;

std::span<const int64_t> AsSpan(const Dims& dims) {
  return {dims.data(), static_cast<size_t>(dims.size())};
}

std::string Quote(std::string_view s) {
  return "'" + std::string(s) + "'";
}

const TensorSpec* FindSpec(const std::vector<TensorSpec>& specs, const std::string& name) {
  for (const TensorSpec& spec : specs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

std::string NameList(const std::vector<TensorSpec>& specs) {
  std::string out;
  for (const TensorSpec& spec : specs) {
    if (!out.empty()) out += ", ";
    out += Quote(spec.name);
  }
  return out.empty() ? "none" : out;
}

bool HasVariableFirstDim(const TensorSpec& spec) {
  return !spec.dims.empty() && spec.dims.front() == -1;
}

// The shape the config shows for a model tensor: without the batch dim when batching.
std::span<const int64_t> ConfigShapeOf(const TensorSpec& spec, bool batching) {
  std::span<const int64_t> dims(spec.dims);
  return batching ? dims.subspan(1) : dims;
}

// What the backend sees of a config tensor: its reshape when there is one, else its dims.
template <typename ConfigTensor>
std::span<const int64_t> BackendShapeOf(const ConfigTensor& tensor) {
  return tensor.has_reshape() ? AsSpan(tensor.reshape().shape()) : AsSpan(tensor.dims());
}

bool DimsCompatible(std::span<const int64_t> config, std::span<const int64_t> model) {
  if (config.size() != model.size()) return false;
  for (size_t i = 0; i < config.size(); ++i) {
    if (model[i] != -1 && config[i] != model[i]) return false;
  }
  return true;
}

template <typename ConfigTensor>
void SetDims(std::span<const int64_t> dims, ConfigTensor* tensor) {
  tensor->clear_dims();
  if (dims.empty()) {
    // Triton wants non-empty dims; a scalar (per batch item) is [1] reshaped to [].
    tensor->add_dims(1);
    tensor->mutable_reshape()->clear_shape();
    return;
  }
  for (int64_t d : dims) tensor->add_dims(d);
}

// Fills what the config leaves out of one listed tensor, then checks it against the model.
template <typename ConfigTensor>
Status CompleteTensor(const TensorSpec& spec, bool batching, int32_t max_batch_size,
                      std::string_view kind, ConfigTensor* tensor) {
  const std::string what = std::string(kind) + " " + Quote(spec.name);
  const std::span<const int64_t> model_shape = ConfigShapeOf(spec, batching);

  if (tensor->data_type() == inference::TYPE_INVALID) {
    tensor->set_data_type(ToConfigType(spec.dtype));
  } else if (FromConfigType(tensor->data_type()) != spec.dtype) {
    return InvalidArgument(what + ": data_type " + inference::DataType_Name(tensor->data_type()) +
                           " in the config does not match the model's " +
                           std::string(DataTypeConfigName(spec.dtype)));
  }

  if (tensor->dims_size() == 0 && !tensor->has_reshape()) {
    SetDims(model_shape, tensor);
    return Status::Ok();
  }
  const std::span<const int64_t> config_shape = BackendShapeOf(*tensor);
  if (!DimsCompatible(config_shape, model_shape)) {
    std::string message = what + ": " + (tensor->has_reshape() ? "reshape " : "dims ") +
                          ShapeToString(config_shape) + " in the config do not match the model's " +
                          "shape " + ShapeToString(spec.dims);
    if (batching) {
      message += " (with max_batch_size " + std::to_string(max_batch_size) +
                 " the config leaves out the first, batch dimension: expected " +
                 ShapeToString(model_shape) + ")";
    } else {
      message += " (with max_batch_size 0 the config gives the full shape)";
    }
    return InvalidArgument(message);
  }
  return Status::Ok();
}

// Checks that each listed tensor exists in the model, then completes the listed ones and
// appends the missing ones in the model's order. A listed tensor may also be one of
// `defaulted` (inputs the model has a value for), which are never appended.
template <typename ConfigTensor>
Status CompleteTensors(const std::vector<TensorSpec>& specs,
                       const std::vector<TensorSpec>& defaulted, bool batching,
                       int32_t max_batch_size, std::string_view kind,
                       google::protobuf::RepeatedPtrField<ConfigTensor>* tensors) {
  for (const ConfigTensor& tensor : *tensors) {
    if (FindSpec(specs, tensor.name()) == nullptr &&
        FindSpec(defaulted, tensor.name()) == nullptr) {
      return InvalidArgument(std::string(kind) + " " + Quote(tensor.name()) +
                             " is in the config but not in the model (the model's " +
                             std::string(kind) + "s: " + NameList(specs) + ")");
    }
  }
  for (const TensorSpec& spec : specs) {
    ConfigTensor* listed = nullptr;
    for (ConfigTensor& tensor : *tensors) {
      if (tensor.name() == spec.name) {
        listed = &tensor;
        break;
      }
    }
    if (listed == nullptr) {
      listed = tensors->Add();
      listed->set_name(spec.name);
    }
    RETURN_IF_ERROR(CompleteTensor(spec, batching, max_batch_size, kind, listed));
  }
  for (ConfigTensor& tensor : *tensors) {
    const TensorSpec* spec = FindSpec(defaulted, tensor.name());
    if (spec == nullptr || FindSpec(specs, tensor.name()) != nullptr) continue;
    if (batching) {
      return InvalidArgument(std::string(kind) + " " + Quote(tensor.name()) +
                             " has a value in the model (an initializer listed as an input), "
                             "whose shape has no batch dimension: set max_batch_size: 0");
    }
    RETURN_IF_ERROR(CompleteTensor(*spec, batching, max_batch_size, kind, &tensor));
  }
  return Status::Ok();
}

// `optional` only on an input the model has a value for: ONNX Runtime runs no request that
// leaves out any other (Triton refuses the config too).
Status CheckOptionalInputs(const ModelSignature& signature, const inference::ModelConfig& config) {
  for (const inference::ModelInput& input : config.input()) {
    if (input.optional() && FindSpec(signature.inputs, input.name()) != nullptr) {
      return InvalidArgument(
          "input " + Quote(input.name()) +
          " is optional in the config, but the model needs it on every run (a request may leave "
          "out only an input the model has a value for: an ONNX initializer listed as an "
          "input); remove 'optional: true'");
    }
  }
  return Status::Ok();
}

// True when a listed tensor shows as many dims as the model has: the user wrote full shapes,
// i.e. does not batch.
template <typename ConfigTensor>
bool ListsFullShape(const google::protobuf::RepeatedPtrField<ConfigTensor>& tensors,
                    const std::vector<TensorSpec>& specs) {
  for (const ConfigTensor& tensor : tensors) {
    const TensorSpec* spec = FindSpec(specs, tensor.name());
    if (spec == nullptr || (tensor.dims_size() == 0 && !tensor.has_reshape())) continue;
    if (BackendShapeOf(tensor).size() == spec->dims.size()) return true;
  }
  return false;
}

int32_t InferMaxBatchSize(const ModelSignature& signature, const inference::ModelConfig& config,
                          const AutoCompleteOptions& options) {
  if (options.default_max_batch_size <= 0) return 0;
  if (signature.inputs.empty() && signature.outputs.empty()) return 0;
  for (const auto* specs : {&signature.inputs, &signature.outputs}) {
    for (const TensorSpec& spec : *specs) {
      if (!HasVariableFirstDim(spec)) return 0;
    }
  }
  if (ListsFullShape(config.input(), signature.inputs) ||
      ListsFullShape(config.output(), signature.outputs)) {
    return 0;
  }
  return options.default_max_batch_size;
}

Status CheckBatchDims(const ModelSignature& signature, int32_t max_batch_size) {
  for (const auto& [specs, kind] :
       {std::pair{&signature.inputs, "input"}, std::pair{&signature.outputs, "output"}}) {
    for (const TensorSpec& spec : *specs) {
      if (!HasVariableFirstDim(spec)) {
        return InvalidArgument(
            "max_batch_size is " + std::to_string(max_batch_size) + " but the model's " + kind +
            " " + Quote(spec.name) + " has shape " + ShapeToString(spec.dims) +
            ", whose first dimension is not variable (-1); set max_batch_size: 0 or export the "
            "model with a dynamic batch dimension");
      }
    }
  }
  return Status::Ok();
}

void CompleteInstanceGroups(std::string_view model_name, inference::ModelConfig* config) {
  if (config->instance_group_size() == 0) config->add_instance_group();
  for (int i = 0; i < config->instance_group_size(); ++i) {
    inference::ModelInstanceGroup* group = config->mutable_instance_group(i);
    if (group->name().empty()) group->set_name(std::string(model_name) + "_" + std::to_string(i));
    if (group->kind() == inference::ModelInstanceGroup::KIND_AUTO) {
      group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
    }
    if (group->count() == 0) group->set_count(1);
  }
}

}  // namespace

void WriteOutDefaults(inference::ModelConfig* config) {
  if (!config->has_version_policy())
    config->mutable_version_policy()->mutable_latest()->set_num_versions(1);
  if (!config->has_model_transaction_policy()) config->mutable_model_transaction_policy();
}

Status AutoCompleteConfig(const ModelSignature& signature, std::string_view model_name,
                          std::string_view backend_name, std::string_view platform,
                          inference::ModelConfig* config, const AutoCompleteOptions& options) {
  if (config->name().empty()) {
    config->set_name(std::string(model_name));
  } else if (config->name() != model_name) {
    return InvalidArgument("name " + Quote(config->name()) +
                           " in the config does not match the model directory " +
                           Quote(model_name));
  }
  if (!config->backend().empty() && config->backend() != backend_name) {
    return Unimplemented("backend " + Quote(config->backend()) + " is not supported; this server " +
                         "runs " + Quote(backend_name) + " models");
  }
  if (!config->platform().empty() && config->platform() != platform) {
    return Unimplemented("platform " + Quote(config->platform()) + " is not supported; this " +
                         "server runs " + Quote(platform) + " models");
  }
  config->set_backend(std::string(backend_name));
  config->set_platform(std::string(platform));

  if (!config->has_max_batch_size()) {
    const int32_t inferred = InferMaxBatchSize(signature, *config, options);
    config->set_max_batch_size(inferred);
    if (inferred > 1 && !config->has_dynamic_batching()) config->mutable_dynamic_batching();
  }
  const int32_t max_batch_size = config->max_batch_size();
  if (max_batch_size < 0) {
    return InvalidArgument("max_batch_size " + std::to_string(max_batch_size) +
                           " is negative; 0 disables batching");
  }
  const bool batching = max_batch_size > 0;
  if (batching) RETURN_IF_ERROR(CheckBatchDims(signature, max_batch_size));

  RETURN_IF_ERROR(CompleteTensors(signature.inputs, signature.defaulted_inputs, batching,
                                  max_batch_size, "input", config->mutable_input()));
  RETURN_IF_ERROR(CheckOptionalInputs(signature, *config));
  RETURN_IF_ERROR(CompleteTensors(signature.outputs, {}, batching, max_batch_size, "output",
                                  config->mutable_output()));
  CompleteInstanceGroups(model_name, config);
  WriteOutDefaults(config);
  if (config->default_model_filename().empty() && !options.default_model_filename.empty()) {
    config->set_default_model_filename(options.default_model_filename);
  }
  return ValidateModelConfig(*config);
}

}  // namespace harrier
