// The scheduling fields of a KServe inference request: where the request parameters `priority`
// and `timeout` and the HTTP headers X-Request-Timeout-Us and X-Client-Id land in an
// InferenceRequest (docs/api.md, "Scheduling: priority, timeouts, client id").
//
// A pure function over the decoded request and the HTTP headers, so its test is a table.
#pragma once

#include <cstddef>
#include <cstdint>

#include "harrier/http_message.h"
#include "harrier/inference_request.h"
#include "harrier/status.h"

namespace harrier::kserve {

// The largest timeout a request may ask for, as `timeout` or X-Request-Timeout-Us: 10^12 µs
// (11.6 days). Larger values are refused rather than clamped, and keep deadline arithmetic far
// from overflow.
inline constexpr uint64_t kMaxRequestTimeoutUs = 1'000'000'000'000;
// The longest X-Client-Id accepted (bytes).
inline constexpr size_t kMaxClientIdBytes = 128;

// Sets request->priority, timeout_us, deadline and client_id:
//   parameters.priority   non-negative integer -> priority (0: the model's default level)
//   parameters.timeout    integer in [0, kMaxRequestTimeoutUs], µs -> timeout_us (0: none)
//   X-Request-Timeout-Us  decimal integer in [0, kMaxRequestTimeoutUs], µs ->
//                         deadline = received_at + value (0: no deadline)
//   X-Client-Id           at most kMaxClientIdBytes bytes -> client_id
// request->received_at must be set. Errors: kInvalidArgument naming the field (a bool, number
// with a fraction, string or negative value; a malformed or too long header).
Status ApplySchedulingFields(const HttpRequest& http, InferenceRequest* request);

}  // namespace harrier::kserve
