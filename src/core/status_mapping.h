// The one place where a Status becomes a transport status code.
#pragma once

#include "harrier/status.h"

namespace harrier {

// 400, 404, 413, 429, 503, 504, 499, 501, 500; 200 for OK.
int HttpStatusFor(StatusCode code);

// The Retry-After value (seconds) for a rejection: N from a message ending in
// "; retry after N s" (how admission control words its refusals), 1 for any other
// kResourceExhausted, 0 (send no header) for other codes.
int RetryAfterSeconds(const Status& status);

}  // namespace harrier
