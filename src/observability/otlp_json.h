// The OTLP/HTTP JSON encoding of request traces: one ExportTraceServiceRequest body for a batch
// of RequestTraces (harrier/trace.h), each a server span and a span per stage it reached
// (docs/tracing.md), under the server's resource. OtlpTracer's export thread writes it; tests
// read it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "harrier/trace.h"
#include "observability/otlp_tracer.h"

namespace harrier {

// The longest string attribute value written whole; a longer one is cut at a character and
// ends "...(truncated)" (as OpenTelemetry SDKs' attribute value length limit, marked).
inline constexpr std::size_t kMaxAttributeValueBytes = 4096;

// The OTLP JSON ExportTraceServiceRequest body for `traces`. Steady-clock times are converted to
// Unix nanoseconds by `steady_to_unix_ns` (added to the time since the steady clock's epoch).
std::string OtlpTraceJson(std::span<const RequestTrace> traces, const OtlpTracer::Options& resource,
                          int64_t steady_to_unix_ns);

// The spans OtlpTraceJson writes for `t`: its server span and the stages it reached.
size_t CountSpans(const RequestTrace& t);

// The service.instance.id of a resource that names none: "<hostname>-<pid>", computed once.
const std::string& DefaultInstanceId();

}  // namespace harrier
