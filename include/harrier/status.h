// Status and StatusOr<T>: Harrier's one error type.
//
// A Status is a code and a message a user can act on. Codes are transport-neutral; the single
// mapping to HTTP statuses (and later gRPC codes) lives in src/core/status_mapping.cc.
// Value type; cheap to copy when OK (no allocation).
#pragma once

#include <cassert>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace harrier {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the request is malformed or does not fit the model (HTTP 400)
  kNotFound,           // unknown model, version, route (HTTP 404)
  kPayloadTooLarge,    // a body, header or tensor claim over a configured limit (HTTP 413)
  kResourceExhausted,  // a queue, rate or in-flight limit is full; retry later (HTTP 429)
  kUnavailable,        // the model or server is not ready (HTTP 503)
  kDeadlineExceeded,   // the request's deadline passed before it finished (HTTP 504)
  kCancelled,          // the client went away or cancelled (HTTP 499, never seen by it)
  kUnimplemented,      // the feature or method is not supported (HTTP 501 / 405)
  kInternal,           // a bug or an engine failure (HTTP 500)
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "NOT_FOUND: unknown model 'x'" — for logs, not for response bodies.
  std::string ToString() const;

  // Returns a copy whose message is `prefix + ": " + message()`; OK stays OK.
  Status WithContext(std::string_view prefix) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status PayloadTooLarge(std::string m) { return {StatusCode::kPayloadTooLarge, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) { assert(!status_.ok()); }  // NOLINT
  StatusOr(T value) : value_(std::move(value)) {}                                  // NOLINT

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace harrier

#define HARRIER_CONCAT_INNER_(a, b) a##b
#define HARRIER_CONCAT_(a, b) HARRIER_CONCAT_INNER_(a, b)

// Returns from the current function when `expr` (a Status) is not OK.
#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::harrier::Status _harrier_s = (expr);     \
    if (!_harrier_s.ok()) return _harrier_s;   \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, Foo());` — declares x from a StatusOr or returns its Status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(HARRIER_CONCAT_(_harrier_sor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()
