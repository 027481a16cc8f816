// The one place where a Status becomes a transport status code.
#pragma once

#include "harrier/status.h"

namespace harrier {

// 400, 404, 413, 429, 503, 504, 499, 501, 500; 200 for OK.
int HttpStatusFor(StatusCode code);

}  // namespace harrier
