#include "shared_memory/shared_memory_tensors.h"

#include <cstring>
#include <memory>
#include <utility>
#include <variant>
#include <vector>

namespace harrier {

namespace {

constexpr std::string_view kRegion = "shared_memory_region";
constexpr std::string_view kOffset = "shared_memory_offset";
constexpr std::string_view kByteSize = "shared_memory_byte_size";

StatusOr<std::optional<uint64_t>> NonNegative(const Parameters& parameters, std::string_view key,
                                              std::string_view what) {
  auto it = parameters.find(key);
  if (it == parameters.end()) return std::optional<uint64_t>();
  const int64_t* v = std::get_if<int64_t>(&it->second);
  if (v == nullptr || *v < 0) {
    return InvalidArgument(std::string(what) + ": parameter '" + std::string(key) +
                           "' must be an integer >= 0");
  }
  return std::optional<uint64_t>(static_cast<uint64_t>(*v));
}

// Triton's wording first (clients match on it), then which tensor it was about.
Status Naming(const Status& s, std::string_view what) {
  return Status(s.code(), s.message() + " (" + std::string(what) + ")");
}

Status SharedMemoryOff(std::string_view what) {
  return InvalidArgument(std::string(what) +
                         ": shared memory is not enabled on this server (start it with "
                         "--allow-client-shm=true)");
}

}  // namespace

StatusOr<std::optional<SharedMemoryRef>> SharedMemoryRefOf(const Parameters& parameters,
                                                           std::string_view what) {
  auto region = parameters.find(kRegion);
  ASSIGN_OR_RETURN(std::optional<uint64_t> offset, NonNegative(parameters, kOffset, what));
  ASSIGN_OR_RETURN(std::optional<uint64_t> byte_size, NonNegative(parameters, kByteSize, what));
  if (region == parameters.end() && !offset && !byte_size) return std::optional<SharedMemoryRef>();
  if (region == parameters.end() || !byte_size) {
    return InvalidArgument(std::string(what) +
                           ": must specify both 'shared_memory_region' and "
                           "'shared_memory_byte_size' parameters for shared memory");
  }
  const std::string* name = std::get_if<std::string>(&region->second);
  if (name == nullptr || name->empty()) {
    return InvalidArgument(std::string(what) +
                           ": parameter 'shared_memory_region' must be a non-empty string");
  }
  return std::optional<SharedMemoryRef>(SharedMemoryRef{*name, offset.value_or(0), *byte_size});
}

Status AttachSharedMemoryInput(const SharedMemoryContext& context, const SharedMemoryRef& ref,
                               Tensor* tensor) {
  const std::string what = "input '" + tensor->name + "'";
  if (context.registry == nullptr) return SharedMemoryOff(what);
  const std::optional<int64_t> elements = ElementCount(tensor->shape);
  if (!elements) return InvalidArgument(what + ": invalid shape " + ShapeToString(tensor->shape));
  if (tensor->dtype != DataType::kBytes) {
    const uint64_t expected = static_cast<uint64_t>(*elements) * DataTypeByteSize(tensor->dtype);
    if (ref.byte_size != expected) {
      return InvalidArgument("input byte size mismatch for input '" + tensor->name +
                             "' for model '" + std::string(context.model_name) + "'. Expected " +
                             std::to_string(expected) + ", got " + std::to_string(ref.byte_size) +
                             " (shape " + ShapeToString(tensor->shape) + " of " +
                             std::string(DataTypeName(tensor->dtype)) + ", shared memory region '" +
                             ref.region + "')");
    }
  }
  StatusOr<SharedMemoryWindow> window =
      context.registry->Window(ref.region, ref.offset, ref.byte_size);
  if (!window.ok()) return Naming(window.status(), what);
  if (Status readable = PopulateWindow(window->data, window->byte_size, /*for_write=*/false);
      !readable.ok()) {
    return readable.WithContext(what + " in shared memory region '" + ref.region + "'");
  }
  if (tensor->dtype == DataType::kBytes) {
    // Copied, then validated: the client may rewrite its region while the request waits for
    // its batch, and a BYTES tensor's element boundaries are in its bytes. Left in place, a
    // rewrite after validation shifted the boundaries of the whole batch, which then gave a
    // neighbour's elements to the writer, wrong rows to the neighbour, or failed every request
    // in it (probe 30). A fixed-size type's rows stay the writer's own whatever it writes.
    auto copy =
        std::make_shared<std::vector<std::byte>>(window->data, window->data + window->byte_size);
    Status s = ValidateBytesTensor({copy->data(), copy->size()}, *elements);
    if (!s.ok()) return s.WithContext(what + " in shared memory region '" + ref.region + "'");
    tensor->data = copy->data();
    tensor->size_bytes = copy->size();
    tensor->owner = std::move(copy);
    return Status::Ok();
  }
  tensor->data = window->data;
  tensor->size_bytes = window->byte_size;
  tensor->owner = std::move(window->pin);
  return Status::Ok();
}

StatusOr<std::vector<SharedMemoryOutput>> ResolveSharedMemoryOutputs(
    const SharedMemoryContext& context, const std::vector<RequestedOutput>& outputs) {
  std::vector<SharedMemoryOutput> resolved;
  for (const RequestedOutput& output : outputs) {
    // The common case allocates nothing: no shared-memory parameter, nothing to resolve.
    if (!output.parameters.count(kRegion) && !output.parameters.count(kOffset) &&
        !output.parameters.count(kByteSize)) {
      continue;
    }
    const std::string what = "output '" + output.name + "'";
    ASSIGN_OR_RETURN(std::optional<SharedMemoryRef> ref,
                     SharedMemoryRefOf(output.parameters, what));
    if (!ref) continue;
    if (context.registry == nullptr) return SharedMemoryOff(what);
    if (output.classification > 0) {
      return InvalidArgument(what + ": shared memory and 'classification' cannot be combined");
    }
    StatusOr<SharedMemoryWindow> window =
        context.registry->Window(ref->region, ref->offset, ref->byte_size);
    if (!window.ok()) return Naming(window.status(), what);
    resolved.push_back({output.name, std::move(window).value()});
  }
  return resolved;
}

const SharedMemoryOutput* FindSharedMemoryOutput(std::span<const SharedMemoryOutput> outputs,
                                                 std::string_view name) {
  for (const SharedMemoryOutput& o : outputs) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

Status CheckSharedMemoryOutput(const Tensor& output, const SharedMemoryOutput& target) {
  if (output.size_bytes > target.window.byte_size) {
    return InvalidArgument("shared memory size specified with the request for output '" +
                           output.name + "' (" + std::to_string(target.window.byte_size) +
                           " bytes) should be at least " + std::to_string(output.size_bytes) +
                           " bytes to hold the results");
  }
  // The pages it will be written to, faulted in now: a sparse object's page that a full
  // /dev/shm cannot back raised SIGBUS in the copy (probe 62).
  if (Status writable = PopulateWindow(target.window.data, output.size_bytes, /*for_write=*/true);
      !writable.ok()) {
    return writable.WithContext("output '" + output.name + "' in shared memory region '" +
                                target.window.region + "'");
  }
  return Status::Ok();
}

void WriteSharedMemoryOutput(const Tensor& output, const SharedMemoryOutput& target) {
  if (output.size_bytes > 0) std::memcpy(target.window.data, output.data, output.size_bytes);
}

}  // namespace harrier
