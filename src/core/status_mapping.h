// The one place where a Status becomes a transport status code (HTTP and gRPC).
#pragma once

#include "harrier/status.h"

namespace harrier {

// 400, 404, 413, 429, 503, 504, 499, 501, 500; 200 for OK.
int HttpStatusFor(StatusCode code);

// gRPC status codes (the numbers of grpc::StatusCode and of the gRPC wire protocol), declared
// here so that src/core needs no gRPC header; src/protocol/grpc/ checks they match.
enum class GrpcCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kUnauthenticated = 16,
};

// INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED (also for kPayloadTooLarge, as gRPC itself
// answers an oversize message), UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, UNIMPLEMENTED,
// INTERNAL; OK for OK.
GrpcCode GrpcStatusCodeFor(StatusCode code);

// The Retry-After value (seconds) for a rejection: N from a kResourceExhausted or kUnavailable
// message ending in "; retry after N s" (how admission control and the traffic router's
// breakers word their refusals), 1 for any other kResourceExhausted, 0 (send no header)
// otherwise.
int RetryAfterSeconds(const Status& status);

}  // namespace harrier
