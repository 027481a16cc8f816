// HttpHeaders: the header fields of a response, in the order added, as a handler hands them to the
// transport (HttpResponse::headers). Each name and value is copied into one text buffer the object
// owns; the first kInlineFields fields and kInlineTextBytes bytes of that text live inside the
// object, so an ordinary response's headers (an inference's four: Content-Type,
// Inference-Header-Content-Length, Server-Timing, X-Request-Id) cost no heap allocation
// (docs/performance.md, issue 10). Past either limit that part moves to the heap, once, and grows
// there like a std::vector.
//
// Fields are read as string_views (Field) into the object: valid until it is next changed, moved
// from or destroyed. The text is kept as offsets, so copying and moving the object need no fixing
// up; a moved-from object is empty.
// Thread safety: none (a value type).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>

#include "harrier/inline_vector.h"

namespace harrier {

class HttpHeaders {
 public:
  static constexpr std::size_t kInlineFields = 6;
  static constexpr std::size_t kInlineTextBytes = 256;

  struct Field {
    std::string_view name;
    std::string_view value;
    friend bool operator==(const Field&, const Field&) = default;
  };

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Field;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Field;

    const_iterator() = default;
    Field operator*() const { return (*headers_)[index_]; }
    const_iterator& operator++() {
      ++index_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator before = *this;
      ++index_;
      return before;
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) {
      return a.index_ == b.index_;
    }

   private:
    friend class HttpHeaders;
    const_iterator(const HttpHeaders* headers, std::size_t index)
        : headers_(headers), index_(index) {}
    const HttpHeaders* headers_ = nullptr;
    std::size_t index_ = 0;
  };

  HttpHeaders() = default;
  HttpHeaders(std::initializer_list<Field> fields) {
    for (const Field& f : fields) emplace_back(f.name, f.value);
  }
  HttpHeaders(const HttpHeaders& other)
      : fields_(other.fields_),
        heap_text_(other.heap_text_),
        text_size_(other.text_size_),
        text_spilled_(other.text_spilled_) {
    if (!text_spilled_) std::memcpy(inline_text_, other.inline_text_, text_size_);
  }
  HttpHeaders& operator=(const HttpHeaders& other) {
    if (this == &other) return *this;
    fields_ = other.fields_;
    heap_text_ = other.heap_text_;
    text_size_ = other.text_size_;
    text_spilled_ = other.text_spilled_;
    if (!text_spilled_) std::memcpy(inline_text_, other.inline_text_, text_size_);
    return *this;
  }
  HttpHeaders(HttpHeaders&& other) noexcept
      : fields_(std::move(other.fields_)),
        heap_text_(std::move(other.heap_text_)),
        text_size_(other.text_size_),
        text_spilled_(other.text_spilled_) {
    if (!text_spilled_) std::memcpy(inline_text_, other.inline_text_, text_size_);
    other.Reset();
  }
  HttpHeaders& operator=(HttpHeaders&& other) noexcept {
    if (this == &other) return *this;
    fields_ = std::move(other.fields_);
    heap_text_ = std::move(other.heap_text_);
    text_size_ = other.text_size_;
    text_spilled_ = other.text_spilled_;
    if (!text_spilled_) std::memcpy(inline_text_, other.inline_text_, text_size_);
    other.Reset();
    return *this;
  }

  // Appends a field; both strings are copied (they need not outlive the call).
  void emplace_back(std::string_view name, std::string_view value) {
    const uint32_t name_offset = Append(name);
    const uint32_t value_offset = Append(value);
    fields_.push_back(Span{name_offset, static_cast<uint32_t>(name.size()), value_offset,
                           static_cast<uint32_t>(value.size())});
  }
  void push_back(const Field& field) { emplace_back(field.name, field.value); }
  void push_back(const std::pair<std::string, std::string>& field) {
    emplace_back(field.first, field.second);
  }

  std::size_t size() const { return fields_.size(); }
  bool empty() const { return fields_.empty(); }
  Field operator[](std::size_t i) const {
    const Span& s = fields_[i];
    const char* text = Text();
    return Field{std::string_view(text + s.name_offset, s.name_size),
                 std::string_view(text + s.value_offset, s.value_size)};
  }
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size()); }

  void clear() { Reset(); }

  friend bool operator==(const HttpHeaders& a, const HttpHeaders& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i]) return false;
    return true;
  }

 private:
  struct Span {
    uint32_t name_offset = 0;
    uint32_t name_size = 0;
    uint32_t value_offset = 0;
    uint32_t value_size = 0;
  };

  const char* Text() const { return text_spilled_ ? heap_text_.data() : inline_text_; }

  // Copies `s` to the end of the text; returns where it starts.
  uint32_t Append(std::string_view s) {
    const auto offset = static_cast<uint32_t>(text_size_);
    if (!text_spilled_ && text_size_ + s.size() <= kInlineTextBytes) {
      if (!s.empty()) std::memcpy(inline_text_ + text_size_, s.data(), s.size());
    } else {
      if (!text_spilled_) {
        heap_text_.reserve(2 * kInlineTextBytes > text_size_ + s.size() ? 2 * kInlineTextBytes
                                                                        : text_size_ + s.size());
        heap_text_.assign(inline_text_, text_size_);
        text_spilled_ = true;
      }
      heap_text_.append(s.data(), s.size());
    }
    text_size_ += s.size();
    return offset;
  }

  void Reset() {
    fields_.clear();
    heap_text_.clear();
    text_size_ = 0;
    text_spilled_ = false;
  }

  InlineVector<Span, kInlineFields> fields_;
  std::string heap_text_;  // the whole text once text_spilled_
  std::size_t text_size_ = 0;
  bool text_spilled_ = false;
  char inline_text_[kInlineTextBytes];  // the first text_size_ bytes, until text_spilled_
};

}  // namespace harrier
