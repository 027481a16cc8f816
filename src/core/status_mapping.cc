#include "core/status_mapping.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace harrier {

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kPayloadTooLarge: return 413;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kDeadlineExceeded: return 504;
    // nginx's "client closed request": logged, never received by the client that left.
    case StatusCode::kCancelled: return 499;
    case StatusCode::kUnimplemented: return 501;
    case StatusCode::kInternal: return 500;
  }
  return 500;
}

GrpcCode GrpcStatusCodeFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return GrpcCode::kOk;
    case StatusCode::kInvalidArgument: return GrpcCode::kInvalidArgument;
    case StatusCode::kNotFound: return GrpcCode::kNotFound;
    case StatusCode::kPayloadTooLarge: return GrpcCode::kResourceExhausted;
    case StatusCode::kResourceExhausted: return GrpcCode::kResourceExhausted;
    case StatusCode::kUnavailable: return GrpcCode::kUnavailable;
    case StatusCode::kDeadlineExceeded: return GrpcCode::kDeadlineExceeded;
    case StatusCode::kCancelled: return GrpcCode::kCancelled;
    case StatusCode::kUnimplemented: return GrpcCode::kUnimplemented;
    case StatusCode::kInternal: return GrpcCode::kInternal;
  }
  return GrpcCode::kInternal;
}

int RetryAfterSeconds(const Status& status) {
  const bool exhausted = status.code() == StatusCode::kResourceExhausted;
  if (!exhausted && status.code() != StatusCode::kUnavailable) return 0;
  constexpr std::string_view kMarker = "; retry after ";
  const std::string_view m = status.message();
  const size_t at = m.rfind(kMarker);
  if (at == std::string_view::npos || !m.ends_with(" s")) return exhausted ? 1 : 0;
  const std::string_view digits = m.substr(at + kMarker.size(), m.size() - 2 - at - kMarker.size());
  if (digits.empty()) return 1;
  // A wait too long for an int is said as the longest one (a rate of 1e-9 req/s); before, any
  // of more than six digits was sent as 1, which a client that honours it retried in vain.
  constexpr int kLongest = std::numeric_limits<int>::max();
  int64_t seconds = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return 1;
    seconds = std::min<int64_t>(seconds * 10 + (c - '0'), kLongest);
  }
  return seconds > 0 ? static_cast<int>(seconds) : 1;
}

}  // namespace harrier
