#include "repository/config_validation.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <set>
#include <span>
#include <string>

#include "harrier/tensor.h"

namespace harrier {
namespace {

std::string Quote(const std::string& s) {
  return "'" + s + "'";
}

std::string DimsToString(const google::protobuf::RepeatedField<int64_t>& dims) {
  return ShapeToString(std::span<const int64_t>(dims.data(), static_cast<size_t>(dims.size())));
}

Status ValidateDims(const google::protobuf::RepeatedField<int64_t>& dims, std::string_view field,
                    const std::string& what) {
  for (int64_t d : dims) {
    if (d < -1) {
      return InvalidArgument(what + ": " + std::string(field) + " " + DimsToString(dims) + " has " +
                             std::to_string(d) +
                             "; a dimension must be >= 0, or -1 for a variable size");
    }
  }
  return Status::Ok();
}

struct DimsSummary {
  int variable = 0;          // number of -1 dims
  int64_t static_count = 1;  // product of the other dims (saturating)
};

DimsSummary Summarize(const google::protobuf::RepeatedField<int64_t>& dims) {
  DimsSummary s;
  for (int64_t d : dims) {
    if (d == -1) {
      ++s.variable;
    } else if (s.static_count > 0 && d > 0 &&
               s.static_count > std::numeric_limits<int64_t>::max() / d) {
      s.static_count = -1;  // overflow: never equal to a valid count
    } else if (s.static_count > 0) {
      s.static_count *= d;
    }
  }
  return s;
}

// A reshape must hold the same elements as dims: the same number of variable dims and the
// same product of the static ones. (Triton's rule is finer-grained for variable dims; this is
// enough to reject every reshape that cannot be right.)
Status ValidateReshape(const google::protobuf::RepeatedField<int64_t>& dims,
                       const inference::ModelTensorReshape& reshape, const std::string& what) {
  RETURN_IF_ERROR(ValidateDims(reshape.shape(), "reshape", what));
  DimsSummary a = Summarize(dims);
  DimsSummary b = Summarize(reshape.shape());
  if (a.variable != b.variable || a.static_count != b.static_count) {
    return InvalidArgument(what + ": reshape " + DimsToString(reshape.shape()) +
                           " does not hold the same number of elements as dims " +
                           DimsToString(dims));
  }
  return Status::Ok();
}

Status ValidateDataType(inference::DataType type, const std::string& what) {
  if (type == inference::TYPE_INVALID || !inference::DataType_IsValid(type)) {
    return InvalidArgument(what + ": data_type is not set (TYPE_INVALID)");
  }
  return Status::Ok();
}

Status ValidateInputs(const inference::ModelConfig& config) {
  std::set<std::string> names;
  for (const inference::ModelInput& input : config.input()) {
    if (input.name().empty()) return InvalidArgument("an input has no name");
    const std::string what = "input " + Quote(input.name());
    if (!names.insert(input.name()).second) {
      return InvalidArgument(what + " is listed more than once");
    }
    RETURN_IF_ERROR(ValidateDataType(input.data_type(), what));
    RETURN_IF_ERROR(ValidateDims(input.dims(), "dims", what));
    if (input.has_reshape()) RETURN_IF_ERROR(ValidateReshape(input.dims(), input.reshape(), what));
    if (input.format() != inference::ModelInput::FORMAT_NONE && input.dims_size() != 3) {
      return InvalidArgument(
          what + ": format " + inference::ModelInput::Format_Name(input.format()) +
          " needs 3 dims (without the batch dimension), got " + DimsToString(input.dims()));
    }
    if (input.is_shape_tensor()) {
      return Unimplemented(what + ": is_shape_tensor is only supported by TensorRT");
    }
  }
  return Status::Ok();
}

// True when `file` names a file under a directory it is joined to: relative, no NUL, no ".."
// component. label_filename (sent to clients) and warm-up data files (fed to the model) must not
// come from elsewhere on the machine.
bool StaysInside(std::string_view file) {
  if (file.empty() || file.front() == '/' || file.find('\0') != std::string_view::npos) {
    return false;
  }
  for (size_t start = 0; start <= file.size();) {
    size_t end = file.find('/', start);
    if (end == std::string_view::npos) end = file.size();
    if (file.substr(start, end - start) == "..") return false;
    start = end + 1;
  }
  return true;
}

Status ValidateLabelFilename(const std::string& file, const std::string& what) {
  if (file.empty() || StaysInside(file)) return Status::Ok();
  return InvalidArgument(what + ": label_filename " + Quote(file) +
                         " must name a file inside the model's directory");
}

Status ValidateOutputs(const inference::ModelConfig& config) {
  std::set<std::string> names;
  for (const inference::ModelOutput& output : config.output()) {
    if (output.name().empty()) return InvalidArgument("an output has no name");
    const std::string what = "output " + Quote(output.name());
    if (!names.insert(output.name()).second) {
      return InvalidArgument(what + " is listed more than once");
    }
    RETURN_IF_ERROR(ValidateDataType(output.data_type(), what));
    RETURN_IF_ERROR(ValidateDims(output.dims(), "dims", what));
    if (output.has_reshape()) {
      RETURN_IF_ERROR(ValidateReshape(output.dims(), output.reshape(), what));
    }
    if (output.is_shape_tensor()) {
      return Unimplemented(what + ": is_shape_tensor is only supported by TensorRT");
    }
    RETURN_IF_ERROR(ValidateLabelFilename(output.label_filename(), what));
  }
  return Status::Ok();
}

Status ValidateInstanceGroups(const inference::ModelConfig& config) {
  int64_t instances = 0;
  for (int i = 0; i < config.instance_group_size(); ++i) {
    const inference::ModelInstanceGroup& group = config.instance_group(i);
    const std::string what =
        "instance_group " + (group.name().empty() ? std::to_string(i) : Quote(group.name()));
    if (group.count() < 0) {
      return InvalidArgument(what + ": count " + std::to_string(group.count()) + " is negative");
    }
    // Each instance is a worker thread and an engine session: a count in the millions is a
    // typo (or an attack through a load request's config override), refused before any is made.
    instances += std::max(1, group.count());
    if (instances > kMaxInstances) {
      return InvalidArgument(what + ": count " + std::to_string(group.count()) +
                             " takes the model past " + std::to_string(kMaxInstances) +
                             " instances in all");
    }
    if (group.kind() == inference::ModelInstanceGroup::KIND_GPU || group.gpus_size() > 0) {
      return Unimplemented(what +
                           ": KIND_GPU / gpus: this server has no GPU support; use "
                           "kind: KIND_CPU");
    }
  }
  return Status::Ok();
}

Status ValidateDynamicBatching(const inference::ModelDynamicBatching& batching,
                               int32_t max_batch_size) {
  if (max_batch_size == 0 && batching.preferred_batch_size_size() > 0) {
    return InvalidArgument("dynamic_batching: preferred_batch_size needs max_batch_size > 0");
  }
  for (int32_t size : batching.preferred_batch_size()) {
    if (size < 1 || size > max_batch_size) {
      return InvalidArgument("dynamic_batching: preferred_batch_size " + std::to_string(size) +
                             " is outside [1, max_batch_size " + std::to_string(max_batch_size) +
                             "]");
    }
  }
  const uint64_t levels = batching.priority_levels();
  const uint64_t default_level = batching.default_priority_level();
  // The scheduler keeps a queue per level and looks at each when it forms a batch.
  if (levels > kMaxPriorityLevels) {
    return InvalidArgument("dynamic_batching: priority_levels " + std::to_string(levels) +
                           " is over " + std::to_string(kMaxPriorityLevels));
  }
  if (levels == 0 && default_level != 0) {
    return InvalidArgument(
        "dynamic_batching: default_priority_level is set but priority_levels "
        "is 0");
  }
  if (levels > 0 && (default_level < 1 || default_level > levels)) {
    return InvalidArgument("dynamic_batching: default_priority_level " +
                           std::to_string(default_level) + " is outside [1, priority_levels " +
                           std::to_string(levels) + "]");
  }
  // An enum number the proto does not name parses (proto3 enums are open): `timeout_action: 7`
  // loaded and acted as REJECT, with 7 in the config the server reported (probe 49).
  auto check_action = [](const inference::ModelQueuePolicy& policy,
                         const std::string& where) -> Status {
    if (inference::ModelQueuePolicy::TimeoutAction_IsValid(policy.timeout_action()))
      return Status::Ok();
    return InvalidArgument("dynamic_batching: " + where + ": timeout_action " +
                           std::to_string(policy.timeout_action()) +
                           " is not one of REJECT (0) or DELAY (1)");
  };
  RETURN_IF_ERROR(check_action(batching.default_queue_policy(), "default_queue_policy"));
  for (const auto& [level, policy] : batching.priority_queue_policy()) {
    if (level < 1 || level > levels) {
      return InvalidArgument("dynamic_batching: priority_queue_policy for level " +
                             std::to_string(level) + " is outside [1, priority_levels " +
                             std::to_string(levels) + "]");
    }
    RETURN_IF_ERROR(
        check_action(policy, "priority_queue_policy for level " + std::to_string(level)));
  }
  return Status::Ok();
}

Status ValidateWarmup(const inference::ModelConfig& config, int32_t max_batch_size) {
  std::set<std::string> inputs;
  for (const inference::ModelInput& input : config.input()) inputs.insert(input.name());
  const uint32_t max_warmup_batch = max_batch_size > 0 ? static_cast<uint32_t>(max_batch_size) : 1;
  for (const inference::ModelWarmup& warmup : config.model_warmup()) {
    if (warmup.name().empty()) return InvalidArgument("model_warmup: a sample has no name");
    const std::string what = "model_warmup " + Quote(warmup.name());
    if (warmup.batch_size() < 1 || warmup.batch_size() > max_warmup_batch) {
      return InvalidArgument(what + ": batch_size " + std::to_string(warmup.batch_size()) +
                             " is outside [1, " + std::to_string(max_warmup_batch) + "]");
    }
    // A load runs every count before the version serves, and nothing stops it midway.
    if (warmup.count() > kMaxWarmupCount) {
      return InvalidArgument(what + ": count " + std::to_string(warmup.count()) + " is over " +
                             std::to_string(kMaxWarmupCount));
    }
    for (const auto& [name, input] : warmup.inputs()) {
      const std::string input_what = what + ", input " + Quote(name);
      if (inputs.count(name) == 0) {
        return InvalidArgument(input_what + ": the model has no such input");
      }
      RETURN_IF_ERROR(ValidateDataType(input.data_type(), input_what));
      RETURN_IF_ERROR(ValidateDims(input.dims(), "dims", input_what));
      // A warm-up request is one real request: every size is known. A -1 read as "takes more
      // than the bytes a warm-up may take" (probe 29).
      for (int64_t d : input.dims()) {
        if (d < 0) {
          return InvalidArgument(input_what +
                                 ": dims must be sizes, not -1 (a warm-up request has a shape)");
        }
      }
      if (input.input_data_type_case() == inference::ModelWarmup::Input::INPUT_DATA_TYPE_NOT_SET) {
        return InvalidArgument(input_what +
                               ": set one of zero_data, random_data or input_data_file");
      }
      if (input.has_input_data_file() && !StaysInside(input.input_data_file())) {
        return InvalidArgument(input_what + ": input_data_file " + Quote(input.input_data_file()) +
                               " must name a file inside the model's warmup directory");
      }
    }
  }
  return Status::Ok();
}

// Of `dynamic_batching` a generator reads only the priority levels: the engine batches every
// decode step itself and bounds its waiting room with the parameter max_waiting_requests.
// What it would ignore is refused by name rather than accepted without effect.
Status ValidateGenerativeBatching(const inference::ModelDynamicBatching& batching,
                                  const std::string& a) {
  const std::string batches_itself =
      " does not apply: " + a + " batches every decode step itself (continuous batching)";
  if (batching.preferred_batch_size_size() > 0) {
    return InvalidArgument("dynamic_batching: preferred_batch_size" + batches_itself);
  }
  if (batching.max_queue_delay_microseconds() > 0) {
    return InvalidArgument("dynamic_batching: max_queue_delay_microseconds" + batches_itself);
  }
  if (batching.preserve_ordering()) {
    return InvalidArgument("dynamic_batching: preserve_ordering does not apply: each request of " +
                           a + " is its own stream of responses");
  }
  const bool queue_policy_set =
      batching.default_queue_policy().ByteSizeLong() > 0 ||
      std::any_of(batching.priority_queue_policy().begin(), batching.priority_queue_policy().end(),
                  [](const auto& level) { return level.second.ByteSizeLong() > 0; });
  if (queue_policy_set) {
    return InvalidArgument(
        "dynamic_batching: queue policies do not apply to " + a +
        ": its waiting room is bounded by the parameter max_waiting_requests, and each request "
        "sets its own deadline (X-Request-Timeout-Us)");
  }
  return ValidateDynamicBatching(batching, 0);
}

}  // namespace

int64_t InstanceCount(const inference::ModelConfig& config) {
  int64_t n = 0;
  for (const auto& group : config.instance_group()) n += std::max(1, group.count());
  return std::max<int64_t>(1, n);
}

Status ValidateResponseCache(const inference::ModelConfig& config) {
  if (config.response_cache().enable()) {
    return Unimplemented(
        "response_cache: enable is true; this server has no response cache (set it false or "
        "leave the section out)");
  }
  return Status::Ok();
}

Status ValidateModelFilename(const inference::ModelConfig& config) {
  const std::string& name = config.default_model_filename();
  if (name.empty()) return Status::Ok();
  if (name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos || name.size() > 255) {
    return InvalidArgument(
        "default_model_filename must name a file in the version's directory (one path "
        "component, not '.' or '..'), not " +
        (name.size() > 255 ? "a name of " + std::to_string(name.size()) + " bytes"
                           : Quote(std::string(name.c_str()))));
  }
  return Status::Ok();
}

Status ValidateGenerativeConfig(const inference::ModelConfig& config, std::string_view engine) {
  RETURN_IF_ERROR(ValidateHarrierParameters(config));
  const std::string a = "a " + std::string(engine) + " model";
  if (config.input_size() > 0 || config.output_size() > 0 || config.max_batch_size() > 0) {
    return InvalidArgument(a +
                           " takes text, not tensors: its config has no input, output or "
                           "max_batch_size");
  }
  if (config.model_warmup_size() > 0) {
    return InvalidArgument(a +
                           " warms up with one generated token: model_warmup's tensor "
                           "samples do not apply; leave them out");
  }
  RETURN_IF_ERROR(ValidateResponseCache(config));
  RETURN_IF_ERROR(ValidateModelFilename(config));
  if (config.has_model_transaction_policy() && !config.model_transaction_policy().decoupled()) {
    return InvalidArgument("model_transaction_policy: decoupled is false, but " + a +
                           " answers a request with many responses (one per token); set it "
                           "true or leave the section out");
  }
  if (config.has_dynamic_batching()) {
    RETURN_IF_ERROR(ValidateGenerativeBatching(config.dynamic_batching(), a));
  }
  RETURN_IF_ERROR(ValidateInstanceGroups(config));
  if (const int64_t instances = InstanceCount(config); instances > 1) {
    return InvalidArgument("instance_group: " + std::to_string(instances) + " instances; " + a +
                           " is one engine, whose concurrency is the parameter "
                           "parallel_sequences");
  }
  return Status::Ok();
}

Status ValidateVersionPolicy(const inference::ModelVersionPolicy& policy) {
  if (policy.has_specific()) {
    if (policy.specific().versions().empty()) {
      return InvalidArgument("version_policy: specific.versions lists no version");
    }
    for (int64_t v : policy.specific().versions()) {
      if (v < 1) {
        return InvalidArgument("version_policy: specific.versions has " + std::to_string(v) +
                               "; versions are >= 1");
      }
    }
  }
  return Status::Ok();
}

// The `parameters` keys under "harrier." that Harrier reads (docs/admission.md,
// docs/scheduling.md). The map is free-form for backends, as in Triton, but this namespace is
// Harrier's own: a misspelt key (harrier.rate_limit.rsp) loaded and was ignored, and the model
// ran without the limit its author wrote (probe 74).
constexpr std::string_view kHarrierParameters[] = {
    "harrier.batching.target_p99_us",
    "harrier.overload.interval_us",
    "harrier.overload.max_concurrency",
    "harrier.overload.protection",
    "harrier.overload.target_queue_delay_us",
    "harrier.rate_limit.burst",
    "harrier.rate_limit.per_client_burst",
    "harrier.rate_limit.per_client_rps",
    "harrier.rate_limit.rps",
};

Status ValidateHarrierParameters(const inference::ModelConfig& config) {
  for (const auto& [key, value] : config.parameters()) {
    // Any case: Harrier.rate_limit.rps loaded and was ignored, as a misspelling (probe 77).
    constexpr std::string_view kPrefix = "harrier.";
    if (key.size() < kPrefix.size() ||
        !std::equal(kPrefix.begin(), kPrefix.end(), key.begin(), [](char a, char b) {
          return a == std::tolower(static_cast<unsigned char>(b));
        }))
      continue;
    if (std::find(std::begin(kHarrierParameters), std::end(kHarrierParameters), key) !=
        std::end(kHarrierParameters))
      continue;
    std::string known;
    for (std::string_view k : kHarrierParameters)
      known += (known.empty() ? "" : ", ") + std::string(k);
    return InvalidArgument("parameter " + Quote(key) + " is not one of Harrier's: " + known);
  }
  return Status::Ok();
}

Status ValidateModelConfig(const inference::ModelConfig& config) {
  if (config.name().empty()) return InvalidArgument("name is not set");
  RETURN_IF_ERROR(ValidateHarrierParameters(config));
  RETURN_IF_ERROR(ValidateResponseCache(config));
  RETURN_IF_ERROR(ValidateModelFilename(config));
  if (config.model_transaction_policy().decoupled()) {
    return Unimplemented(
        "model_transaction_policy: decoupled is true; a " +
        (config.backend().empty() ? std::string("tensor") : Quote(config.backend())) +
        " model answers each request with one response (only generative models, such as "
        "llama.cpp's, are decoupled)");
  }
  const int32_t max_batch_size = config.max_batch_size();
  if (max_batch_size > kMaxBatchSize) {
    return InvalidArgument("max_batch_size " + std::to_string(max_batch_size) + " is over " +
                           std::to_string(kMaxBatchSize));
  }
  if (max_batch_size < 0) {
    return InvalidArgument("max_batch_size " + std::to_string(max_batch_size) +
                           " is negative; 0 disables batching");
  }
  RETURN_IF_ERROR(ValidateInputs(config));
  RETURN_IF_ERROR(ValidateOutputs(config));
  RETURN_IF_ERROR(ValidateVersionPolicy(config.version_policy()));
  RETURN_IF_ERROR(ValidateInstanceGroups(config));
  if (config.has_dynamic_batching()) {
    RETURN_IF_ERROR(ValidateDynamicBatching(config.dynamic_batching(), max_batch_size));
  }
  RETURN_IF_ERROR(ValidateWarmup(config, max_batch_size));
  if (config.has_optimization() && config.optimization().has_graph()) {
    // Triton's levels: -1 basic, 0 all (the default), 1 basic and extended, 2 none. Another was
    // read as "all" without a word (probe 29).
    const int32_t level = config.optimization().graph().level();
    if (level < -1 || level > 2) {
      return InvalidArgument("optimization: graph level " + std::to_string(level) +
                             " is not one of -1 (basic), 0 (all), 1 (basic and extended) and 2 "
                             "(none)");
    }
  }
  return Status::Ok();
}

}  // namespace harrier
