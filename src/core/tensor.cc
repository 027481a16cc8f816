#include "harrier/tensor.h"

#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "core/block_pool.h"

namespace harrier {

std::optional<int64_t> ElementCount(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

std::string ShapeToString(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  s += ']';
  return s;
}

Status ValidateBytesTensor(std::span<const std::byte> bytes, int64_t element_count) {
  size_t pos = 0;
  for (int64_t i = 0; i < element_count; ++i) {
    if (bytes.size() - pos < 4) {
      return InvalidArgument("BYTES element " + std::to_string(i) + " of " +
                             std::to_string(element_count) + ": truncated 4-byte length prefix");
    }
    uint32_t len;
    std::memcpy(&len, bytes.data() + pos, 4);  // little-endian hosts only (x86-64, aarch64)
    pos += 4;
    if (bytes.size() - pos < len) {
      return InvalidArgument("BYTES element " + std::to_string(i) + " claims " +
                             std::to_string(len) + " bytes but only " +
                             std::to_string(bytes.size() - pos) + " remain");
    }
    pos += len;
  }
  if (pos != bytes.size()) {
    return InvalidArgument("BYTES data has " + std::to_string(bytes.size() - pos) +
                           " bytes after its " + std::to_string(element_count) + " elements");
  }
  return Status::Ok();
}

void AppendBytesElement(std::string* out, std::string_view element) {
  const uint32_t len = static_cast<uint32_t>(element.size());
  char prefix[4];
  std::memcpy(prefix, &len, 4);  // little-endian hosts only, as for ValidateBytesTensor
  out->append(prefix, 4);
  out->append(element);
}

namespace {

constexpr std::align_val_t kAlign{64};

// Small tensor buffers (a JSON input's values, a short BYTES output: one or two per request) come
// from a free list of 64-byte aligned blocks, and their shared_ptr control blocks from a
// BlockPool, so that in a steady state they cost no allocation (issue 10). Each keeps at most
// kFreeSmallBuffers; larger buffers are allocated as they always were. Never destroyed, so that
// a buffer freed during exit still finds them; any thread.
constexpr size_t kSmallBufferBytes = 256;
constexpr size_t kFreeSmallBuffers = kBlockPoolsKeepBlocks ? 256 : 0;

class SmallBufferPool {
 public:
  SmallBufferPool() { free_.reserve(kFreeSmallBuffers); }
  std::byte* Allocate() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        std::byte* p = free_.back();
        free_.pop_back();
        return p;
      }
    }
    return static_cast<std::byte*>(::operator new[](kSmallBufferBytes, kAlign));
  }
  void Free(std::byte* p) noexcept {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (free_.size() < kFreeSmallBuffers) {
        free_.push_back(p);
        return;
      }
    }
    ::operator delete[](p, kAlign);
  }

 private:
  std::mutex mu_;
  std::vector<std::byte*> free_;  // guarded by mu_; capacity reserved at construction
};

SmallBufferPool& SmallBuffers() {
  static SmallBufferPool* const pool = new SmallBufferPool;
  return *pool;
}

const std::shared_ptr<BlockPool>& SmallBufferOwners() {
  static const auto* const pool =
      new std::shared_ptr<BlockPool>(BlockPool::Make(64, kFreeSmallBuffers));
  return *pool;
}

}  // namespace

std::shared_ptr<std::byte[]> AllocateTensorBuffer(size_t size) {
  if (size <= kSmallBufferBytes) {
    return std::shared_ptr<std::byte[]>(
        SmallBuffers().Allocate(), [](std::byte* q) { SmallBuffers().Free(q); },
        PoolAllocator<std::byte>(SmallBufferOwners()));
  }
  auto* p = static_cast<std::byte*>(::operator new[](size, kAlign));
  return std::shared_ptr<std::byte[]>(p, [](std::byte* q) { ::operator delete[](q, kAlign); });
}

}  // namespace harrier
