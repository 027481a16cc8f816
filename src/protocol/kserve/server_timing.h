// The Server-Timing response header (W3C Server Timing) of an inference: where the request's
// time went inside the server, so that a client can tell queueing from compute.
#pragma once

#include <cstdint>
#include <string>

#include "harrier/inference_request.h"

namespace harrier::kserve {

// "queue;dur=Q, input;dur=I, infer;dur=F, output;dur=O, total;dur=T": milliseconds with three
// decimals (microsecond resolution). queue, input and infer are the model's (`timing`), output
// the response encoding, total from receipt of the whole request to the encoded response.
std::string FormatServerTiming(const InferenceTiming& timing, uint64_t output_ns,
                               uint64_t total_ns);

}  // namespace harrier::kserve
