// TraceSampler: the rule by which a Tracer decides whom to trace (Tracer::Start, harrier/trace.h),
// OpenTelemetry's ParentBased(TraceIdRatioBased). A request whose traceparent parsed is traced
// exactly when its parent was sampled, in the parent's trace, whatever the ratio. One without
// starts a new trace, traced when the trace id's last 8 bytes, read as a big-endian integer, are
// below ratio * 2^64 (OpenTelemetry's rule, so that every component sampling by the same ratio
// agrees on the same traces).
//
// OtlpTracer decides with it, and so does the front ends' test tracer (tests/util/fake_tracer.h),
// so that those tests exercise the rule the server runs rather than a copy of it. Header-only:
// on the request path it is a few inlined comparisons, no allocation.
//
// Thread safety: immutable after construction; Start may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "harrier/trace.h"

namespace harrier {

class TraceSampler {
 public:
  // `ratio`: the share of new traces that are traced, 0..1 (OtlpTracer::Create refuses others).
  explicit TraceSampler(double ratio)
      : all_(ratio >= 1.0),
        // ratio < 1 here, so ratio * 2^64 < 2^64 and fits (doubles below 1 are at most 1 - 2^-53).
        threshold_(ratio <= 0.0 || ratio >= 1.0 ? 0 : static_cast<uint64_t>(ratio * 0x1p64)) {}

  // Tracer::Start's answer for a request whose traceparent parsed to `parent` (nullopt: absent or
  // invalid): the server span's context (the parent's trace id or a new one, a new span id,
  // flags sampled), or nullopt when the request is not traced. `next_id()` returns a random
  // non-zero uint64_t: never called for an unsampled parent, once for an untraced new trace (the
  // half of its id that the ratio reads is drawn first), three times for a traced one.
  template <typename NextId>
  std::optional<SpanContext> Start(const std::optional<SpanContext>& parent,
                                   NextId&& next_id) const {
    SpanContext server;
    server.flags = SpanContext::kSampled;
    if (parent) {
      if (!parent->sampled()) return std::nullopt;
      server.trace_id = parent->trace_id;
    } else {
      const uint64_t low = next_id();
      if (!SampledTraceId(low)) return std::nullopt;
      StoreBigEndian(next_id(), server.trace_id.data());
      StoreBigEndian(low, server.trace_id.data() + 8);
    }
    StoreBigEndian(next_id(), server.span_id.data());
    return server;
  }

  // TraceIdRatioBased alone: whether a new trace whose id ends in `low_bits` is traced.
  bool SampledTraceId(uint64_t low_bits) const { return all_ || low_bits < threshold_; }

 private:
  static void StoreBigEndian(uint64_t v, uint8_t* out) {
    for (size_t i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * (7 - i)));
  }

  const bool all_;
  const uint64_t threshold_;
};

}  // namespace harrier
