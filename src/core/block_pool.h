// BlockPool: a thread-safe free list of equally sized memory blocks, for objects the hot path
// makes once per request and frees soon after (a shared_ptr's control block and its object, an
// Asio handler posted across threads): in a steady state they cost no heap allocation
// (docs/performance.md, issue 10). PoolAllocator<T> hands a pool to std::allocate_shared and to
// Asio (a handler's associated allocator).
//
// Bounded: a pool keeps at most `max_free` blocks; a block freed beyond that, or a request larger
// than `block_size` (or more aligned than alignof(std::max_align_t)), goes to operator new and
// delete as usual. Blocks in use are not counted: the pool never limits what may be allocated,
// only what it keeps.
//
// Under AddressSanitizer the pools keep nothing (kBlockPoolsKeepBlocks): every block goes back to
// operator delete, so that a use after free is still caught.
//
// Ownership: each PoolAllocator holds a shared_ptr to its pool, so a block freed after its
// creator is gone (a response dropped late, a handler destroyed with a stopped io_context)
// still finds the pool alive; the pool frees its blocks when the last holder goes.
// Thread safety: Allocate() and Free() from any thread (one mutex, held for a pointer swap).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "core/sanitizers.h"

namespace harrier {

inline constexpr bool kBlockPoolsKeepBlocks = !kUnderAddressSanitizer;

class BlockPool {
 public:
  BlockPool(std::size_t block_size, std::size_t max_free)
      : block_size_(block_size), max_free_(kBlockPoolsKeepBlocks ? max_free : 0) {
    free_.reserve(max_free_);
  }
  ~BlockPool() {
    for (void* p : free_) ::operator delete(p);
  }
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  static std::shared_ptr<BlockPool> Make(std::size_t block_size, std::size_t max_free) {
    return std::make_shared<BlockPool>(block_size, max_free);
  }

  // `bytes` of storage aligned for any scalar type. Throws std::bad_alloc as operator new does.
  void* Allocate(std::size_t bytes) {
    if (bytes > block_size_) return ::operator new(bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        void* p = free_.back();
        free_.pop_back();
        return p;
      }
    }
    return ::operator new(block_size_);
  }
  // Gives back what Allocate(bytes) returned.
  void Free(void* p, std::size_t bytes) noexcept {
    if (bytes <= block_size_) {
      std::lock_guard<std::mutex> lock(mu_);
      if (free_.size() < max_free_) {
        free_.push_back(p);  // within the capacity reserved: no allocation
        return;
      }
    }
    ::operator delete(p);
  }

  std::size_t block_size() const { return block_size_; }
  std::size_t free_blocks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return free_.size();
  }

 private:
  const std::size_t block_size_;
  const std::size_t max_free_;
  mutable std::mutex mu_;
  std::vector<void*> free_;  // guarded by mu_; capacity max_free_ from construction
};

// The pool of a class that takes its memory from one (its class operator new and delete call
// ClassPool<T>().Allocate / Free): blocks of sizeof(T), at most `kMaxFree` kept, one pool per T
// for the process. Never destroyed, so that an object freed during exit still finds it.
template <typename T, std::size_t kMaxFree = 256>
BlockPool& ClassPool() {
  static BlockPool* const pool = new BlockPool(sizeof(T), kMaxFree);
  return *pool;
}

// A standard allocator over a BlockPool. Single objects come from the pool; arrays and objects
// over the pool's block size (or over-aligned ones) from operator new.
template <typename T>
class PoolAllocator {
 public:
  using value_type = T;

  explicit PoolAllocator(std::shared_ptr<BlockPool> pool) noexcept : pool_(std::move(pool)) {}
  template <typename U>
  PoolAllocator(const PoolAllocator<U>& other) noexcept : pool_(other.pool()) {}  // NOLINT

  T* allocate(std::size_t n) {
    if (n != 1 || alignof(T) > alignof(std::max_align_t)) {
      return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(alignof(T))));
    }
    return static_cast<T*>(pool_->Allocate(sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n != 1 || alignof(T) > alignof(std::max_align_t)) {
      ::operator delete(p, std::align_val_t(alignof(T)));
      return;
    }
    pool_->Free(p, sizeof(T));
  }

  const std::shared_ptr<BlockPool>& pool() const noexcept { return pool_; }

  template <typename U>
  bool operator==(const PoolAllocator<U>& other) const noexcept {
    return pool_ == other.pool();
  }

 private:
  std::shared_ptr<BlockPool> pool_;
};

// One T in a block of a BlockPool, owned as by a std::unique_ptr: moving the box moves a
// pointer. For a large value that travels through several moves, such as a response carried by
// an Asio handler (Asio moves a posted handler four times before it runs; a response with its
// inline headers is ~600 bytes): the value is moved once into the box and once out of it.
template <typename T>
class PoolBox {
 public:
  template <typename... Args>
  static PoolBox Make(std::shared_ptr<BlockPool> pool, Args&&... args) {
    void* block = pool->Allocate(sizeof(T));
    try {
      return PoolBox(new (block) T(std::forward<Args>(args)...), std::move(pool));
    } catch (...) {
      pool->Free(block, sizeof(T));
      throw;
    }
  }
  PoolBox(PoolBox&& other) noexcept
      : value_(std::exchange(other.value_, nullptr)), pool_(std::move(other.pool_)) {}
  PoolBox& operator=(PoolBox&& other) noexcept {
    if (this != &other) {
      Reset();
      value_ = std::exchange(other.value_, nullptr);
      pool_ = std::move(other.pool_);
    }
    return *this;
  }
  ~PoolBox() { Reset(); }

  T& operator*() const noexcept { return *value_; }
  T* operator->() const noexcept { return value_; }

 private:
  PoolBox(T* value, std::shared_ptr<BlockPool> pool) noexcept
      : value_(value), pool_(std::move(pool)) {}
  void Reset() noexcept {
    if (value_ == nullptr) return;
    value_->~T();
    pool_->Free(value_, sizeof(T));
    value_ = nullptr;
  }

  T* value_ = nullptr;
  std::shared_ptr<BlockPool> pool_;
};

}  // namespace harrier
