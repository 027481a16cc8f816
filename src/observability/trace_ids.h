// Random ids for traces and spans (W3C Trace Context): never zero, a few instructions each, no
// lock and no allocation on the request path.
//
// Thread safety: any thread (each has its own generator state).
#pragma once

#include <array>
#include <cstdint>

namespace harrier {

// A random 64-bit value, never 0: half a trace id, or a span id (TraceSampler draws trace ids
// with it).
uint64_t NextRandomId();

// A random span id, big-endian.
std::array<uint8_t, 8> NewSpanId();

}  // namespace harrier
