#include "lifecycle/warmup.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>

#include "repository/config_data_type.h"
#include "repository/file_system.h"

namespace harrier {
namespace {

// A tensor that owns `buffer`, of `bytes` bytes.
Tensor OwningTensor(const std::string& name, DataType dtype, Shape shape,
                    std::shared_ptr<std::byte[]> buffer, size_t bytes) {
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = buffer.get();
  t.size_bytes = bytes;
  t.owner = std::move(buffer);
  return t;
}

// The bytes a zero-filled tensor of `shape` takes (a BYTES element: its 4-byte length), or none
// when that does not fit in an int64.
std::optional<int64_t> ZeroTensorBytes(const Shape& shape, DataType dtype) {
  const std::optional<int64_t> count = ElementCount(shape);
  const auto element =
      static_cast<int64_t>(dtype == DataType::kBytes ? 4 : DataTypeByteSize(dtype));
  int64_t bytes = 0;
  if (!count || __builtin_mul_overflow(*count, element, &bytes)) return std::nullopt;
  return bytes;
}

// Zero-filled bytes are a valid tensor of every type, BYTES included (each element an empty
// string: a zero 4-byte length). REQUIRES: ZeroTensorBytes(shape, dtype) was checked.
Tensor ZeroTensor(const std::string& name, DataType dtype, Shape shape) {
  const auto bytes = static_cast<size_t>(ZeroTensorBytes(shape, dtype).value_or(0));
  auto buffer = AllocateTensorBuffer(bytes);
  std::memset(buffer.get(), 0, bytes);
  return OwningTensor(name, dtype, std::move(shape), std::move(buffer), bytes);
}

// Shape with free dims set to 1, and the batch dim (when batching) set to `batch`.
Shape ConcreteShape(const ModelIO& io, const std::vector<int64_t>& dims, int64_t batch) {
  Shape shape;
  if (io.max_batch_size > 0) shape.push_back(batch);
  for (int64_t d : dims) shape.push_back(d < 0 ? 1 : d);
  return shape;
}

// One configured warm-up input, sized: what BuildWarmup allocates (or reads) once all are.
struct PlannedInput {
  std::string name;
  std::string what;  // "warm-up 'W', input 'NAME'", for errors
  DataType dtype = DataType::kInvalid;
  Shape shape;
  bool random = false;
  std::string file;           // under the model's warmup/ directory; empty: zero or random data
  std::string path;           // the file, resolved inside the model's directory (ResolveInside)
  int64_t samples = 1;        // a file holds one sample; a batch repeats it
  uint64_t sample_bytes = 0;  // read from the file
  size_t bytes = 0;           // the whole tensor
};

// Sizes one input of warm-up `w` into `planned`, as Triton reads it: a file holds one sample --
// for a fixed-size type at least that sample's bytes (the rest is not read), for BYTES the whole
// file (length-prefixed strings) -- and a batch of samples repeats it. `left`: what the warm-up
// may still take; it is reduced by the input's size.
Status PlanWarmupInput(const inference::ModelWarmup& w, const std::string& name,
                       const inference::ModelWarmup::Input& in, const ModelIO& io,
                       const std::string& model_dir, int64_t* left, PlannedInput* planned) {
  const int64_t batch = std::max<uint32_t>(1, w.batch_size());
  planned->name = name;
  planned->dtype = FromConfigType(in.data_type());
  if (io.max_batch_size > 0) planned->shape.push_back(batch);
  planned->shape.insert(planned->shape.end(), in.dims().begin(), in.dims().end());
  planned->samples = io.max_batch_size > 0 ? batch : 1;
  const std::string what = "warm-up '" + w.name() + "', input '" + name + "'";
  planned->what = what;
  // "the N bytes a model's warm-up may take in all", or what is left of them.
  const std::string limit =
      *left == kMaxWarmupBytes
          ? "the " + std::to_string(kMaxWarmupBytes) + " bytes a model's warm-up may take in all"
          : "the " + std::to_string(*left) + " bytes left of the " +
                std::to_string(kMaxWarmupBytes) + " a model's warm-up may take in all";
  const std::optional<int64_t> shape_bytes = ZeroTensorBytes(planned->shape, planned->dtype);
  int64_t bytes = shape_bytes.value_or(0);
  if (!shape_bytes || bytes > *left) {
    return InvalidArgument(what + ": shape " + ShapeToString(planned->shape) + " takes more than " +
                           limit);
  }
  if (in.has_input_data_file()) {
    planned->file = in.input_data_file();
    const std::string file_what = what + ": input_data_file '" + planned->file + "'";
    // Inside the model's directory, links followed: fed to the model otherwise from anywhere.
    StatusOr<std::string> resolved = ResolveInside(model_dir, "warmup/" + planned->file);
    if (!resolved.ok()) {
      return InvalidArgument(file_what + ": " + std::string(resolved.status().message()));
    }
    planned->path = std::move(resolved).value();
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(planned->path, ec);
    if (ec) return InvalidArgument(file_what + ": " + ec.message());
    planned->sample_bytes = size;
    if (planned->dtype != DataType::kBytes) {
      planned->sample_bytes = static_cast<uint64_t>(bytes / planned->samples);
      if (size < planned->sample_bytes) {
        return InvalidArgument(file_what + " holds " + std::to_string(size) +
                               " bytes; one sample of " +
                               ShapeToString(Shape(in.dims().begin(), in.dims().end())) + " " +
                               std::string(DataTypeName(planned->dtype)) + " takes " +
                               std::to_string(planned->sample_bytes));
      }
    }
    // Divided, not multiplied: a (sparse) BYTES file's size times the batch can pass 2^64.
    if (planned->sample_bytes >
        static_cast<uint64_t>(*left) / static_cast<uint64_t>(planned->samples)) {
      return InvalidArgument(file_what + ": " + std::to_string(planned->samples) + " x " +
                             std::to_string(planned->sample_bytes) + " bytes, over " + limit);
    }
    bytes = static_cast<int64_t>(planned->sample_bytes) * planned->samples;
  } else {
    planned->random = in.has_random_data() && planned->dtype != DataType::kBytes;
  }
  planned->bytes = static_cast<size_t>(bytes);
  *left -= bytes;
  return Status::Ok();
}

// The tensor `planned` describes: read from its file (its resolved path), or zero-filled
// (random when asked).
StatusOr<Tensor> MakeWarmupInput(const PlannedInput& planned, std::mt19937& rng) {
  if (planned.file.empty()) {
    Tensor t = ZeroTensor(planned.name, planned.dtype, planned.shape);
    if (planned.random) {
      auto* p = const_cast<std::byte*>(t.data);
      for (size_t i = 0; i < t.size_bytes; ++i) p[i] = std::byte(rng() & 0x3f);  // small values
    }
    return t;
  }
  auto buffer = AllocateTensorBuffer(planned.bytes);
  std::ifstream in(planned.path, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(buffer.get()),
               static_cast<std::streamsize>(planned.sample_bytes))) {
    return InvalidArgument(planned.what + ": input_data_file '" + planned.file + "': cannot read " +
                           std::to_string(planned.sample_bytes) + " bytes");
  }
  for (int64_t i = 1; i < planned.samples; ++i)
    std::memcpy(buffer.get() + i * planned.sample_bytes, buffer.get(), planned.sample_bytes);
  return OwningTensor(planned.name, planned.dtype, planned.shape, std::move(buffer), planned.bytes);
}

}  // namespace

StatusOr<Warmup> BuildWarmup(const inference::ModelConfig& config, const ModelIO& io,
                             const std::string& model_dir) {
  Warmup warmup;
  std::vector<WarmupSample>& samples = warmup.samples;
  if (config.model_warmup_size() == 0) {
    // Default: one zero-filled run, so the first real request does not pay for lazy set-up. A
    // config may give an input dims the model leaves free, as large as it likes: sized first,
    // against the same budget as a configured warm-up.
    warmup.implicit = true;
    WarmupSample s{"default zero-filled run", 1, {}};
    int64_t total = 0;
    for (const IoSpec& in : io.inputs) {
      if (in.optional) continue;
      const Shape shape = ConcreteShape(io, in.dims, 1);
      const std::optional<int64_t> bytes = ZeroTensorBytes(shape, in.dtype);
      if (!bytes || __builtin_add_overflow(total, *bytes, &total) || total > kMaxWarmupBytes) {
        warmup.skipped = "not run: input '" + in.name + "' of shape " + ShapeToString(shape) +
                         " takes the default warm-up past the " + std::to_string(kMaxWarmupBytes) +
                         " bytes a warm-up may take in all";
        return warmup;
      }
    }
    for (const IoSpec& in : io.inputs)
      if (!in.optional)
        s.inputs.push_back(ZeroTensor(in.name, in.dtype, ConcreteShape(io, in.dims, 1)));
    samples.push_back(std::move(s));
    return warmup;
  }
  // Every input of every sample is sized first, so that nothing is allocated or read for a
  // warm-up that asks for more than it may take.
  int64_t left = kMaxWarmupBytes;
  std::vector<std::vector<PlannedInput>> planned(config.model_warmup_size());
  for (int i = 0; i < config.model_warmup_size(); ++i) {
    const auto& w = config.model_warmup(i);
    for (const auto& [name, in] : w.inputs()) {
      RETURN_IF_ERROR(
          PlanWarmupInput(w, name, in, io, model_dir, &left, &planned[i].emplace_back()));
    }
  }
  std::mt19937 rng(12345);
  for (int i = 0; i < config.model_warmup_size(); ++i) {
    const auto& w = config.model_warmup(i);
    WarmupSample s{w.name(), static_cast<int>(std::max<uint32_t>(1, w.count())), {}};
    for (const PlannedInput& input : planned[i]) {
      ASSIGN_OR_RETURN(Tensor t, MakeWarmupInput(input, rng));
      s.inputs.push_back(std::move(t));
    }
    samples.push_back(std::move(s));
  }
  return warmup;
}

Status RunWarmup(const std::vector<WarmupSample>& samples, const ModelIO& io,
                 std::string_view model_name, ModelScheduler& scheduler,
                 const std::atomic<bool>* stop, const std::atomic<bool>* unload) {
  for (const WarmupSample& s : samples) {
    // Warm-up inputs pass the same checks as a client's, so a bad model_warmup is reported.
    InferenceRequest check;
    check.inputs = s.inputs;
    std::vector<std::string> outputs;
    RETURN_IF_ERROR(ValidateAndPrepare(io, model_name, &check, &outputs)
                        .WithContext("warm-up sample '" + s.name + "'"));
    for (int i = 0; i < s.runs; ++i) {
      const bool stopping = stop != nullptr && stop->load(std::memory_order_relaxed);
      if (stopping || (unload != nullptr && unload->load(std::memory_order_relaxed))) {
        return Unavailable(
            "warm-up sample '" + s.name + "' stopped after " + std::to_string(i) + " of " +
            std::to_string(s.runs) + " runs: " +
            (stopping ? "the server is stopping" : "an unload of the model was asked for"));
      }
      RETURN_IF_ERROR(scheduler
                          .RunOnEachInstance([&](ModelInstance& instance) {
                            std::vector<Tensor> out;
                            return instance.Run(check.inputs, outputs, &out, RunContext{});
                          })
                          .WithContext("warm-up sample '" + s.name + "'"));
    }
  }
  return Status::Ok();
}

}  // namespace harrier
