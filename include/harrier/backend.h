// Backend interface: what the model manager needs from an inference engine.
//
// An implementation (src/backends/onnxruntime/) is the only code that includes its engine's
// headers. Engine exceptions never cross this interface: every failure is a Status.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "harrier/cancellation.h"
#include "harrier/data_type.h"
#include "harrier/generation.h"
#include "harrier/status.h"
#include "harrier/tensor.h"

namespace harrier {

// A tensor as a model declares it. dims use -1 for a dimension the model leaves free.
struct TensorSpec {
  std::string name;
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> dims;
};

// What a model file says about itself; used to auto-complete and to check a config.
struct ModelSignature {
  std::vector<TensorSpec> inputs;  // each run needs every one
  std::vector<TensorSpec> outputs;
  // Inputs the model gives a value of its own (ONNX: an initializer also listed as a graph
  // input), which a run may leave out or override. A config may list one (usually with
  // `optional: true`); auto-complete never adds one, since older exporters list every weight.
  std::vector<TensorSpec> defaulted_inputs;
};

// How to build one model instance. Defaults are for lowest latency on a small machine.
struct InstanceOptions {
  // Threads inside one operator (0: let the backend choose; the model manager always sets
  // it, sized so that instances x threads <= usable cores).
  int intra_op_threads = 0;
  // Threads across operators; only used by parallel execution.
  int inter_op_threads = 1;
  // Run independent operators in parallel (ORT_PARALLEL) instead of sequentially.
  bool parallel_execution = false;
  // 0 disable, 1 basic, 2 extended, 99 all (ONNX Runtime's levels); -1: backend default (all).
  int graph_optimization_level = -1;
  // Free-form backend parameters from the model config's `parameters`.
  std::map<std::string, std::string> parameters;
  // How many instances the version makes: the threads they start together are bounded.
  int instance_count = 1;
};

// What a run may need besides its tensors.
struct RunContext {
  // When set and cancelled while Run() is in progress, the backend stops the run as soon as
  // the engine allows and returns kCancelled. Not owned; outlives the Run() call.
  CancellationToken* cancellation = nullptr;
};

// One loaded copy of a model that runs one request at a time.
// Thread safety: Run() is called by one worker thread at a time per instance.
class ModelInstance {
 public:
  virtual ~ModelInstance() = default;

  // Runs the model. `inputs` match the signature's input names, dtypes and shapes (validated
  // by the caller, including BYTES serialization). Fills `outputs` with one tensor per name in
  // `output_names`, in that order; output tensors own their memory (Tensor::owner).
  // Errors: kInvalidArgument for input the engine rejects, kCancelled when context.cancellation
  // fired during the run, kInternal for engine failures.
  virtual Status Run(std::span<const Tensor> inputs, std::span<const std::string> output_names,
                     std::vector<Tensor>* outputs, const RunContext& context) = 0;

  // The model's inputs and outputs as this instance's engine read them, or null when it does
  // not say. A load reads them from its first instance (as Backend::Inspect would) instead of
  // reading the model file a second time; null makes it call Inspect.
  virtual const ModelSignature* signature() const { return nullptr; }
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "onnxruntime" (Triton's backend name) and "onnxruntime_onnx" (Triton's platform name).
  virtual std::string_view name() const = 0;
  virtual std::string_view platform() const = 0;
  // The file a version directory holds by default: "model.onnx".
  virtual std::string_view default_model_filename() const = 0;

  // Reads a model file's inputs and outputs. kInvalidArgument when the file is not a valid
  // model (naming the file), kNotFound when it does not exist.
  virtual StatusOr<ModelSignature> Inspect(const std::string& model_path) = 0;

  // Loads one instance. Same errors as Inspect, kInternal for engine failures.
  virtual StatusOr<std::unique_ptr<ModelInstance>> CreateInstance(
      const std::string& model_path, const InstanceOptions& options) = 0;

  // Loads one more instance of the version whose first instance is `first` (created by this
  // backend with the same path and options). A backend may let the two share what does not
  // change between runs (an engine session and its weights) when the options ask for it; the
  // new instance then keeps that shared state alive. Default: CreateInstance.
  virtual StatusOr<std::unique_ptr<ModelInstance>> CreateAnotherInstance(
      const ModelInstance& first, const std::string& model_path, const InstanceOptions& options) {
    (void)first;
    return CreateInstance(model_path, options);
  }
};

// An engine for models that generate text (llama.cpp): one GenerativeModel per version, which
// runs its own sequences (continuous batching) instead of instances a scheduler feeds.
class GenerativeBackend {
 public:
  virtual ~GenerativeBackend() = default;
  // The config's `backend` that chooses it ("llama.cpp"), and the platform reported for it.
  virtual std::string_view name() const = 0;
  virtual std::string_view platform() const = 0;
  // The file a version directory holds by default ("model.gguf"); a version directory with
  // this file (and without the tensor backend's) is this engine's even without a config.
  virtual std::string_view default_model_filename() const = 0;
  // Loads the model at `model_path` with the config's `parameters` (documented by the engine);
  // `usable_cores` sizes its threads when the parameters do not. kNotFound when the file does
  // not exist, kInvalidArgument when it is not a model or a parameter is bad, kInternal else.
  virtual StatusOr<std::unique_ptr<GenerativeModel>> Load(
      const std::string& model_path, const std::map<std::string, std::string>& parameters,
      int usable_cores) = 0;
};

}  // namespace harrier
