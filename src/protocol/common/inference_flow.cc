#include "protocol/common/inference_flow.h"

#include "core/json_writer.h"

namespace harrier {

uint64_t ElapsedNs(SteadyTime from, SteadyTime to) {
  return to > from ? std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count() : 0;
}

std::string InputShapesJson(const std::vector<Tensor>& inputs) {
  std::string out = "[";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) out.push_back(',');
    out.append("{\"name\":");
    AppendJsonString(&out, inputs[i].name);
    out.append(",\"datatype\":\"");
    out.append(DataTypeName(inputs[i].dtype));
    out.append("\",\"shape\":[");
    for (size_t d = 0; d < inputs[i].shape.size(); ++d) {
      if (d) out.push_back(',');
      AppendJsonNumber(&out, inputs[i].shape[d]);
    }
    out.append("]}");
  }
  out.push_back(']');
  return out;
}

InferenceAccessLine::InferenceAccessLine(AccessLog* log, const InferenceCall& call)
    : log_(log),
      protocol_(call.protocol),
      http_version_(call.http_version),
      tls_version_(call.tls_version),
      method_(call.method),
      target_(call.target),
      key_id_(call.key_id),
      model_(call.unrouted_log_model),
      request_bytes_(call.request_bytes) {}

void InferenceAccessLine::Routed(const ServableModel& model) {
  model_ = model.name();
  model_version_ = model.version();
}

void InferenceAccessLine::HandedOff(InferenceRequest* request, SteadyTime) {
  input_shapes_json_ = InputShapesJson(request->inputs);
}

void InferenceAccessLine::Finished(std::string_view request_id, const InferenceOutcome& outcome,
                                   const InferenceFlowTiming* timing, SteadyTime) {
  AccessRecord record;
  record.request_id = request_id;
  record.protocol = protocol_;
  record.http_version = http_version_;
  record.tls_version = tls_version_;
  record.method = method_;
  record.target = target_;
  record.status = outcome.status;
  record.error = outcome.error.message();
  record.key_id = key_id_;
  record.model = model_;
  record.model_version = model_version_;
  record.input_shapes_json = input_shapes_json_;
  record.request_bytes = request_bytes_;
  record.response_bytes = outcome.response_bytes;
  if (timing != nullptr && outcome.error.ok()) {
    record.timing = timing->timing;
    record.output_ns = timing->output_ns;
    record.total_ns = timing->total_ns;
  }
  log_->Write(record);
}

void InferenceTraceStages::Routed(const ServableModel& model) {
  trace_->record().model = model.name();
  trace_->record().model_version = model.version();
}

void InferenceTraceStages::HandedOff(InferenceRequest* request, SteadyTime at) {
  request->trace = trace_->server();
  trace_->record().decoded = at;
}

void InferenceTraceStages::Ran(SteadyTime at) {
  trace_->record().batch_end = at;
}

void InferenceTraceStages::Finished(std::string_view, const InferenceOutcome& outcome,
                                    const InferenceFlowTiming* timing, SteadyTime at) {
  RequestTrace& t = trace_->record();
  // A stage not reached (refused before the model) ends at the answer.
  if (t.decoded == RequestTrace::TimePoint{}) t.decoded = at;
  t.encoded = at;
  if (timing != nullptr) trace_->SetInferenceTiming(timing->timing);  // zero when it did not run
  t.status = outcome.status;
  t.error = outcome.error.message();
  t.response_bytes = outcome.response_bytes;
}

InferenceObservers::InferenceObservers(AccessLog* log, InferenceCall* call) {
  if (log != nullptr) access_line_.emplace(log, *call);
  if (call->trace != nullptr) trace_.emplace(std::move(call->trace));
}

void InferenceObservers::Routed(const ServableModel& model) {
  if (access_line_) access_line_->Routed(model);
  if (trace_) trace_->Routed(model);
}

void InferenceObservers::HandedOff(InferenceRequest* request, SteadyTime at) {
  if (access_line_) access_line_->HandedOff(request, at);
  if (trace_) trace_->HandedOff(request, at);
}

void InferenceObservers::Ran(SteadyTime at) {
  if (access_line_) access_line_->Ran(at);
  if (trace_) trace_->Ran(at);
}

void InferenceObservers::Finished(std::string_view request_id, const InferenceOutcome& outcome,
                                  const InferenceFlowTiming* timing, SteadyTime at) {
  // A client that went away (499, gRPC CANCELLED) was sent nothing: the error body built for it
  // is no response bytes (nginx logs 0 for a 499 too; probe 41).
  InferenceOutcome reported = outcome;
  if (outcome.error.code() == StatusCode::kCancelled) reported.response_bytes = 0;
  if (access_line_) access_line_->Finished(request_id, reported, timing, at);
  if (trace_) trace_->Finished(request_id, reported, timing, at);
}

std::shared_ptr<TracedRequest> InferenceObservers::ReleaseTrace() {
  return trace_ ? trace_->Release() : nullptr;
}

StatusOr<std::shared_ptr<ServableModel>> InferenceFlow::RouteCall(const InferenceCall& call) const {
  // Failures before a version is known count under model="" (ModelManager::RecordUnroutedFailure);
  // from there on in the version's statistics and metrics.
  if (!call.version.ok()) {
    models_->RecordUnroutedFailure(call.version.status().code());
    return call.version.status();
  }
  static const ModelManager::RequestHeaders kNoHeaders;
  // The version is the call's, or the traffic policy's choice (docs/routing.md).
  StatusOr<std::shared_ptr<ServableModel>> model = models_->Route(
      call.model, *call.version, call.headers != nullptr ? *call.headers : kNoHeaders);
  if (!model.ok()) models_->RecordUnroutedFailure(model.status().code());
  return model;
}

}  // namespace harrier
