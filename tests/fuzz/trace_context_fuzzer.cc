// libFuzzer target: W3C trace context as clients send it (core/trace_context.cc via
// harrier/trace.h): the input's first line is a traceparent header value, the rest a tracestate
// value. Both go through ParseTraceparent and ValidTracestate, and through TracedRequest::Start
// (protocol/common/traced_request.h) with a tracer that traces everything, as the REST and gRPC
// front ends call it.
//
// Findings besides the sanitizers': a parsed traceparent that is not valid or does not print
// back to what was sent (version 00) or to its first four fields (later versions); a
// tracestate accepted against the rules ValidTracestate documents (checked here by a plain
// second reading of them); a trace record whose parent or tracestate is not what the headers
// said.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "harrier/trace.h"
#include "protocol/common/traced_request.h"

namespace {

using harrier::SpanContext;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "trace_context_fuzzer: %s\n", what.c_str());
  std::abort();
}

// Traces every request; keeps nothing.
class EveryRequestTracer final : public harrier::Tracer {
 public:
  std::optional<SpanContext> Start(const std::optional<SpanContext>& parent) override {
    SpanContext server;
    if (parent) server.trace_id = parent->trace_id;
    server.trace_id[0] |= 1;
    server.span_id[7] = 1;
    server.flags = SpanContext::kSampled;
    return server;
  }
  void Submit(harrier::RequestTrace trace) override { last = std::move(trace); }

  harrier::RequestTrace last;
};

// ValidTracestate's rules, read plainly: at most 512 bytes of printable ASCII, 1 to 32
// comma-separated members that are not blank.
bool ReferenceTracestate(std::string_view value) {
  if (value.size() > 512) return false;
  for (char c : value)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) return false;
  int members = 0;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = value.find(',', start);
    const std::string_view member = value.substr(start, comma - start);
    if (member.find_first_not_of(' ') != std::string_view::npos) ++members;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return members >= 1 && members <= 32;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* tracer = new EveryRequestTracer();
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t newline = input.find('\n');
  const std::string_view traceparent = input.substr(0, newline);
  const std::string_view tracestate =
      newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1);

  const std::optional<SpanContext> parent = harrier::ParseTraceparent(traceparent);
  if (parent) {
    if (!parent->valid()) Fail("ParseTraceparent accepted invalid ids");
    const std::string printed = harrier::FormatTraceparent(*parent);
    const std::string expected = "00" + std::string(traceparent.substr(2, 53));
    if (printed != expected) Fail("a traceparent printed as '" + printed + "'");
    if (traceparent.substr(0, 2) == "00" && printed != traceparent)
      Fail("a version 00 traceparent did not print back as sent");
    const std::optional<SpanContext> again = harrier::ParseTraceparent(printed);
    if (!again || again->trace_id != parent->trace_id || again->span_id != parent->span_id ||
        again->flags != parent->flags)
      Fail("a printed traceparent did not parse back");
  }
  const bool tracestate_ok = harrier::ValidTracestate(tracestate);
  if (tracestate_ok != ReferenceTracestate(tracestate))
    Fail(std::string("ValidTracestate said ") + (tracestate_ok ? "valid" : "invalid") +
         " against its documented rules");

  {
    auto traced = harrier::TracedRequest::Start(tracer, traceparent, tracestate);
    if (traced == nullptr) Fail("a tracer that traces everything was not asked");
  }  // the record is submitted when the last holder lets go
  const harrier::RequestTrace& record = tracer->last;
  if (parent.has_value() != record.parent.valid()) Fail("the record's parent is not the header's");
  const bool propagated = parent && !tracestate.empty() && tracestate_ok;
  if (record.tracestate != (propagated ? tracestate : std::string_view()))
    Fail("the record's tracestate is not what the headers allow");
  return 0;
}
