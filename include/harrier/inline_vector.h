// InlineVector<T, N>: a vector whose first N elements live inside the object, so that the usual
// handful costs no heap allocation; the (N+1)th moves every element to a std::vector, after which
// it behaves like one. Elements are contiguous either way (data(), begin()/end()). For per-request
// scratch on the hot path (docs/performance.md), not for long-lived containers.
//
// T must be default-constructible and movable: the inline slots are a std::array<T, N>, and
// clear() resets the ones in use to T{} so that they let go of what they hold.
// Thread safety: none (a value type).
#pragma once

#include <array>
#include <cstddef>
#include <utility>
#include <vector>

namespace harrier {

template <typename T, std::size_t N>
class InlineVector {
 public:
  static_assert(N > 0);

  void push_back(T value) {
    if (!spilled_) {
      if (size_ < N) {
        inline_[size_++] = std::move(value);
        return;
      }
      heap_.reserve(2 * N);
      for (std::size_t i = 0; i < size_; ++i) heap_.push_back(std::exchange(inline_[i], T{}));
      spilled_ = true;
    }
    heap_.push_back(std::move(value));
    ++size_;
  }

  // Removes the element at `i`; the ones after it move down one (order is kept).
  void erase_at(std::size_t i) {
    T* d = data();
    for (std::size_t j = i; j + 1 < size_; ++j) d[j] = std::move(d[j + 1]);
    pop_back();
  }
  void pop_back() {
    if (spilled_) {
      heap_.pop_back();
    } else {
      inline_[size_ - 1] = T{};
    }
    --size_;
  }

  void clear() {
    if (spilled_) {
      heap_.clear();
    } else {
      for (std::size_t i = 0; i < size_; ++i) inline_[i] = T{};
    }
    size_ = 0;
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return spilled_ ? heap_.data() : inline_.data(); }
  const T* data() const { return spilled_ ? heap_.data() : inline_.data(); }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }

 private:
  std::array<T, N> inline_{};
  std::vector<T> heap_;  // every element once spilled_
  std::size_t size_ = 0;
  bool spilled_ = false;
};

}  // namespace harrier
