#include "harrier/inference_request.h"

#include "core/block_pool.h"

namespace harrier {

void* InferenceRequest::operator new(std::size_t size) {
  return ClassPool<InferenceRequest>().Allocate(size);
}

void InferenceRequest::operator delete(void* p, std::size_t size) noexcept {
  ClassPool<InferenceRequest>().Free(p, size);
}

}  // namespace harrier
