#include "harrier/inference_request.h"

#include "core/block_pool.h"

namespace harrier {
namespace {

// InferenceRequest's pool; never destroyed, so that a request freed during exit still finds it.
BlockPool& InferenceRequestPool() {
  static BlockPool* const pool = new BlockPool(sizeof(InferenceRequest), 256);
  return *pool;
}

}  // namespace

void* InferenceRequest::operator new(std::size_t size) {
  return InferenceRequestPool().Allocate(size);
}

void InferenceRequest::operator delete(void* p, std::size_t size) noexcept {
  InferenceRequestPool().Free(p, size);
}

}  // namespace harrier
