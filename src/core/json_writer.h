// Appending JSON tokens to a std::string: the small writer behind every JSON body Harrier
// writes (KServe responses, errors, the model config, JSON log lines).
//
// Numbers use std::to_chars (shortest round-trip form for floating point). Strings are
// escaped per RFC 8259; the caller guarantees they are valid UTF-8.
// Non-finite numbers are written as the bare tokens NaN, Infinity and -Infinity, as Triton
// does (RapidJSON's kWriteNanAndInfFlag): not strict JSON, but what Triton's clients and
// Python's json module read. docs/api.md explains the choice.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace harrier {


// Appends `s` as a quoted, escaped JSON string.
void AppendJsonString(std::string* out, std::string_view s);

// Upper bound of the bytes AppendJsonString writes for `s`.
inline size_t JsonStringMaxSize(size_t raw_size) {
  return 2 + 6 * raw_size;
}

template <typename T>
void AppendJsonNumber(std::string* out, T value) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) {
      out->append(std::isnan(value) ? "NaN" : (value < 0 ? "-Infinity" : "Infinity"));
      return;
    }
    // to_chars writes "-0", which Python's json (so tritonclient) reads as the integer 0: the
    // sign is lost. "-0.0" as RapidJSON (Triton) writes it.
    if (value == 0 && std::signbit(value)) {
      out->append("-0.0");
      return;
    }
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), value);
  if constexpr (std::is_floating_point_v<T>) {
    // to_chars's shortest form is fixed notation on a tie: 1.4444444444444443e21 comes out as
    // the 22 digits "1444444444444444327936", an integer past uint64 that simdjson (our own
    // reader: a traffic policy's GET could not be PUT back, found by fuzzing) refuses, and that
    // Python reads as an int. Past 15 digits, an integral-looking double is written in
    // scientific notation.
    const std::string_view text(buf, static_cast<size_t>(r.ptr - buf));
    if (text.find_first_of(".e") == std::string_view::npos &&
        text.size() - (value < 0 ? 1 : 0) > 15) {
      r = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
    }
  }
  out->append(buf, r.ptr);
}

// AppendJsonNumber's text of `value`, as a string of its own.
template <typename T>
std::string JsonNumber(T value) {
  std::string out;
  AppendJsonNumber(&out, value);
  return out;
}

inline void AppendJsonBool(std::string* out, bool value) {
  out->append(value ? "true" : "false");
}

// `"key":` with the key escaped.
inline void AppendJsonKey(std::string* out, std::string_view key) {
  AppendJsonString(out, key);
  out->push_back(':');
}

}  // namespace harrier
