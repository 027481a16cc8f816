#include "backends/onnxruntime/onnxruntime_instance.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "backends/onnxruntime/onnxruntime_types.h"
#include "core/thread_spawner.h"
#include "harrier/data_type.h"

namespace harrier::ort {
namespace {

// Memory for a zero-byte input with no pointer: ORT wants a non-null buffer.
alignas(64) std::byte kEmptyInput[64];

bool Overlaps(std::span<const std::byte> a, const std::byte* p, size_t size) {
  if (a.empty() || size == 0) return false;
  auto lo = reinterpret_cast<uintptr_t>(a.data());
  auto hi = lo + a.size();
  auto q = reinterpret_cast<uintptr_t>(p);
  return q < hi && q + size > lo;
}

std::string NameList(const std::vector<TensorSpec>& specs) {
  std::string s;
  for (const auto& spec : specs) {
    if (!s.empty()) s += ", ";
    s += "'" + spec.name + "'";
  }
  return s;
}

}  // namespace

OnnxRuntimeInstance::OnnxRuntimeInstance(std::shared_ptr<const Ort::Env> env,
                                         std::shared_ptr<Ort::Session> session)
    : env_(std::move(env)),
      session_(std::move(session)),
      cpu_memory_(Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault)) {}

namespace {

// The threads ONNX Runtime's pools will ask for, made before the session is: each waits for
// the work CreatePoolThread gives it, or to be let go. Probe 53: a pool that could not get all of
// its threads never stopped the ones it had (they exit only once every worker has gone idle),
// so the failed session's destruction waited for them for good, and the load with it; made up
// front, a missing thread fails the load before ONNX Runtime starts any.
class ThreadReserve {
 public:
  // kResourceExhausted when `count` threads cannot all be made (those made are let go).
  static StatusOr<std::unique_ptr<ThreadReserve>> Make(int count) {
    std::unique_ptr<ThreadReserve> reserve(new ThreadReserve);
    for (int i = 0; i < count; ++i) {
      auto slot = std::make_shared<Slot>();
      StatusOr<std::thread> thread = SpawnThread([slot] { slot->Wait(); });
      if (!thread.ok()) return thread.status();  // the destructor lets the others go
      slot->thread = std::move(thread).value();
      reserve->slots_.push_back(std::move(slot));
    }
    return reserve;
  }

  // Lets the threads no pool took go, and joins them.
  ~ThreadReserve() {
    for (size_t i = taken_; i < slots_.size(); ++i) {
      slots_[i]->Give(nullptr, nullptr);
      slots_[i]->thread.join();
    }
  }

  // A reserved thread, now running work(param), or null when every one is taken.
  std::thread* Take(OrtThreadWorkerFn work, void* param) {
    if (taken_ == slots_.size()) return nullptr;
    Slot& slot = *slots_[taken_++];
    slot.Give(work, param);
    return new std::thread(std::move(slot.thread));
  }

 private:
  // Shared with its thread, which may read it after the reserve is gone.
  struct Slot {
    std::mutex mu;
    std::condition_variable cv;
    bool given = false;
    OrtThreadWorkerFn work = nullptr;  // null with `given`: let go
    void* param = nullptr;
    std::thread thread;

    void Give(OrtThreadWorkerFn w, void* p) {
      std::lock_guard lock(mu);
      work = w;
      param = p;
      given = true;
      cv.notify_one();
    }
    void Wait() {
      std::unique_lock lock(mu);
      cv.wait(lock, [this] { return given; });
      const OrtThreadWorkerFn w = work;
      void* const p = param;
      lock.unlock();
      if (w == nullptr) return;
      pthread_setname_np(pthread_self(), "ort-intra-op");
      w(p);
    }
  };

  ThreadReserve() = default;
  std::vector<std::shared_ptr<Slot>> slots_;
  size_t taken_ = 0;
};

// What CreatePoolThread is given (the session's custom thread-creation options): ONNX Runtime
// makes its pools' threads while the session is constructed, on the constructing thread.
struct PoolThreads {
  ThreadReserve* reserve = nullptr;
  Status failure;  // a thread past the reserve that could not be made
};

// The handle of a pool thread that could not be made.
constexpr char kNoThread = 0;

// ONNX Runtime's custom thread hooks: its pool threads are the reserve's, or past it (a count
// reckoned short) std::threads from SpawnThread().
OrtCustomThreadHandle CreatePoolThread(void* options, OrtThreadWorkerFn work, void* param) {
  auto* pool = static_cast<PoolThreads*>(options);
  if (pool != nullptr && pool->reserve != nullptr) {
    if (std::thread* thread = pool->reserve->Take(work, param))
      return reinterpret_cast<OrtCustomThreadHandle>(thread);
  }
  StatusOr<std::thread> thread = SpawnThread([work, param] {
    pthread_setname_np(pthread_self(), "ort-intra-op");
    work(param);
  });
  if (!thread.ok()) {
    // Throwing, or returning null (which ONNX Runtime turns into an exception), hangs the load
    // in the half-made pool's destruction; a handle with no thread behind it lets the session
    // be made, and Create fails the load (see there).
    if (pool != nullptr && pool->failure.ok()) pool->failure = thread.status();
    return reinterpret_cast<OrtCustomThreadHandle>(&kNoThread);
  }
  return reinterpret_cast<OrtCustomThreadHandle>(new std::thread(std::move(thread).value()));
}

void JoinPoolThread(OrtCustomThreadHandle handle) {
  if (reinterpret_cast<const char*>(handle) == &kNoThread) return;
  auto* thread = reinterpret_cast<std::thread*>(const_cast<OrtCustomHandleType*>(handle));
  thread->join();
  delete thread;
}

}  // namespace

StatusOr<std::unique_ptr<OnnxRuntimeInstance>> OnnxRuntimeInstance::Create(
    std::shared_ptr<const Ort::Env> env, const std::string& model_path,
    const OnnxRuntimeSessionConfig& config) {
  const std::string context = "loading model '" + model_path + "'";
  try {
    Ort::SessionOptions session_options;
    ApplySessionConfig(config, &session_options);
    // The session's intra-op pool threads start at the normal CPU priority even when the load
    // runs on a (nice +10) model lifecycle thread (core/thread_spawner.h).
    // ONNX Runtime's intra-op pool has intra_op_threads - 1 threads (the caller runs too), its
    // inter-op pool, with parallel execution, inter_op_threads - 1.
    const int pool_threads =
        std::max(0, config.intra_op_threads - 1) +
        (config.parallel_execution ? std::max(0, config.inter_op_threads - 1) : 0);
    StatusOr<std::unique_ptr<ThreadReserve>> reserve = ThreadReserve::Make(pool_threads);
    if (!reserve.ok()) return reserve.status().WithContext(context + ": its thread pool");
    PoolThreads pool{reserve->get(), Status::Ok()};
    session_options.SetCustomCreateThreadFn(CreatePoolThread);
    session_options.SetCustomThreadCreationOptions(&pool);
    session_options.SetCustomJoinThreadFn(JoinPoolThread);
    auto session = std::make_shared<Ort::Session>(*env, model_path.c_str(), session_options);
    reserve->reset();  // lets go of any thread the pools did not take
    if (!pool.failure.ok()) {
      // A pool short of a thread never stops the ones it has: destroying the session would
      // wait for them for good. It is left behind, its idle threads with it, and logged: only a
      // reserve reckoned short (a new ONNX Runtime's pool sizes) gets here.
      spdlog::error(
          "{}: ONNX Runtime's thread pool is short of a thread; the session is left "
          "behind, not freed",
          context);
      new std::shared_ptr<Ort::Session>(std::move(session));  // NOLINT: deliberately leaked
      return pool.failure.WithContext(context + ": its thread pool");
    }
    std::unique_ptr<OnnxRuntimeInstance> instance(
        new OnnxRuntimeInstance(std::move(env), std::move(session)));
    RETURN_IF_ERROR(instance->ResolveIo().WithContext(context));
    return instance;
  } catch (const Ort::Exception& e) {
    return StatusFromOrtException(e, OrtCallSite::kLoad, context);
  } catch (const std::exception& e) {
    return Internal(context + ": " + e.what());
  }
}

StatusOr<std::unique_ptr<OnnxRuntimeInstance>> OnnxRuntimeInstance::Share(
    const OnnxRuntimeInstance& first) {
  try {
    std::unique_ptr<OnnxRuntimeInstance> instance(
        new OnnxRuntimeInstance(first.env_, first.session_));
    RETURN_IF_ERROR(instance->ResolveIo().WithContext("sharing a session"));
    return instance;
  } catch (const Ort::Exception& e) {
    return StatusFromOrtException(e, OrtCallSite::kLoad, "sharing a session");
  } catch (const std::exception& e) {
    return Internal(std::string("sharing a session: ") + e.what());
  }
}

Status OnnxRuntimeInstance::ResolveIo() {
  ASSIGN_OR_RETURN(signature_, ReadSignature(*session_));
  auto to_io = [](const TensorSpec& spec) {
    return Io{spec.name, spec.dtype, *ToOnnxElementType(spec.dtype)};
  };
  // The required inputs first (RunOrThrow checks the first signature_.inputs.size() slots), and
  // a request's names are looked for from the front.
  for (const auto& spec : signature_.inputs) inputs_.push_back(to_io(spec));
  for (const auto& spec : signature_.defaulted_inputs) inputs_.push_back(to_io(spec));
  for (const auto& spec : signature_.outputs) outputs_.push_back(to_io(spec));
  run_input_names_.reserve(inputs_.size());
  run_inputs_.reserve(inputs_.size());
  input_spans_.reserve(inputs_.size());
  scratch_.resize(inputs_.size());
  run_output_names_.reserve(outputs_.size());
  run_outputs_.reserve(outputs_.size());
  return Status::Ok();
}

OnnxRuntimeInstance::Counters OnnxRuntimeInstance::counters() const {
  return {inputs_borrowed_.load(std::memory_order_relaxed),
          inputs_copied_.load(std::memory_order_relaxed),
          outputs_copied_.load(std::memory_order_relaxed)};
}

Status OnnxRuntimeInstance::Run(std::span<const Tensor> inputs,
                                std::span<const std::string> output_names,
                                std::vector<Tensor>* outputs, const RunContext& context) {
  CancellationToken* cancellation = context.cancellation;
  if (cancellation != nullptr && cancellation->cancelled()) {
    outputs->clear();
    return Cancelled("the request was cancelled before the model ran");
  }
  // The callback may fire on another thread at any time until Unregister() returns; the flag
  // it sets is cleared before the next run.
  const uint64_t callback =
      cancellation ? cancellation->OnCancel([this] { run_options_.SetTerminate(); }) : 0;
  Status status;
  try {
    status = RunOrThrow(inputs, output_names, outputs);
  } catch (const Ort::Exception& e) {
    status = StatusFromOrtException(e, OrtCallSite::kRun, "running the model");
  } catch (const std::exception& e) {
    status = Internal(std::string("running the model: ") + e.what());
  }
  if (cancellation != nullptr) {
    cancellation->Unregister(callback);
    if (cancellation->cancelled()) {
      run_options_.UnsetTerminate();
      status = Cancelled("the request was cancelled while the model ran");
    }
  }
  // Drop the values over the caller's memory now, not at the next run.
  run_inputs_.clear();
  run_outputs_.clear();
  input_spans_.clear();
  if (!status.ok()) outputs->clear();
  return status;
}

Status OnnxRuntimeInstance::RunOrThrow(std::span<const Tensor> inputs,
                                       std::span<const std::string> output_names,
                                       std::vector<Tensor>* outputs) {
  outputs->clear();
  const size_t required = signature_.inputs.size();
  auto count_refusal = [&] {
    return InvalidArgument("the model expects " + std::to_string(required) + " inputs (" +
                           NameList(signature_.inputs) + ")" +
                           (required == inputs_.size()
                                ? ""
                                : " and may take " + std::to_string(inputs_.size() - required) +
                                      " that have a value in the model") +
                           ", got " + std::to_string(inputs.size()));
  };
  if (inputs.size() < required || inputs.size() > inputs_.size()) return count_refusal();
  if (output_names.empty()) return Status::Ok();

  run_input_names_.clear();
  run_inputs_.clear();
  input_spans_.clear();
  input_seen_.assign(inputs_.size(), 0);
  for (const Tensor& tensor : inputs) {
    size_t slot = 0;
    while (slot < inputs_.size() && inputs_[slot].name != tensor.name) ++slot;
    if (slot == inputs_.size()) {
      return InvalidArgument("unknown input '" + tensor.name + "'; the model's inputs are " +
                             NameList(signature_.inputs));
    }
    if (input_seen_[slot]) return InvalidArgument("input '" + tensor.name + "' is given twice");
    input_seen_[slot] = 1;
    RETURN_IF_ERROR(PrepareInput(tensor, slot));
  }
  // The required inputs are the first `required` slots; a defaulted one left out keeps the
  // model's value.
  for (size_t slot = 0; slot < required; ++slot) {
    if (!input_seen_[slot]) {
      return InvalidArgument("input '" + inputs_[slot].name + "' is missing; the model expects " +
                             NameList(signature_.inputs));
    }
  }

  run_output_names_.clear();
  for (const std::string& name : output_names) {
    size_t j = 0;
    while (j < outputs_.size() && outputs_[j].name != name) ++j;
    if (j == outputs_.size()) {
      return InvalidArgument("unknown output '" + name + "'; the model's outputs are " +
                             NameList(signature_.outputs));
    }
    run_output_names_.push_back(outputs_[j].name.c_str());
  }
  run_outputs_.clear();
  for (size_t i = 0; i < run_output_names_.size(); ++i) run_outputs_.emplace_back(nullptr);

  session_->Run(run_options_, run_input_names_.data(), run_inputs_.data(), run_inputs_.size(),
                run_output_names_.data(), run_outputs_.data(), run_outputs_.size());

  outputs->reserve(run_outputs_.size());
  for (size_t i = 0; i < run_outputs_.size(); ++i) {
    ASSIGN_OR_RETURN(Tensor out, ConvertOutput(std::move(run_outputs_[i]), output_names[i]));
    outputs->push_back(std::move(out));
  }
  return Status::Ok();
}

Status OnnxRuntimeInstance::PrepareInput(const Tensor& tensor, size_t slot) {
  const Io& io = inputs_[slot];
  if (tensor.dtype != io.dtype) {
    return InvalidArgument("input '" + io.name + "' is " + std::string(DataTypeName(tensor.dtype)) +
                           "; the model expects " + std::string(DataTypeName(io.dtype)));
  }
  std::optional<int64_t> count = ElementCount(tensor.shape);
  if (!count) {
    return InvalidArgument("input '" + io.name + "' has an invalid shape " +
                           ShapeToString(tensor.shape));
  }
  const int64_t* shape = tensor.shape.data();
  const size_t rank = tensor.shape.size();

  if (io.dtype == DataType::kBytes) {
    // ORT keeps strings as std::string: one copy is unavoidable. Length-prefixed elements may
    // hold NULs, so each element is written through its resized buffer, not as a C string.
    // Every element needs its 4-byte prefix: checked before ORT constructs `count` strings.
    if (static_cast<uint64_t>(*count) > tensor.size_bytes / sizeof(uint32_t)) {
      return InvalidArgument("input '" + io.name + "': " + std::to_string(tensor.size_bytes) +
                             " bytes cannot hold " + std::to_string(*count) + " BYTES elements");
    }
    Ort::Value value = Ort::Value::CreateTensor(allocator_, shape, rank, io.onnx_type);
    const std::byte* p = tensor.data;
    size_t left = tensor.size_bytes;
    for (int64_t i = 0; i < *count; ++i) {
      uint32_t len;
      if (left < sizeof(len)) {
        return InvalidArgument("input '" + io.name + "': BYTES element " + std::to_string(i) +
                               " has a truncated 4-byte length prefix");
      }
      std::memcpy(&len, p, sizeof(len));  // little-endian hosts only, as tensor.h
      p += sizeof(len);
      left -= sizeof(len);
      if (left < len) {
        return InvalidArgument("input '" + io.name + "': BYTES element " + std::to_string(i) +
                               " claims " + std::to_string(len) + " bytes but only " +
                               std::to_string(left) + " remain");
      }
      if (len > 0) {
        char* dst = value.GetResizedStringTensorElementBuffer(static_cast<size_t>(i), len);
        std::memcpy(dst, p, len);
      }
      p += len;
      left -= len;
    }
    if (left != 0) {
      return InvalidArgument("input '" + io.name + "': " + std::to_string(left) +
                             " bytes follow the last BYTES element");
    }
    run_inputs_.push_back(std::move(value));
    run_input_names_.push_back(io.name.c_str());
    return Status::Ok();
  }

  const size_t element_size = DataTypeByteSize(io.dtype);
  if (static_cast<uint64_t>(*count) > std::numeric_limits<size_t>::max() / element_size) {
    return InvalidArgument("input '" + io.name + "' is too large: shape " +
                           ShapeToString(tensor.shape));
  }
  const size_t size_bytes = static_cast<size_t>(*count) * element_size;
  if (tensor.size_bytes != size_bytes) {
    return InvalidArgument("input '" + io.name + "' holds " + std::to_string(tensor.size_bytes) +
                           " bytes; shape " + ShapeToString(tensor.shape) + " of " +
                           std::string(DataTypeName(io.dtype)) + " needs " +
                           std::to_string(size_bytes));
  }
  const std::byte* data = tensor.data;
  if (data == nullptr) {
    if (size_bytes != 0) return InvalidArgument("input '" + io.name + "' has no data");
    data = kEmptyInput;  // ORT never writes to an input
  } else if (reinterpret_cast<uintptr_t>(data) % element_size != 0) {
    // Misaligned (e.g. a binary tensor after a JSON header of any length): ORT's kernels may
    // assume natural alignment, so copy into the slot's reusable aligned buffer.
    Scratch& scratch = scratch_[slot];
    if (scratch.capacity < size_bytes) {
      scratch.buffer = AllocateTensorBuffer(size_bytes);
      scratch.capacity = size_bytes;
    }
    std::memcpy(scratch.buffer.get(), data, size_bytes);
    data = scratch.buffer.get();
    inputs_copied_.fetch_add(1, std::memory_order_relaxed);
  } else {
    inputs_borrowed_.fetch_add(1, std::memory_order_relaxed);
  }
  input_spans_.emplace_back(data, size_bytes);
  // const_cast: ORT's API takes a mutable pointer, but it only reads graph inputs.
  run_inputs_.push_back(Ort::Value::CreateTensor(cpu_memory_, const_cast<std::byte*>(data),
                                                 size_bytes, shape, rank, io.onnx_type));
  run_input_names_.push_back(io.name.c_str());
  return Status::Ok();
}

StatusOr<Tensor> OnnxRuntimeInstance::ConvertOutput(Ort::Value value, const std::string& name) {
  if (!value.IsTensor()) return Internal("output '" + name + "' is not a tensor");
  auto info = value.GetTensorTypeAndShapeInfo();
  const ONNXTensorElementDataType element_type = info.GetElementType();
  std::optional<DataType> dtype = FromOnnxElementType(element_type);
  if (!dtype) {
    return Internal("output '" + name + "' has unsupported element type " +
                    std::string(OnnxElementTypeName(element_type)));
  }
  Tensor out;
  out.name = name;
  out.dtype = *dtype;
  out.shape = info.GetShape();
  const size_t count = info.GetElementCount();

  if (*dtype == DataType::kBytes) {
    // Harrier's BYTES layout: for each element a 4-byte LE length, then the bytes.
    string_lengths_.resize(count);
    size_t total = 0;
    for (size_t i = 0; i < count; ++i) {
      string_lengths_[i] = value.GetStringTensorElementLength(i);
      if (string_lengths_[i] > std::numeric_limits<uint32_t>::max()) {
        return Internal("output '" + name + "': a string over 4 GiB cannot be serialized");
      }
      total += sizeof(uint32_t) + string_lengths_[i];
    }
    std::shared_ptr<std::byte[]> buffer = AllocateTensorBuffer(total);
    std::byte* p = buffer.get();
    for (size_t i = 0; i < count; ++i) {
      const auto len = static_cast<uint32_t>(string_lengths_[i]);
      std::memcpy(p, &len, sizeof(len));
      p += sizeof(len);
      if (len > 0) value.GetStringTensorElement(len, i, p);
      p += len;
    }
    out.data = buffer.get();
    out.size_bytes = total;
    out.owner = std::move(buffer);
    return out;
  }

  out.size_bytes = count * DataTypeByteSize(*dtype);
  auto holder =
      std::allocate_shared<Ort::Value>(PoolAllocator<Ort::Value>(owner_pool_), std::move(value));
  out.data = static_cast<const std::byte*>(holder->GetTensorRawData());
  for (const auto& input : input_spans_) {
    if (Overlaps(input, out.data, out.size_bytes)) {
      // ORT may hand back a graph input's own buffer as an output (pass-through graphs). That
      // memory belongs to the request, which can go away before the response, or is scratch
      // the next run overwrites: copy it.
      std::shared_ptr<std::byte[]> copy = AllocateTensorBuffer(out.size_bytes);
      std::memcpy(copy.get(), out.data, out.size_bytes);
      out.data = copy.get();
      out.owner = std::move(copy);
      outputs_copied_.fetch_add(1, std::memory_order_relaxed);
      return out;
    }
  }
  out.owner = std::move(holder);
  return out;
}

}  // namespace harrier::ort
