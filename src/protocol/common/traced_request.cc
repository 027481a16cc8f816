#include "protocol/common/traced_request.h"

#include <optional>
#include <utility>

namespace harrier {

TraceContextFields::TraceContextFields(
    const std::vector<std::pair<std::string, std::string>>& headers) {
  bool have_parent = false;
  int states = 0;
  for (const auto& [name, value] : headers) {
    if (name == "traceparent") {
      traceparent_ = have_parent ? std::string_view("duplicated") : std::string_view(value);
      have_parent = true;
    } else if (name == "tracestate" && !value.empty()) {
      if (++states == 1) {
        tracestate_ = value;
        continue;
      }
      if (states == 2) joined_.assign(tracestate_);
      joined_.push_back(',');
      joined_.append(value);
    }
  }
  if (states > 1) tracestate_ = joined_;
}

std::shared_ptr<TracedRequest> TracedRequest::Start(Tracer* tracer, std::string_view traceparent,
                                                    std::string_view tracestate) {
  if (tracer == nullptr) return nullptr;
  const std::optional<SpanContext> parent =
      traceparent.empty() ? std::nullopt : ParseTraceparent(traceparent);
  std::optional<SpanContext> server = tracer->Start(parent);
  if (!server) return nullptr;
  RequestTrace record;
  record.server = *server;
  if (parent) {
    record.parent = *parent;
    // Trace Context: a tracestate goes with its traceparent, never alone.
    if (!tracestate.empty() && ValidTracestate(tracestate)) record.tracestate = tracestate;
  }
  return std::make_shared<TracedRequest>(tracer, std::move(record));
}

TracedRequest::TracedRequest(Tracer* tracer, RequestTrace record)
    : tracer_(tracer), record_(std::move(record)) {}

TracedRequest::~TracedRequest() {
  if (!submitted_) tracer_->Submit(std::move(record_));
}

void TracedRequest::SetHead(const TraceHead& head) {
  record_.name = head.name;
  record_.protocol = head.protocol;
  record_.transport = head.transport;
  record_.tls_version = head.tls_version;
  record_.target = head.target;
  record_.request_id = head.request_id;
  record_.key_id = head.key_id;
  record_.model = head.model;
  record_.model_version = head.model_version;
  record_.request_bytes = head.request_bytes;
  record_.received = head.received;
  record_.body_received = head.body_received;
}

void TracedRequest::SetInferenceTiming(const InferenceTiming& timing) {
  record_.batch_start = timing.batch_start;
  record_.infer_start = timing.infer_start;
  record_.infer_end = timing.infer_end;
  record_.batch_size = timing.batch_size;
  record_.batch_requests = timing.batch_requests;
  record_.batch_peers = timing.batch_peers;
}

void TracedRequest::Finish(bool sent, TimePoint at) {
  if (submitted_) return;
  submitted_ = true;
  if (sent) record_.sent = at;
  tracer_->Submit(std::move(record_));
}

std::function<void(bool, TracedRequest::TimePoint)> TracedRequest::OnSent(
    std::shared_ptr<TracedRequest> trace) {
  return [trace = std::move(trace)](bool sent, TimePoint at) { trace->Finish(sent, at); };
}

}  // namespace harrier
