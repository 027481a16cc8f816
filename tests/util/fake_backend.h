// FakeBackend: a Backend for tests, with no engine. A model file's content decides what it is:
//   "identity <DTYPE> <dims...>"  one input INPUT0 and one output OUTPUT0 of that type and dims
//                                  (e.g. "identity FP32 -1 4"); Run copies INPUT0 to OUTPUT0
//   "zero_fails <DTYPE> <dims...>" the same, but Run fails (kInvalidArgument) when INPUT0 is
//                                  all zero bytes, as a graph that divides by its input does
//   "breaks <DTYPE> <dims...>"     the same, but every Run fails (kInternal), as an engine
//                                  failure does (what a circuit breaker counts)
//   "too_big"                       kResourceExhausted, as an engine that cannot allocate
//                                  the model's memory (llama.cpp's context) answers
//   anything else                   kInvalidArgument, as a corrupt model would be
// Counts instances, Inspect calls and runs so tests can check warm-up and sizing; with
// `instances_report_signature` set, instances say their signature (as ONNX Runtime's do) and a
// load needs no Inspect. `on_create_instance`, when set,
// is called with the model file's path as each instance is created (a test's latch, to hold a
// load there); `on_run`, when set, in each run.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>

#include "harrier/backend.h"

namespace harrier::testing {

class FakeInstance : public ModelInstance {
 public:
  enum class Fails { kNever, kOnZeros, kAlways };
  explicit FakeInstance(std::atomic<int>* runs, Fails fails = Fails::kNever,
                        std::optional<ModelSignature> signature = std::nullopt,
                        const std::function<void()>* on_run = nullptr)
      : runs_(runs), fails_(fails), signature_(std::move(signature)), on_run_(on_run) {}
  const ModelSignature* signature() const override { return signature_ ? &*signature_ : nullptr; }
  Status Run(std::span<const Tensor> inputs, std::span<const std::string> output_names,
             std::vector<Tensor>* outputs, const RunContext&) override {
    ++*runs_;
    if (on_run_ != nullptr && *on_run_) (*on_run_)();
    outputs->clear();
    if (fails_ == Fails::kAlways) return Internal("the engine failed");
    if (fails_ == Fails::kOnZeros) {
      const auto* bytes = inputs[0].data;
      if (std::all_of(bytes, bytes + inputs[0].size_bytes,
                      [](std::byte b) { return b == std::byte{0}; }))
        return InvalidArgument("integer division by zero");
    }
    for (const std::string& name : output_names) {
      Tensor t = inputs[0];
      auto copy = AllocateTensorBuffer(t.size_bytes);
      std::memcpy(copy.get(), t.data, t.size_bytes);
      t.name = name;
      t.data = copy.get();
      t.owner = std::move(copy);
      outputs->push_back(std::move(t));
    }
    return Status::Ok();
  }

 private:
  std::atomic<int>* runs_;
  const Fails fails_;
  const std::optional<ModelSignature> signature_;
  const std::function<void()>* const on_run_;  // the backend's; may be empty
};

class FakeBackend : public Backend {
 public:
  std::string_view name() const override { return "onnxruntime"; }
  std::string_view platform() const override { return "onnxruntime_onnx"; }
  std::string_view default_model_filename() const override { return "model.onnx"; }

  StatusOr<ModelSignature> Inspect(const std::string& path) override {
    ++inspections;
    return Read(path);
  }

  StatusOr<std::unique_ptr<ModelInstance>> CreateInstance(const std::string& path,
                                                          const InstanceOptions& options) override {
    ASSIGN_OR_RETURN(ModelSignature signature, Read(path));
    if (on_create_instance) on_create_instance(path);
    {
      std::lock_guard l(mu_);
      last_options_ = options;
    }
    ++instances_created;
    std::ifstream in(path);
    std::string word;
    in >> word;
    const auto fails = word == "zero_fails" ? FakeInstance::Fails::kOnZeros
                       : word == "breaks"   ? FakeInstance::Fails::kAlways
                                            : FakeInstance::Fails::kNever;
    return std::unique_ptr<ModelInstance>(new FakeInstance(
        &runs, fails,
        instances_report_signature ? std::optional(std::move(signature)) : std::nullopt, &on_run));
  }

  // Counts the instances a load creates beside its first one (the hook a backend may use to
  // share the first one's engine state).
  StatusOr<std::unique_ptr<ModelInstance>> CreateAnotherInstance(
      const ModelInstance& first, const std::string& path,
      const InstanceOptions& options) override {
    if (dynamic_cast<const FakeInstance*>(&first) == nullptr)
      return Internal("another instance's first is not this backend's");
    ++siblings_created;
    return CreateInstance(path, options);
  }

  InstanceOptions last_options() {
    std::lock_guard l(mu_);
    return last_options_;
  }

  // Set before the first load, not changed while one runs.
  std::function<void(const std::string& path)> on_create_instance;
  // Called in each run, after `runs` counts it (a test's latch, or a slow run).
  std::function<void()> on_run;
  bool instances_report_signature = false;
  std::atomic<int> instances_created{0};  // all of them, siblings included
  std::atomic<int> siblings_created{0};
  std::atomic<int> inspections{0};
  std::atomic<int> runs{0};

 private:
  static StatusOr<ModelSignature> Read(const std::string& path) {
    std::ifstream in(path);
    if (!in) return NotFound("model file " + path + " does not exist");
    std::string word, dtype;
    in >> word >> dtype;
    if (word == "too_big") return ResourceExhausted(path + ": not enough memory for the model");
    auto type = DataTypeFromName(dtype);
    if ((word != "identity" && word != "zero_fails" && word != "breaks") || !type)
      return InvalidArgument(path + ": not a valid model file");
    TensorSpec spec{"INPUT0", *type, {}};
    int64_t d;
    while (in >> d) spec.dims.push_back(d);
    ModelSignature sig;
    sig.inputs.push_back(spec);
    spec.name = "OUTPUT0";
    sig.outputs.push_back(spec);
    return sig;
  }

  std::mutex mu_;
  InstanceOptions last_options_;
};

// A FakeInstance whose runs wait until the test opens the gate (`gate`'s promise is set): to
// hold requests in flight.
class GatedInstance : public ModelInstance {
 public:
  GatedInstance(std::atomic<int>* runs, std::shared_future<void> gate)
      : inner_(runs), gate_(std::move(gate)) {}
  Status Run(std::span<const Tensor> inputs, std::span<const std::string> output_names,
             std::vector<Tensor>* outputs, const RunContext& context) override {
    gate_.wait();
    return inner_.Run(inputs, output_names, outputs, context);
  }

 private:
  FakeInstance inner_;
  std::shared_future<void> gate_;
};

}  // namespace harrier::testing
