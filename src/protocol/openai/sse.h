// Server-sent events framing (the WHATWG HTML spec, "Server-sent events"), as the OpenAI
// streaming API and Triton's generate_stream use it: pure functions over bytes; the transport
// writes them.
//
//   id: 7            <- optional; lets a client resume with Last-Event-ID (stream_store.h)
//   data: {...}      <- one "data:" line per line of the payload
//                    <- a blank line ends the event
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "harrier/status.h"

namespace harrier::openai {

// The event that ends an OpenAI stream (Triton's generate_stream has none: its stream ends with
// the response).
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// A comment line: clients ignore it, and it keeps proxies and idle timers from closing a
// stream while a long prompt is processed.
inline constexpr std::string_view kSseHeartbeat = ": ping\n\n";

// Appends one event carrying `data`. Its lines (split at CRLF, LF or CR, the line ends the spec
// knows) become "data: " lines, so a client's EventSource joins them back with LF: the payload
// round-trips except that CR and CRLF come back as LF. JSON written by Harrier has no raw line
// breaks, so it is always one line. `id` is written first when set.
void AppendSseEvent(std::string* out, std::string_view data, std::optional<uint64_t> id = {});

inline std::string SseEvent(std::string_view data, std::optional<uint64_t> id = {}) {
  std::string out;
  AppendSseEvent(&out, data, id);
  return out;
}

// The event id a reconnecting client sends in its `Last-Event-ID` header (call it only when
// the header is present). Harrier's ids are decimal numbers (stream_store.h); surrounding
// spaces and tabs are ignored. kInvalidArgument for anything else: empty, a sign, non-digits,
// or a value past 2^64-1 — replaying from the start instead would send a client events it
// already has.
StatusOr<uint64_t> ParseLastEventId(std::string_view header_value);

}  // namespace harrier::openai
