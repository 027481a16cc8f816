// Distributed tracing: W3C Trace Context (traceparent / tracestate) and the Tracer that front
// ends report traced requests to (docs/tracing.md).
//
// A front end asks the Tracer whether to trace a request (Tracer::Start, from the request's
// parsed traceparent: parent-based, else the sampling ratio). For a traced request it
// fills one RequestTrace with the request's stage timestamps as the request goes through —
// received, decoded, queued, batched, run, encoded, sent — and hands it to Tracer::Submit()
// once the response has left. The Tracer turns the record into spans (one server span and its
// stage spans) and exports them off the request path. Front ends hold a Tracer* that is null
// when tracing is off, so an untraced request pays one pointer test.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace harrier {

// One span's identity in a trace, as carried by a W3C traceparent header.
struct SpanContext {
  std::array<uint8_t, 16> trace_id{};  // all zero: invalid
  std::array<uint8_t, 8> span_id{};    // all zero: invalid
  uint8_t flags = 0;                   // trace-flags; bit 0 = sampled

  static constexpr uint8_t kSampled = 0x01;
  bool valid() const;  // both ids non-zero
  bool sampled() const { return (flags & kSampled) != 0; }
};

// Parses a traceparent header value ("00-<32 hex>-<16 hex>-<2 hex>"): lower-case hex only, ids
// not all zero, version ff refused; a higher version is read by its first four fields as the
// specification asks. nullopt when invalid (the request is then treated as having none).
std::optional<SpanContext> ParseTraceparent(std::string_view value);
// "00-<trace id>-<span id>-<flags>", 55 characters.
std::string FormatTraceparent(const SpanContext& context);
// Whether a tracestate value may be propagated: at most 512 bytes and 32 list members, printable
// ASCII. An invalid one is dropped, not the request.
bool ValidTracestate(std::string_view value);

// A traced request's record. Every time point is std::chrono::steady_clock; a default-constructed
// (zero) one means the request never reached that stage (refused while decoding, cancelled in the
// queue, ...), and the stage's span is then left out. The Tracer converts to wall-clock time.
struct RequestTrace {
  SpanContext parent;  // the client's span (from traceparent); invalid: the server span is a root
  std::string tracestate;  // propagated unchanged (already validated)
  SpanContext server;      // the server span: trace id (the parent's, or new) and its own span id

  std::string name;        // the server span's name: "POST /v2/models/{model}/infer", "ModelInfer"
  std::string protocol;    // "http" (HTTP/1.1, h2c, h2) or "grpc"
  std::string transport;   // "HTTP/1.1", "HTTP/2" or "gRPC" (the span's network.protocol)
  std::string tls_version;  // the connection's, as OpenSSL names it ("TLSv1.3"); empty: clear
  std::string target;      // the request target (HTTP) or the full method (gRPC)
  std::string request_id;  // X-Request-Id as answered
  // A streamed generation, answered under its stream's own id: the X-Request-Id its client
  // sent (empty otherwise).
  std::string client_request_id;
  std::string key_id;      // the API key's id (HttpRequest::auth_key_id); empty: none
  std::string model;
  int64_t model_version = 0;  // 0: not known
  int status = 0;             // HTTP status, or the gRPC status code
  std::string error;          // the error message when the request failed; empty otherwise
  uint64_t request_bytes = 0;
  uint64_t response_bytes = 0;

  using TimePoint = std::chrono::steady_clock::time_point;
  TimePoint received;       // the request's headers were in (the server span starts here)
  TimePoint body_received;  // the whole body was in: receive = [received, body_received]
  // Decoded and validated, handed to the model: decode = [body_received, decoded].
  TimePoint decoded;
  TimePoint batch_start;  // its batch started: queue = [decoded, batch_start]
  TimePoint infer_start;  // the engine run of its batch: infer = [infer_start, infer_end]
  TimePoint infer_end;
  TimePoint batch_end;  // outputs split, answer handed back: batch = [batch_start, batch_end]
  TimePoint encoded;    // response encoded: encode = [batch_end (or decoded), encoded]
  TimePoint sent;       // last byte handed to the kernel: send = [encoded, sent]; server span end

  // A generation (docs/generation.md), stamped from its first sequence: given a slot
  // (queue = [decoded, prompt_start]), its prompt read until the first token (prompt =
  // [prompt_start, first_token]), then generating until the last token of any of its sequences
  // (generate = [first_token, last_token]). Token counts over all its sequences;
  // prompt_tokens -1: not a generation.
  TimePoint prompt_start;
  TimePoint first_token;
  TimePoint last_token;
  int64_t prompt_tokens = -1;
  int64_t completion_tokens = 0;
  int64_t reused_prompt_tokens = 0;

  int64_t batch_size = 0;     // items in the batch it ran in
  size_t batch_requests = 0;  // requests in that batch
  // The server spans of ALL the traced requests that ran in the same batch, this request's own
  // included (one vector shared by the batch's records); the batch span links to every entry
  // but the record's own server span. Null (or holding only its own) when it ran alone or with
  // untraced requests only.
  std::shared_ptr<const std::vector<SpanContext>> batch_peers;
};

class Tracer {
 public:
  virtual ~Tracer() = default;

  // Whether to trace a request whose traceparent parsed to `parent` (ParseTraceparent; nullopt:
  // absent or invalid). A parent decides by its sampled flag (parent-based); otherwise the
  // sampling ratio decides. When traced, returns the server span's context: the parent's trace
  // id (or a new one) and a new span id, flags sampled. Thread safe, allocation-free, tens of
  // nanoseconds. The caller parses, once, because it keeps the parent for the record.
  virtual std::optional<SpanContext> Start(const std::optional<SpanContext>& parent) = 0;

  // Queues a finished request's record for export. Never blocks on I/O: when the export queue
  // is full the record's spans are dropped and counted. Thread safe.
  virtual void Submit(RequestTrace trace) = 0;
};

}  // namespace harrier
