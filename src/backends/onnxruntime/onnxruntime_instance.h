// OnnxRuntimeInstance: one model instance running an Ort::Session. Internal to the ONNX Runtime
// backend; OnnxRuntimeBackend::CreateInstance builds it. The session (the model's graph and
// weights) is the instance's own unless it was made with Share(): then the instances of a version
// run one session, concurrently (ONNX Runtime's Run is safe to call from several threads), and
// the weights are in memory once.
//
// Inputs are handed to ONNX Runtime without a copy (Ort::Value over the tensor's own memory)
// whenever the pointer is aligned for the element type; otherwise they are copied into an
// aligned scratch buffer the instance keeps and reuses. BYTES inputs are parsed into ORT string
// tensors (a copy ORT's string type makes unavoidable). Outputs stay in the memory ONNX Runtime
// allocated: each output Tensor points into its Ort::Value and owns it through Tensor::owner.
// STRING outputs are serialized into Harrier's BYTES layout.
//
// Thread safety: Run is called by one thread at a time (it reuses per-instance vectors).
// counters() may be read from any thread.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/onnxruntime/onnxruntime_session_config.h"
#include "core/block_pool.h"
#include "harrier/backend.h"
#include "harrier/status.h"
#include "harrier/tensor.h"

namespace harrier::ort {

class OnnxRuntimeInstance final : public ModelInstance {
 public:
  // How inputs reached ONNX Runtime, since the instance was created.
  struct Counters {
    uint64_t inputs_borrowed = 0;  // fixed-size inputs passed over the caller's memory
    uint64_t inputs_copied = 0;    // fixed-size inputs copied because they were misaligned
    uint64_t outputs_copied = 0;   // outputs that aliased input memory and were copied
  };

  // Loads `model_path` with `config`. `env` must stay alive as long as the session; the
  // instance keeps a reference. Errors: see OnnxRuntimeBackend::CreateInstance.
  static StatusOr<std::unique_ptr<OnnxRuntimeInstance>> Create(
      std::shared_ptr<const Ort::Env> env, const std::string& model_path,
      const OnnxRuntimeSessionConfig& config);
  // Another instance over `first`'s session: it keeps the session alive, and has its own run
  // state (scratch buffers, run options, counters). Errors: kInternal for engine failures.
  static StatusOr<std::unique_ptr<OnnxRuntimeInstance>> Share(const OnnxRuntimeInstance& first);

  // Errors (never an exception): kInvalidArgument for inputs that do not fit the model (count,
  // unknown or repeated name, dtype, byte size, malformed BYTES, unknown output name) or that
  // ONNX Runtime rejects as invalid; kInternal for other engine failures. With no output names,
  // nothing is run and `outputs` is left empty. kCancelled when context.cancellation fires
  // during the run: ORT's terminate flag stops it between kernels.
  Status Run(std::span<const Tensor> inputs, std::span<const std::string> output_names,
             std::vector<Tensor>* outputs, const RunContext& context) override;

  Counters counters() const;
  const ModelSignature* signature() const override { return &signature_; }
  // Whether two instances run the same session (for tests).
  bool SharesSessionWith(const OnnxRuntimeInstance& other) const {
    return session_ == other.session_;
  }

 private:
  struct Io {
    std::string name;
    DataType dtype = DataType::kInvalid;
    ONNXTensorElementDataType onnx_type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  };
  // A reusable, 64-byte aligned buffer for one misaligned input.
  struct Scratch {
    std::shared_ptr<std::byte[]> buffer;
    size_t capacity = 0;
  };

  OnnxRuntimeInstance(std::shared_ptr<const Ort::Env> env, std::shared_ptr<Ort::Session> session);
  Status ResolveIo();
  // Builds the ORT value for inputs[i] into run_inputs_ (input slot `slot`).
  Status PrepareInput(const Tensor& tensor, size_t slot);
  StatusOr<Tensor> ConvertOutput(Ort::Value value, const std::string& name);
  Status RunOrThrow(std::span<const Tensor> inputs, std::span<const std::string> output_names,
                    std::vector<Tensor>* outputs);

  // Constant after construction.
  std::shared_ptr<const Ort::Env> env_;  // outlives session_ (declared first, destroyed last)
  std::shared_ptr<Ort::Session> session_;  // this instance's own, or shared (Share())
  Ort::MemoryInfo cpu_memory_;
  Ort::AllocatorWithDefaultOptions allocator_;  // for string tensors
  ModelSignature signature_;
  std::vector<Io> inputs_;
  std::vector<Io> outputs_;

  // Used by the one thread in Run; kept between runs so that a run allocates little.
  // A later change adds cancellation through run_options_.SetTerminate().
  Ort::RunOptions run_options_;
  std::vector<const char*> run_input_names_;
  std::vector<Ort::Value> run_inputs_;
  std::vector<const char*> run_output_names_;
  std::vector<Ort::Value> run_outputs_;
  std::vector<char> input_seen_;
  // Fixed-size input memory ORT reads this run (caller's or scratch), to catch aliased outputs.
  std::vector<std::span<const std::byte>> input_spans_;
  std::vector<Scratch> scratch_;        // one per model input
  std::vector<size_t> string_lengths_;  // STRING output serialization
  // The blocks of output owners (a shared_ptr control block holding the Ort::Value), recycled
  // when a response lets go of its outputs, on whatever thread: an output costs no allocation
  // of Harrier's own beyond its shape (issue 10). Keeps at most kFreeOwners.
  static constexpr size_t kOwnerBlockBytes = 64;
  static constexpr size_t kFreeOwners = 16;
  std::shared_ptr<BlockPool> owner_pool_ = BlockPool::Make(kOwnerBlockBytes, kFreeOwners);

  std::atomic<uint64_t> inputs_borrowed_{0};
  std::atomic<uint64_t> inputs_copied_{0};
  std::atomic<uint64_t> outputs_copied_{0};
};

}  // namespace harrier::ort
