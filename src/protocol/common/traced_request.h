// TracedRequest: the record of one traced request (include/harrier/trace.h) while the front ends
// and InferenceFlow (or, for a generation, openai::GenerationRecord) fill it in, and the guarantee
// that it reaches the Tracer exactly once. Transport-neutral (every front end uses it), hence in
// protocol/common/ rather than under one protocol.
//
// A front end calls TracedRequest::Start() when the request comes in. Untraced (no tracer, or the
// tracer's sampling says no) it gets null and allocates nothing more. Traced, it holds the record
// in a shared_ptr: the handler stamps the decode, the model's callback copies the scheduler's
// times and stamps the encode, and whoever learns that the response left (the HTTP transport's
// HttpResponse::on_sent, gRPC's OnDone / OnWriteDone) calls Finish(). A record whose Finish() never
// comes (a transport that does not report the send, a response dropped unsent) is submitted when
// its last holder lets go, with `sent` left zero. docs/tracing.md says where each time
// point comes from.
//
// Thread safety: one thread at a time. The stages are stamped one after another, on the threads
// the request is handed across (I/O thread, model worker, connection thread), and that hand-off
// orders the writes.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harrier/inference_request.h"
#include "harrier/trace.h"

namespace harrier {

// What a request says about itself when it comes in: the head of its span, the same fields
// whichever front end took it (TracedRequest::SetHead). Views, copied by SetHead.
struct TraceHead {
  std::string_view name;        // the span's name: "POST /v2/models/m/infer", "ModelInfer"
  std::string_view protocol;    // "http" or "grpc"
  std::string_view transport;   // "HTTP/1.1", "HTTP/2", "gRPC"
  std::string_view tls_version;  // HttpRequest::tls_version; empty: clear text
  std::string_view target;      // the request target, or the full gRPC method
  std::string_view request_id;  // as answered
  std::string_view key_id;      // the API key's id; empty: none
  std::string_view model;       // as the request names it (before routing)
  int64_t model_version = 0;    // as the request names it; 0: none
  uint64_t request_bytes = 0;   // the body (gRPC: the request message)
  std::chrono::steady_clock::time_point received;       // the head was in
  std::chrono::steady_clock::time_point body_received;  // the whole request was in
};

// A request's trace-context header fields, read as W3C Trace Context reads several of one name:
// two or more `traceparent` fields are invalid, so the request starts a trace of its own
// (traceparent is then a value no parser accepts); several `tracestate` fields are one list,
// joined with commas (RFC 9110 §5.3). Probe 52: the first of each was taken.
// Views into the headers (or, for several tracestate fields, into the object's own string), so
// that the usual request, with one of each or none, copies nothing: neither copy nor move it.
class TraceContextFields {
 public:
  explicit TraceContextFields(const std::vector<std::pair<std::string, std::string>>& headers);
  TraceContextFields(const TraceContextFields&) = delete;
  TraceContextFields& operator=(const TraceContextFields&) = delete;

  std::string_view traceparent() const { return traceparent_; }  // empty: absent
  std::string_view tracestate() const { return tracestate_; }    // empty: absent

 private:
  std::string_view traceparent_;
  std::string_view tracestate_;
  std::string joined_;  // the tracestate fields joined, when there are several
};

class TracedRequest {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // Asks `tracer` (may be null) whether to trace a request carrying these header values (empty:
  // absent). Traced: a record with the parent (a valid traceparent), its tracestate (only with a
  // valid parent, and only when ValidTracestate) and the server span filled in. Null otherwise.
  static std::shared_ptr<TracedRequest> Start(Tracer* tracer, std::string_view traceparent,
                                              std::string_view tracestate);

  TracedRequest(Tracer* tracer, RequestTrace record);
  // Submits the record unless Finish() already did.
  ~TracedRequest();
  TracedRequest(const TracedRequest&) = delete;
  TracedRequest& operator=(const TracedRequest&) = delete;

  RequestTrace& record() { return record_; }
  // Fills the record's head fields (name, protocol, transport, target, request id, key id, model,
  // version, request bytes, received, body received) from `head`.
  void SetHead(const TraceHead& head);
  const SpanContext& server() const { return record_.server; }
  // The response header `traceresponse` (W3C Trace Context Level 2): the server span.
  std::string TraceResponse() const { return FormatTraceparent(record_.server); }

  // Copies what the scheduler measured of a request that ran: its batch's start, the engine run,
  // the batch's size in items and requests, and the other traced requests of the batch.
  void SetInferenceTiming(const InferenceTiming& timing);

  // The response left (`sent`: its last byte at `at`) or never will (`sent` false: `sent` stays
  // zero). Submits the record; later calls do nothing.
  void Finish(bool sent, TimePoint at);

  // An HttpResponse::on_sent that finishes `trace`.
  static std::function<void(bool, TimePoint)> OnSent(std::shared_ptr<TracedRequest> trace);

 private:
  Tracer* const tracer_;
  RequestTrace record_;
  bool submitted_ = false;
};

}  // namespace harrier
