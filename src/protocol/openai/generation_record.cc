#include "protocol/openai/generation_record.h"

#include <algorithm>
#include <utility>

namespace harrier::openai {
namespace {

using Clock = std::chrono::steady_clock;

bool IsSet(GenerationRecord::TimePoint t) {
  return t != GenerationRecord::TimePoint{};
}

uint64_t Ns(GenerationRecord::TimePoint from, GenerationRecord::TimePoint to) {
  return to > from ? static_cast<uint64_t>(
                         std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count())
                   : 0;
}

}  // namespace

GenerationRecord GenerationRecord::Start(AccessLog* log, Tracer* tracer, Head head,
                                         std::shared_ptr<TracedRequest> trace) {
  if (!IsSet(head.received)) head.received = Clock::now();
  if (!IsSet(head.body_received)) head.body_received = head.received;
  if (trace == nullptr)
    trace = TracedRequest::Start(tracer, head.traceparent, head.tracestate);
  head.traceparent = {};
  head.tracestate = {};
  if (trace != nullptr) {
    TraceHead t;
    t.name = head.span_name;
    t.protocol = head.protocol;
    t.transport = head.transport;
    t.tls_version = head.tls_version;
    t.target = head.target;
    t.request_id = head.request_id;
    t.key_id = head.key_id;
    t.model = head.model;
    t.request_bytes = head.request_bytes;
    t.received = head.received;
    t.body_received = head.body_received;
    trace->SetHead(t);
  }
  return GenerationRecord(log, std::move(head), std::move(trace));
}

GenerationRecord::GenerationRecord(AccessLog* log, Head head,
                                   std::shared_ptr<TracedRequest> trace)
    : log_(log), head_(std::move(head)), trace_(std::move(trace)), model_(head_.model) {}

std::string GenerationRecord::TraceResponse() const {
  return trace_ != nullptr ? trace_->TraceResponse() : std::string();
}

void GenerationRecord::SetRequestId(std::string id, std::string client_id) {
  head_.request_id = std::move(id);
  client_request_id_ = std::move(client_id);
  if (trace_ != nullptr) {
    trace_->record().request_id = head_.request_id;
    trace_->record().client_request_id = client_request_id_;
  }
}

void GenerationRecord::SetModel(std::string_view name, int64_t version) {
  model_ = std::string(name);
  version_ = version;
  if (trace_ != nullptr) {
    trace_->record().model = model_;
    trace_->record().model_version = version;
  }
}

void GenerationRecord::Decoded(TimePoint at) {
  if (trace_ != nullptr) trace_->record().decoded = at;
}

void GenerationRecord::SequenceStarted(TimePoint at) {
  if (!IsSet(first_start_)) first_start_ = at;
}

void GenerationRecord::Token(TimePoint at) {
  if (!IsSet(first_token_)) first_token_ = at;
  last_token_ = at;
}

void GenerationRecord::SequenceEnded(const GenerationUsage& usage) {
  // The choices of one request share its prompt: it counts once, as in the answer's `usage`.
  prompt_tokens_ = std::max<int64_t>({0, prompt_tokens_, usage.prompt_tokens});
  reused_prompt_tokens_ = std::max<int64_t>(reused_prompt_tokens_, usage.reused_prompt_tokens);
  completion_tokens_ += usage.completion_tokens;
}

std::function<void(bool, GenerationRecord::TimePoint)> GenerationRecord::Finish(
    int status, std::string_view error, uint64_t response_bytes) {
  if (finished_) return {};
  finished_ = true;
  const TimePoint now = Clock::now();
  if (log_ != nullptr) {
    AccessRecord r;
    r.request_id = head_.request_id;
    r.client_request_id = client_request_id_;
    r.protocol = head_.protocol;
    r.http_version = head_.http_version;
    r.tls_version = head_.tls_version;
    r.method = head_.method;
    r.target = head_.target;
    r.status = status;
    r.error = error;
    r.key_id = head_.key_id;
    r.model = model_;
    r.model_version = version_;
    r.request_bytes = head_.request_bytes;
    r.response_bytes = response_bytes;
    // A generation refused before it reached the engine has no figures, as a failed tensor
    // request has no durations (docs/logging.md); with prompt_tokens -1, any would be written
    // as a tensor request's stage durations, all zero.
    if (prompt_tokens_ >= 0) r.total_ns = Ns(head_.received, now);
    r.prompt_tokens = prompt_tokens_;
    r.completion_tokens = completion_tokens_;
    r.first_token_ns = IsSet(first_token_) ? Ns(head_.received, first_token_) : 0;
    log_->Write(r);
  }
  if (trace_ == nullptr) return {};
  RequestTrace& t = trace_->record();
  t.status = status;
  t.error = std::string(error);
  t.response_bytes = response_bytes;
  t.prompt_start = first_start_;
  t.first_token = first_token_;
  t.last_token = last_token_;
  t.prompt_tokens = prompt_tokens_;
  t.completion_tokens = completion_tokens_;
  t.reused_prompt_tokens = reused_prompt_tokens_;
  t.encoded = now;
  return TracedRequest::OnSent(std::move(trace_));
}

}  // namespace harrier::openai
