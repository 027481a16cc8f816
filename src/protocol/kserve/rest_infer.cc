// KServeHandler's inference over REST: the admission check from the header alone (Precheck) and
// the request through the shared inference flow (protocol/common/inference_flow.h) with the
// REST codec (JSON and binary tensors, classification, shared memory, compression).
#include <simdjson.h>

#include <array>
#include <charconv>
#include <chrono>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>

#include "core/http_text.h"
#include "core/json_writer.h"
#include "core/request_id.h"
#include "core/route_answer.h"
#include "core/status_mapping.h"
#include "core/url_path.h"
#include "core/utf8.h"
#include "protocol/common/content_coding.h"
#include "protocol/common/traced_request.h"
#include "protocol/kserve/classification.h"
#include "protocol/kserve/infer_response_encoder.h"
#include "protocol/kserve/kserve_handler.h"
#include "protocol/kserve/kserve_routes.h"
#include "protocol/kserve/logging_settings.h"
#include "protocol/kserve/model_control_parameters.h"
#include "protocol/kserve/rest_responses.h"
#include "protocol/kserve/scheduling_fields.h"
#include "protocol/kserve/server_timing.h"
#include "protocol/kserve/shared_memory_endpoints.h"

namespace harrier::kserve {
namespace {

// The request's Inference-Header-Content-Length, or the whole body when absent.
StatusOr<size_t> JsonHeaderLength(const HttpRequest& request, size_t body_size) {
  constexpr std::string_view kHeader = "inference-header-content-length";
  // One pass over the fields: the first one's value, and the field frames the body, so two that
  // differ leave the split to whoever reads which one (as two Content-Lengths do, RFC 9112 §6.3).
  const std::string* first = nullptr;
  for (const auto& [name, value] : request.headers) {
    if (name != kHeader) continue;
    if (first == nullptr) {
      first = &value;
    } else if (TrimOws(value) != TrimOws(*first)) {
      return InvalidArgument(
          "Inference-Header-Content-Length is given more than once, with different values");
    }
  }
  if (first == nullptr) return body_size;
  const std::string_view v = TrimOws(*first);
  size_t n = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || ptr != v.data() + v.size()) {
    return InvalidArgument("Inference-Header-Content-Length must be a non-negative integer, got '" +
                           *first + "'");
  }
  if (n > body_size) {
    return InvalidArgument("Inference-Header-Content-Length is " + std::to_string(n) +
                           " but the body has only " + std::to_string(body_size) + " bytes");
  }
  return n;
}

// W3C Trace Context Level 2: the server span of a traced request.
constexpr std::string_view kTraceResponseHeader = "traceresponse";

// Runs in the model's callback: classification, then encoding. `*failure` is the error when
// the response is one.
HttpResponse InferResponse(StatusOr<InferenceResponse> result, const InferenceRequest& selection,
                           std::span<const SharedMemoryOutput> shared_memory,
                           int64_t max_batch_size, Status* failure) {
  if (!result.ok()) {
    *failure = result.status();
    return ErrorResponse(result.status());
  }
  InferenceResponse& response = result.value();
  if (response.model_name.empty()) response.model_name = selection.model_name;
  for (const RequestedOutput& requested : selection.outputs) {
    if (requested.classification <= 0) continue;
    for (Tensor& t : response.outputs) {
      if (t.name != requested.name) continue;
      StatusOr<Tensor> classified =
          ClassifyOutput(t, requested.classification, max_batch_size, requested.labels.get());
      if (!classified.ok()) {
        *failure = classified.status();
        return ErrorResponse(classified.status());
      }
      t = std::move(classified).value();
    }
  }
  StatusOr<EncodedResponse> encoded = EncodeInferResponse(response, selection, shared_memory);
  if (!encoded.ok()) {
    *failure = encoded.status();
    return ErrorResponse(encoded.status());
  }
  HttpResponse http;
  // Content-Type, Inference-Header-Content-Length, Server-Timing and X-Request-Id fit the
  // headers' inline storage (harrier/http_headers.h): no allocation.
  if (encoded->binary) {
    http.headers.emplace_back("Content-Type", "application/octet-stream");
    http.headers.emplace_back("Inference-Header-Content-Length",
                              std::to_string(encoded->json_header_length));
  } else {
    http.headers.emplace_back("Content-Type", kJson);
  }
  http.body = std::move(encoded->body);
  return http;
}

// A traced inference's head, as far as the request itself tells: its name (the route's model
// and version, as in the URL), protocol and transport, and when it was received.
void BeginInferTrace(const std::string& model, std::optional<int64_t> version,
                     const HttpRequest& request, const std::string& request_id,
                     std::chrono::steady_clock::time_point handler_entry, TracedRequest* trace) {
  // The route, not the URL: a client chooses the model name and the version, and a span name
  // is a tracing backend's index key (an operation in Jaeger, a series in span metrics), so it
  // must not be theirs to multiply (probe 52). The model and version are attributes.
  TraceHead head;
  head.name = version ? "POST /v2/models/{model}/versions/{version}/infer"
                      : "POST /v2/models/{model}/infer";
  head.protocol = "http";
  head.transport = HttpVersionName(request.version);
  if (head.transport.empty()) head.transport = "HTTP";  // the transport did not say which
  head.tls_version = request.tls_version;
  head.target = request.target;
  head.request_id = request_id;
  head.key_id = request.auth_key_id;
  head.model = model;
  head.model_version = version.value_or(0);
  head.request_bytes = request.body ? request.body->size() : 0;
  // A transport that does not stamp the request: the handler's entry stands for both.
  const auto zero = std::chrono::steady_clock::time_point{};
  head.received = request.received_at != zero ? request.received_at : handler_entry;
  head.body_received = request.body_received_at != zero ? request.body_received_at : handler_entry;
  trace->SetHead(head);
}

// POST .../infer's half of the inference flow (protocol/common/inference_flow.h): the KServe
// JSON and binary bodies in, the HTTP response out. `request_` is read while the flow decodes
// and prepares the request only (until InferenceFlow::Run returns); what the answer needs is
// copied into the codec by then.
class RestInferCodec {
 public:
  RestInferCodec(const KServeHandler::Options* options, ModelManager* models,
                 std::string_view model, std::optional<int64_t> version, HttpRequest* request,
                 HttpResponder respond)
      : options_(options),
        models_(models),
        model_(model),
        version_(version),
        request_(request),
        respond_(std::move(respond)) {
    if (const std::string_view accept = request->Header("accept-encoding"); !accept.empty())
      response_coding_ = NegotiateContentCoding(accept);
  }

  Status Check() const { return Status::Ok(); }
  StatusOr<std::unique_ptr<InferenceRequest>> Decode(ServableModel& model,
                                                     const SharedMemoryContext& shared_memory) {
    const HttpRequest& request = *request_;
    std::shared_ptr<const std::string> body =
        request_->body ? std::move(request_->body) : std::make_shared<const std::string>();
    RETURN_IF_ERROR(DecodeBodyContent(request, options_->max_body_bytes, &body));
    ASSIGN_OR_RETURN(const size_t header_length, JsonHeaderLength(request, body->size()));
    // Triton's raw binary request (a header length of 0): the body is the only input's bytes,
    // its shape from the model's metadata (looked up for raw requests only).
    const bool raw = header_length == 0 && request.HasHeader("inference-header-content-length");
    if (!raw) {
      return DecodeInferRequest(std::move(body), header_length, options_->decode_limits,
                                shared_memory);
    }
    ASSIGN_OR_RETURN(harrier::ModelMetadata metadata, models_->Metadata(model_, version_));
    return DecodeRawInferRequest(std::move(body), model.name(), metadata.inputs,
                                 model.max_batch_size());
  }
  Status Prepare(ServableModel& model, InferenceRequest* request) {
    request->model_name = std::string(model_);
    request->model_version = version_;
    RETURN_IF_ERROR(ApplySchedulingFields(*request_, request));
    // What the response needs of the request, which the model now owns and may free.
    selection_.model_name = request->model_name;
    selection_.id = request->id;
    selection_.outputs = request->outputs;
    for (RequestedOutput& o : selection_.outputs) {
      if (o.classification > 0) o.labels = model.ClassificationLabels(o.name);
    }
    selection_.binary_data_output = request->binary_data_output;
    max_batch_size_ = model.max_batch_size();
    request_ = nullptr;  // the handler's, and done with: the callback's copy must not read it
    return Status::Ok();
  }
  InferenceOutcome Refuse(const Status& s) {
    response_ = ErrorResponse(s);
    return {response_.status, s, response_.body.size()};
  }
  InferenceOutcome Encode(StatusOr<InferenceResponse> result,
                          std::span<const SharedMemoryOutput> shared_memory) {
    Status failure;
    response_ =
        InferResponse(std::move(result), selection_, shared_memory, max_batch_size_, &failure);
    EncodeResponseContent(response_coding_, &response_);
    succeeded_ = failure.ok();
    return {response_.status, std::move(failure), response_.body.size()};
  }
  void Send(InferenceAnswer answer) {
    if (answer.completed && succeeded_) {
      response_.headers.emplace_back(
          "Server-Timing",
          FormatServerTiming(answer.timing.timing, answer.timing.output_ns, answer.timing.total_ns)
              .view());
    }
    if (answer.trace != nullptr) {
      response_.headers.emplace_back(kTraceResponseHeader, answer.trace->TraceResponse());
      response_.on_sent = TracedRequest::OnSent(std::move(answer.trace));
    }
    response_.headers.emplace_back(kRequestIdHeader, std::move(answer.request_id));
    respond_(std::move(response_));
  }

 private:
  const KServeHandler::Options* options_;
  ModelManager* models_;
  // The route's, as in the URL; like `request_`, read until the request is prepared only (a view,
  // so that a long name is copied once, into the request).
  std::string_view model_;
  std::optional<int64_t> version_;
  HttpRequest* request_;  // until InferenceFlow::Run returns
  HttpResponder respond_;
  ContentCoding response_coding_ = ContentCoding::kIdentity;
  InferenceRequest selection_;
  int64_t max_batch_size_ = 0;
  HttpResponse response_;
  bool succeeded_ = false;
};

}  // namespace

std::optional<HttpResponse> KServeHandler::Precheck(const HttpRequest& head) {
  if (head.method != "POST") return std::nullopt;
  StatusOr<Route> matched = MatchRoute(head.target);
  if (!matched.ok() || matched->kind != Route::Kind::kInfer) return std::nullopt;
  auto model = models_->Get(matched->model, matched->version);
  if (!model.ok()) return std::nullopt;
  Status admission = (*model)->CheckAdmission(head.Header("x-client-id"));
  if (admission.code() != StatusCode::kResourceExhausted) return std::nullopt;
  (*model)->RecordFailure(admission.code(), std::chrono::steady_clock::now());
  HttpResponse response = ErrorResponse(admission);
  const std::string request_id =
      ResolveRequestId(head.Header("x-request-id"), RequestIdGenerator::Process());
  response.headers.emplace_back(kRequestIdHeader, request_id);
  if (options_.access_log != nullptr) {
    InferenceCall call;  // request_bytes 0: the body is never read
    call.protocol = "http";
    call.http_version = head.version;
    call.tls_version = head.tls_version;
    call.method = head.method;
    call.target = head.target;
    call.key_id = head.auth_key_id;
    InferenceAccessLine line(options_.access_log, call);
    line.Routed(**model);
    line.Finished(request_id, {response.status, admission, response.body.size()}, nullptr,
                  std::chrono::steady_clock::now());
  }
  return response;
}

void KServeHandler::Infer(const Route& route, HttpRequest& request, std::string request_id,
                          HttpResponder respond) const {
  InferenceCall call;
  call.protocol = "http";
  call.http_version = request.version;
  call.tls_version = request.tls_version;
  call.method = request.method;
  call.target = request.target;
  call.key_id = request.auth_key_id;
  call.model = route.model;
  call.version = route.version;
  call.request_bytes = request.body ? request.body->size() : 0;
  call.received_at = std::chrono::steady_clock::now();
  call.headers = &request.headers;
  call.cancellation = std::move(request.cancellation);
  call.sole_requester = request.sole_requester;
  // Null unless this request is traced: an untraced request allocates nothing for tracing.
  if (options_.tracer != nullptr) {
    const TraceContextFields context(request.headers);
    call.trace = TracedRequest::Start(options_.tracer, context.traceparent(), context.tracestate());
    if (call.trace != nullptr) {
      BeginInferTrace(route.model, route.version, request, request_id, call.received_at,
                      call.trace.get());
    }
  }
  call.request_id = std::move(request_id);
  RestInferCodec codec(&options_, models_, route.model, route.version, &request,
                       std::move(respond));
  flow_.Run(std::move(call), std::move(codec));
}

}  // namespace harrier::kserve
