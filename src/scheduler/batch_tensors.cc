#include "scheduler/batch_tensors.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>
#include <string>

namespace harrier {
namespace {

// A gather buffer of at least this size is mapped from the kernel, and unmapped when it goes, so
// that a shrink or a release gives its memory back to the system. From malloc, glibc's dynamic
// mmap threshold (it rises to 32 MiB after the first large free) kept buffers below that in the
// heap, resident, after they were freed.
constexpr size_t kMappedGatherBytes = size_t{1} << 20;

std::shared_ptr<std::byte[]> GatherBuffer(size_t capacity) {
  if (capacity < kMappedGatherBytes) return AllocateTensorBuffer(capacity);
  void* p = ::mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p),
                                      [capacity](std::byte* q) { ::munmap(q, capacity); });
}

const Tensor* FindInput(const InferenceRequest& r, const std::string& name, size_t hint) {
  if (hint < r.inputs.size() && r.inputs[hint].name == name) return &r.inputs[hint];
  for (const Tensor& t : r.inputs)
    if (t.name == name) return &t;
  return nullptr;
}

bool SameNonBatchDims(const Shape& a, const Shape& b) {
  if (a.size() != b.size() || a.empty()) return false;
  return std::equal(a.begin() + 1, a.end(), b.begin() + 1);
}

}  // namespace

bool BatchCompatible(const ScheduledRequest& a, const ScheduledRequest& b) {
  const InferenceRequest& ra = *a.request;
  const InferenceRequest& rb = *b.request;
  if (ra.inputs.size() != rb.inputs.size() ||
      !std::ranges::equal(a.outputs_to_compute(), b.outputs_to_compute()))
    return false;
  for (size_t i = 0; i < ra.inputs.size(); ++i) {
    const Tensor& ta = ra.inputs[i];
    const Tensor* tb = FindInput(rb, ta.name, i);
    if (tb == nullptr || tb->dtype != ta.dtype || !SameNonBatchDims(ta.shape, tb->shape))
      return false;
  }
  return true;
}

std::byte* BatchInputBuffers::Get(size_t index, size_t size) {
  if (index >= slots_.size()) slots_.resize(index + 1);
  Slot& slot = slots_[index];
  slot.period_max = std::max(slot.period_max, size);
  if (++slot.period_calls >= kShrinkPeriod) {
    // Every call of the period fitted in a quarter of the buffer: keep what the largest needed.
    const size_t needed = std::bit_ceil(std::max<size_t>(slot.period_max, 64));
    if (slot.capacity > 4 * needed) Allocate(&slot, needed);
    slot.period_max = 0;
    slot.period_calls = 0;
  }
  if (slot.capacity < size || !slot.buffer)
    Allocate(&slot, std::bit_ceil(std::max<size_t>(size, 64)));
  return slot.buffer.get();
}

void BatchInputBuffers::Allocate(Slot* slot, size_t capacity) {
  slot->buffer.reset();  // the old one first: the two are never held together
  held_bytes_.fetch_sub(slot->capacity, std::memory_order_relaxed);
  slot->buffer = GatherBuffer(capacity);
  slot->capacity = capacity;
  held_bytes_.fetch_add(capacity, std::memory_order_relaxed);
}

void BatchInputBuffers::Release() {
  slots_.clear();
  held_bytes_.store(0, std::memory_order_relaxed);
}

Status GatherInputs(std::span<ScheduledRequest* const> requests, BatchInputBuffers* buffers,
                    std::vector<Tensor>* batched) {
  batched->clear();
  if (requests.empty()) return Status::Ok();
  const InferenceRequest& first = *requests[0]->request;
  for (size_t i = 0; i < first.inputs.size(); ++i) {
    const Tensor& proto = first.inputs[i];
    size_t total_bytes = 0;
    int64_t total_items = 0;
    for (ScheduledRequest* r : requests) {
      const Tensor* t = FindInput(*r->request, proto.name, i);
      if (t == nullptr || t->shape.empty())
        return Internal("batched request lacks input '" + proto.name + "'");
      total_bytes += t->size_bytes;
      total_items += t->shape[0];
    }
    std::byte* out = buffers->Get(i, total_bytes);
    size_t offset = 0;
    for (ScheduledRequest* r : requests) {
      const Tensor* t = FindInput(*r->request, proto.name, i);
      if (t->size_bytes > 0) std::memcpy(out + offset, t->data, t->size_bytes);
      offset += t->size_bytes;
    }
    Tensor b;
    b.name = proto.name;
    b.dtype = proto.dtype;
    b.shape = proto.shape;
    b.shape[0] = total_items;
    b.data = out;
    b.size_bytes = total_bytes;
    batched->push_back(std::move(b));
  }
  return Status::Ok();
}

Status CheckBatchDim(std::span<const Tensor> outputs, int64_t items) {
  for (const Tensor& out : outputs) {
    if (out.shape.empty() || out.shape[0] != items) {
      // The hint: a model read without a config gets batching when its first dims are
      // variable, which an output whose first dim is a count (NonZero, NMS) is too (probe 60).
      return Internal("output '" + out.name + "' has shape " + ShapeToString(out.shape) +
                      " for a batch of " + std::to_string(items) +
                      " (with max_batch_size > 0 every output's first dim is the batch; a model "
                      "whose outputs are not batched needs max_batch_size: 0 in its config)");
    }
  }
  return Status::Ok();
}

Status SplitOutputs(const std::vector<Tensor>& batch_outputs, std::span<const int64_t> item_counts,
                    std::vector<std::vector<Tensor>>* per_request) {
  per_request->assign(item_counts.size(), {});
  int64_t total_items = 0;
  for (int64_t n : item_counts) total_items += n;
  if (Status shaped = CheckBatchDim(batch_outputs, total_items); !shaped.ok()) return shaped;
  for (const Tensor& out : batch_outputs) {
    const int64_t elements = ElementCount(out.shape).value_or(-1);
    if (elements < 0) return Internal("output '" + out.name + "' has an invalid shape");
    const int64_t elements_per_item = total_items > 0 ? elements / total_items : 0;
    size_t offset = 0;
    for (size_t r = 0; r < item_counts.size(); ++r) {
      size_t part_bytes = 0;
      const int64_t part_elements = item_counts[r] * elements_per_item;
      if (out.dtype == DataType::kBytes) {
        // Walk the length-prefixed elements that belong to this part.
        size_t pos = offset;
        for (int64_t e = 0; e < part_elements; ++e) {
          if (pos + 4 > out.size_bytes) return Internal("output '" + out.name + "' is truncated");
          uint32_t len;
          std::memcpy(&len, out.data + pos, 4);
          pos += 4 + static_cast<size_t>(len);
        }
        if (pos > out.size_bytes) return Internal("output '" + out.name + "' is truncated");
        part_bytes = pos - offset;
      } else {
        part_bytes = static_cast<size_t>(part_elements) * DataTypeByteSize(out.dtype);
        if (offset + part_bytes > out.size_bytes)
          return Internal("output '" + out.name + "' is smaller than its shape");
      }
      Tensor part;
      part.name = out.name;
      part.dtype = out.dtype;
      part.shape = out.shape;
      part.shape[0] = item_counts[r];
      part.data = out.data + offset;
      part.size_bytes = part_bytes;
      part.owner = out.owner;
      (*per_request)[r].push_back(std::move(part));
      offset += part_bytes;
    }
  }
  return Status::Ok();
}

}  // namespace harrier
