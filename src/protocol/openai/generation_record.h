// GenerationRecord: what one text-generation request reports about itself — its access-log line
// and, when it is traced, its spans — whichever front end took it (the OpenAI API, Triton's
// generate extension, gRPC's ModelStreamInfer). Timing for the model's statistics and metrics is
// not here: LoadedModel's generator records it for every front end.
//
// The front end makes one when the request comes in (Start asks the tracer whether to trace
// it), fills it as the request goes — the model chosen, the request parsed, each sequence's
// start, tokens and end — and calls Finish() once with the outcome: Finish writes the access
// record and returns the callback that submits the trace when the response's last byte has left
// (HttpResponse::on_sent's shape; empty when untraced). A record that is never finished writes
// nothing to the access log; its trace, if any, is submitted when the record goes.
//
// Thread safety: one thread at a time; the front end serialises the calls (the OpenAI handler
// under its generation's lock, gRPC on the engine's thread of a one-sequence request).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "harrier/access_log.h"
#include "harrier/generation.h"
#include "harrier/trace.h"
#include "protocol/common/traced_request.h"

namespace harrier::openai {

class GenerationRecord {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // The request as it came in.
  struct Head {
    std::string request_id;  // X-Request-Id as answered (a stream's id when streaming)
    std::string protocol;    // "http" or "grpc"
    std::string transport;   // "HTTP/1.1", "HTTP/2", "gRPC"
    HttpVersion http_version = HttpVersion::kUnknown;  // HttpRequest::version
    std::string_view tls_version;  // HttpRequest::tls_version (static); empty: clear text
    std::string method;      // "POST"; the RPC name for gRPC
    std::string target;      // the request target, or the full gRPC method
    std::string span_name;   // "POST /v1/chat/completions", "ModelStreamInfer"
    std::string model;       // as the request names it (before routing)
    std::string key_id;      // the API key's id (HttpRequest::auth_key_id); empty: none
    uint64_t request_bytes = 0;
    TimePoint received;            // zero: when Start is called
    TimePoint body_received;       // zero: `received`
    std::string_view traceparent;  // the request's headers (empty: absent); read by Start only
    std::string_view tracestate;
  };

  // `log` and `tracer` may be null (off); not owned, they must outlive the record. A transport
  // that has already started the request's trace (gRPC's, per stream request) passes it as
  // `trace` (the tracer is then not asked); the record fills it in.
  static GenerationRecord Start(AccessLog* log, Tracer* tracer, Head head,
                                std::shared_ptr<TracedRequest> trace = nullptr);

  // The traceresponse header's value; empty when the request is not traced.
  std::string TraceResponse() const;
  bool traced() const { return trace_ != nullptr; }

  // The id the answer carries when it is not the head's (a stream's own id); `client_id`, the
  // X-Request-Id the client sent (empty: none), stays in the line and the span as
  // client_request_id (probe 41: a proxy's log could not be joined with a stream's).
  void SetRequestId(std::string id, std::string client_id = {});
  // The version that serves it.
  void SetModel(std::string_view name, int64_t version);
  // Parsed and handed to the engine: the queue (waiting for a sequence) starts.
  void Decoded(TimePoint at);
  // A sequence was given a slot (GenerationSink::OnStart), produced a token, ended.
  void SequenceStarted(TimePoint at);
  void Token(TimePoint at);
  void SequenceEnded(const GenerationUsage& usage);

  // The outcome: status (HTTP, or the gRPC code), the error message when it failed, the bytes
  // of the answer (a stream's events). Writes the access record (once; later calls return an
  // empty callback) and returns the trace's on_sent.
  std::function<void(bool sent, TimePoint at)> Finish(int status, std::string_view error,
                                                      uint64_t response_bytes);

 private:
  GenerationRecord(AccessLog* log, Head head, std::shared_ptr<TracedRequest> trace);

  AccessLog* log_;
  Head head_;
  std::string client_request_id_;
  std::shared_ptr<TracedRequest> trace_;  // null: untraced
  std::string model_;
  int64_t version_ = 0;
  TimePoint first_start_, first_token_, last_token_;
  int64_t prompt_tokens_ = -1;  // -1 until a sequence ends: refused before the engine
  int64_t completion_tokens_ = 0;
  int64_t reused_prompt_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace harrier::openai
