#include "protocol/kserve/kserve_handler.h"

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
#include "protocol/kserve/logging_settings.h"
#include "protocol/kserve/model_control_parameters.h"
#include "protocol/kserve/scheduling_fields.h"
#include "protocol/kserve/server_timing.h"
#include "protocol/kserve/shared_memory_endpoints.h"

namespace harrier::kserve {

std::vector<std::string> DefaultKServeExtensions() {
  return {"binary_tensor_data", "classification",   "model_configuration",
          "statistics",         "model_repository", "model_repository(unload_dependents)"};
}

namespace {

constexpr std::string_view kJson = "application/json";

// The body as the codecs read it (docs/api.md, "Compression"), padded for simdjson.
Status DecodeBodyContent(const HttpRequest& request, uint64_t max_bytes,
                         std::shared_ptr<const std::string>* body) {
  return DecodeRequestBody(request, max_bytes, kJsonPaddingBytes, body);
}

// Encodes an inference response in the coding the client accepts; unencoded if zlib fails.
void EncodeResponseContent(ContentCoding coding, HttpResponse* response) {
  if (coding == ContentCoding::kIdentity) return;
  std::optional<std::string> encoded = EncodeContent(response->body, coding);
  if (!encoded) return;
  response->body = std::move(*encoded);
  response->headers.emplace_back("Content-Encoding", ContentCodingName(coding));
  response->headers.emplace_back("Vary", "Accept-Encoding");
}

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", kJson);
  r.body = std::move(body);
  return r;
}

// The one place where an error becomes an HTTP response.
HttpResponse ErrorResponse(int http_status, std::string_view message) {
  std::string body = "{\"error\":";
  if (IsValidUtf8(message)) {
    AppendJsonString(&body, message);
  } else {  // e.g. a percent-decoded model name: keep the ASCII, mark the rest
    std::string ascii(message);
    for (char& c : ascii)
      if (static_cast<unsigned char>(c) >= 0x80) c = '?';
    AppendJsonString(&body, ascii);
  }
  body.push_back('}');
  return JsonResponse(http_status, std::move(body));
}

HttpResponse ErrorResponse(const Status& status) {
  HttpResponse response = ErrorResponse(HttpStatusFor(status.code()), status.message());
  // 429 (a full queue, a rate limit): when to come back. A hint, not a promise; admission
  // control decides again then.
  if (int seconds = RetryAfterSeconds(status); seconds > 0)
    response.headers.emplace_back("Retry-After", std::to_string(seconds));
  return response;
}

HttpResponse EmptyOk() {
  return HttpResponse{};
}

void AppendVersion(std::string* out, int64_t version) {
  out->push_back('"');
  AppendJsonNumber(out, version);
  out->push_back('"');
}

void AppendTensorSpecs(std::string* out, const std::vector<TensorSpec>& specs) {
  out->push_back('[');
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i) out->push_back(',');
    out->append("{\"name\":");
    AppendJsonString(out, specs[i].name);
    out->append(",\"datatype\":\"");
    out->append(DataTypeName(specs[i].dtype));
    out->append("\",\"shape\":[");
    for (size_t d = 0; d < specs[i].dims.size(); ++d) {
      if (d) out->push_back(',');
      AppendJsonNumber(out, specs[i].dims[d]);
    }
    out->append("]}");
  }
  out->push_back(']');
}

void AppendDuration(std::string* out, std::string_view name, const DurationStat& d) {
  out->push_back('"');
  out->append(name);
  out->append("\":{\"count\":");
  AppendJsonNumber(out, d.count);
  out->append(",\"ns\":");
  AppendJsonNumber(out, d.ns);
  out->push_back('}');
}

// "compute_input":{..},"compute_infer":{..},"compute_output":{..} — in inference_stats and in
// each batch_stats entry.
void AppendComputeDurations(std::string* out, const DurationStat& input, const DurationStat& infer,
                            const DurationStat& output) {
  AppendDuration(out, "compute_input", input);
  out->push_back(',');
  AppendDuration(out, "compute_infer", infer);
  out->push_back(',');
  AppendDuration(out, "compute_output", output);
}

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
  std::string name = "POST /v2/models/" + model;
  if (version) name += "/versions/" + std::to_string(*version);
  name += "/infer";
  TraceHead head;
  head.name = name;
  head.protocol = "http";
  head.transport = HttpVersionName(request.version);
  if (head.transport.empty()) head.transport = "HTTP";  // the transport did not say which
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

struct KServeHandler::Route {
  enum class Kind {
    kLive,
    kReady,
    kServerMetadata,
    kModelMetadata,
    kModelReady,
    kModelConfig,
    kModelStats,
    kAllStats,
    kInfer,
    kRepositoryIndex,
    kRepositoryControl,
    kTraffic,  // GET, PUT, DELETE /v2/models/{m}/traffic (docs/routing.md)
    kLogging,
    kSharedMemoryStatus,
    kSharedMemoryRegister,
    kSharedMemoryUnregister,
  };
  Kind kind = Kind::kLive;
  std::string_view method = "GET";  // the only method the route accepts
  std::string model;
  std::optional<int64_t> version;
  // kRepositoryControl: a load (else an unload).
  bool load = false;
  // Shared-memory routes: which extension, and the region in the path ("" = all).
  bool cuda = false;
  std::string region;
};

// Precheck() and Handle() both route every POST, one after the other on the connection's
// thread: the second finds the first's answer in a one-entry memo per thread, keyed by the whole
// path (a route is a function of the path alone, so whichever request comes next may use it).
// Saves about 1,000 instructions per inference request (docs/benchmarks.md, session 23).
StatusOr<KServeHandler::Route> KServeHandler::MatchRoute(std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  struct LastRoute {
    std::string path;
    std::optional<Route> route;
  };
  thread_local LastRoute last;
  if (last.route && last.path == path) return *last.route;
  StatusOr<Route> matched = ParsePath(path);
  if (matched.ok()) {
    last.path.assign(path);
    last.route = *matched;
  }
  return matched;
}

// Splits the path (query already dropped) and finds its route. kNotFound for unknown paths,
// kInvalidArgument for a bad version or percent-encoding.
StatusOr<KServeHandler::Route> KServeHandler::ParsePath(std::string_view path) {
  using Kind = Route::Kind;
  // Built only when needed: routing a good request allocates nothing.
  auto not_found = [path] { return NotFound("unknown path '" + std::string(path) + "'"); };
  if (path.empty() || path[0] != '/') return not_found();
  // No route has more than 6 segments ("/v2/models/m/versions/1/infer").
  constexpr size_t kMaxSegments = 8;
  struct Segments {
    std::array<std::string_view, kMaxSegments> items;
    size_t count = 0;
    size_t size() const { return count; }
    bool empty() const { return count == 0; }
    std::string_view operator[](size_t i) const { return items[i]; }
  } seg;
  for (size_t start = 1;;) {
    if (seg.count == kMaxSegments) return not_found();
    const size_t slash = path.find('/', start);
    seg.items[seg.count++] =
        path.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (seg.empty() || seg[0] != "v2") return not_found();

  Route route;
  // Every return below is the last use of `route`: moved, never copied.
  auto simple = [&](Kind kind, std::string_view method) {
    route.kind = kind;
    route.method = method;
    return std::move(route);
  };
  if (seg.size() == 1) return simple(Kind::kServerMetadata, "GET");
  // GET reads the settings; POST (which Handle() also lets through) changes them.
  if (seg[1] == "logging" && seg.size() == 2) return simple(Kind::kLogging, "GET");
  if (seg[1] == "health" && seg.size() == 3) {
    if (seg[2] == "live") return simple(Kind::kLive, "GET");
    if (seg[2] == "ready") return simple(Kind::kReady, "GET");
    return not_found();
  }
  if (seg[1] == "repository") {
    if (seg.size() == 3 && seg[2] == "index") return simple(Kind::kRepositoryIndex, "POST");
    if (seg.size() == 5 && seg[2] == "models" && (seg[4] == "load" || seg[4] == "unload")) {
      RETURN_IF_ERROR(PercentDecode(seg[3], &route.model));
      route.load = seg[4] == "load";
      return simple(Kind::kRepositoryControl, "POST");
    }
    return not_found();
  }
  if (seg[1] == "systemsharedmemory" || seg[1] == "cudasharedmemory") {
    // [/region/{r}]/status|unregister, /region/{r}/register
    route.cuda = seg[1] == "cudasharedmemory";
    std::string_view action;
    if (seg.size() == 3) {
      action = seg[2];
    } else if (seg.size() == 5 && seg[2] == "region") {
      RETURN_IF_ERROR(PercentDecode(seg[3], &route.region));
      if (route.region.empty()) return not_found();
      action = seg[4];
    } else {
      return not_found();
    }
    if (action == "status") return simple(Kind::kSharedMemoryStatus, "GET");
    if (action == "unregister") return simple(Kind::kSharedMemoryUnregister, "POST");
    if (action == "register" && !route.region.empty())
      return simple(Kind::kSharedMemoryRegister, "POST");
    return not_found();
  }
  if (seg[1] != "models" || seg.size() < 3) return not_found();
  if (seg.size() == 3 && seg[2] == "stats") return simple(Kind::kAllStats, "GET");

  RETURN_IF_ERROR(PercentDecode(seg[2], &route.model));
  if (route.model.empty())
    return InvalidArgument("empty model name in '" + std::string(path) + "'");
  size_t next = 3;
  if (seg.size() >= 5 && seg[3] == "versions") {
    ASSIGN_OR_RETURN(route.version, ParseUrlVersion(seg[4]));
    next = 5;
  }
  if (seg.size() == next) return simple(Kind::kModelMetadata, "GET");
  if (seg.size() != next + 1) return not_found();
  const std::string_view action = seg[next];
  if (action == "ready") return simple(Kind::kModelReady, "GET");
  if (action == "config") return simple(Kind::kModelConfig, "GET");
  if (action == "stats") return simple(Kind::kModelStats, "GET");
  if (action == "infer") return simple(Kind::kInfer, "POST");
  if (action == "traffic" && next == 3) return simple(Kind::kTraffic, "GET");
  return not_found();
}

KServeHandler::KServeHandler(ModelManager* models, Options options)
    : models_(models),
      options_(std::move(options)),
      flow_(models, {.access_log = options_.access_log,
                     .shared_memory = options_.shared_memory,
                     .inline_execution = options_.inline_execution}) {}

void KServeHandler::Answer(const HttpRequest& request, std::string_view request_id,
                           HttpResponse response, const HttpResponder& respond) const {
  AnswerRoute(options_.access_log, request, request_id, std::move(response), respond);
}

void KServeHandler::Handle(HttpRequest&& request, HttpResponder respond) {
  std::string request_id =
      ResolveRequestId(request.Header("x-request-id"), RequestIdGenerator::Process());
  auto answer = [&](HttpResponse response) {
    Answer(request, request_id, std::move(response), respond);
  };
  StatusOr<Route> matched = MatchRoute(request.target);
  if (!matched.ok()) return answer(ErrorResponse(matched.status()));
  const Route& route = *matched;
  const bool logging_post = route.kind == Route::Kind::kLogging && request.method == "POST";
  const bool traffic_write = route.kind == Route::Kind::kTraffic &&
                             (request.method == "PUT" || request.method == "DELETE");
  const bool get_route = route.method == "GET";
  const bool allowed_method =
      get_route ? IsGetOrHead(request.method) : request.method == route.method;
  if (!allowed_method && !logging_post && !traffic_write) {
    const std::string allowed = route.kind == Route::Kind::kLogging ? std::string("GET, HEAD, POST")
                                : route.kind == Route::Kind::kTraffic
                                    ? std::string("GET, HEAD, PUT, DELETE")
                                : get_route ? std::string("GET, HEAD")
                                            : std::string(route.method);
    HttpResponse r = ErrorResponse(405, "method " + request.method + " is not allowed on '" +
                                            request.target + "'; use " + allowed);
    r.headers.emplace_back("Allow", allowed);
    return answer(std::move(r));
  }
  using Kind = Route::Kind;
  switch (route.kind) {
    case Kind::kLive: return answer(EmptyOk());
    case Kind::kReady: return answer(ServerReady());
    case Kind::kServerMetadata: return answer(ServerMetadata());
    case Kind::kModelMetadata: return answer(ModelMetadata(route));
    case Kind::kModelReady: return answer(ModelReady(route));
    case Kind::kModelConfig: return answer(ModelConfig(route));
    case Kind::kModelStats:
    case Kind::kAllStats: return answer(ModelStats(route));
    case Kind::kRepositoryIndex: return answer(RepositoryIndex(request));
    case Kind::kLogging: return answer(Logging(request));
    case Kind::kSharedMemoryStatus:
    case Kind::kSharedMemoryRegister:
    case Kind::kSharedMemoryUnregister: return answer(SharedMemory(route, request));
    case Kind::kTraffic: return answer(Traffic(route, request));
    case Kind::kRepositoryControl:
      return RepositoryControl(route, std::move(request), std::move(request_id),
                               std::move(respond));
    case Kind::kInfer: return Infer(route, request, std::move(request_id), std::move(respond));
  }
  answer(ErrorResponse(Internal("unhandled route")));
}

HttpResponse KServeHandler::Logging(const HttpRequest& request) const {
  if (options_.log_control == nullptr) {
    return ErrorResponse(Unimplemented("log settings cannot be changed on this server"));
  }
  if (request.method == "POST") {
    std::shared_ptr<const std::string> content =
        request.body ? request.body : std::make_shared<const std::string>();
    if (Status s = DecodeBodyContent(request, options_.max_body_bytes, &content); !s.ok())
      return ErrorResponse(s);
    const std::string_view body = *content;
    StatusOr<LogSettings> wanted = ApplyLogSettingsJson(body, options_.log_control->Get());
    if (!wanted.ok()) return ErrorResponse(wanted.status());
    if (Status s = options_.log_control->Set(*wanted); !s.ok()) return ErrorResponse(s);
  }
  return JsonResponse(200, LogSettingsJson(options_.log_control->Get()));
}

HttpResponse KServeHandler::SharedMemory(const Route& route, const HttpRequest& request) const {
  using Kind = Route::Kind;
  Status done;
  switch (route.kind) {
    case Kind::kSharedMemoryStatus: {
      StatusOr<std::string> json =
          route.cuda ? CudaSharedMemoryStatusJson(route.region)
                     : SystemSharedMemoryStatusJson(options_.shared_memory, route.region);
      if (!json.ok()) return ErrorResponse(json.status());
      return JsonResponse(200, std::move(json).value());
    }
    case Kind::kSharedMemoryRegister:
      done = route.cuda ? CudaSharedMemoryRegister(route.region, request.body ? *request.body : "")
                        : SystemSharedMemoryRegister(options_.shared_memory, route.region,
                                                     request.body ? *request.body : "");
      break;
    case Kind::kSharedMemoryUnregister:
      // No CUDA region can exist here: unregistering them has nothing to do.
      if (!route.cuda) done = SystemSharedMemoryUnregister(options_.shared_memory, route.region);
      break;
    default: done = Internal("unhandled shared memory route");
  }
  return done.ok() ? EmptyOk() : ErrorResponse(done);
}

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

HttpResponse KServeHandler::ServerReady() const {
  if (options_.readiness != nullptr && options_.readiness->draining()) {
    return ErrorResponse(Unavailable("the server is shutting down"));
  }
  if (!models_->AllReady()) {
    return ErrorResponse(
        Unavailable("the server is not ready: some models are not loaded "
                    "(see POST /v2/repository/index)"));
  }
  return EmptyOk();
}

HttpResponse KServeHandler::ServerMetadata() const {
  std::string body = "{\"name\":";
  AppendJsonString(&body, options_.server_name);
  body.append(",\"version\":");
  AppendJsonString(&body, options_.server_version);
  body.append(",\"extensions\":[");
  for (size_t i = 0; i < options_.extensions.size(); ++i) {
    if (i) body.push_back(',');
    AppendJsonString(&body, options_.extensions[i]);
  }
  body.append("]}");
  return JsonResponse(200, std::move(body));
}

HttpResponse KServeHandler::ModelMetadata(const Route& route) const {
  StatusOr<harrier::ModelMetadata> md = models_->Metadata(route.model, route.version);
  if (!md.ok()) return ErrorResponse(md.status());
  std::string body = "{\"name\":";
  AppendJsonString(&body, md->name);
  body.append(",\"versions\":[");
  for (size_t i = 0; i < md->versions.size(); ++i) {
    if (i) body.push_back(',');
    AppendJsonString(&body, md->versions[i]);
  }
  body.append("],\"platform\":");
  AppendJsonString(&body, md->platform);
  body.append(",\"inputs\":");
  AppendTensorSpecs(&body, md->inputs);
  body.append(",\"outputs\":");
  AppendTensorSpecs(&body, md->outputs);
  body.push_back('}');
  return JsonResponse(200, std::move(body));
}

HttpResponse KServeHandler::ModelReady(const Route& route) const {
  auto model = models_->Get(route.model, route.version);
  if (!model.ok()) return ErrorResponse(model.status());
  return EmptyOk();
}

HttpResponse KServeHandler::ModelConfig(const Route& route) const {
  auto model = models_->Get(route.model, route.version);
  if (!model.ok()) return ErrorResponse(model.status());
  return JsonResponse(200, (*model)->ConfigJson());
}

HttpResponse KServeHandler::ModelStats(const Route& route) const {
  std::optional<std::string_view> name;
  if (route.kind == Route::Kind::kModelStats) name = route.model;
  auto stats = models_->Stats(name, route.version);
  if (!stats.ok()) return ErrorResponse(stats.status());
  std::string body = "{\"model_stats\":[";
  for (size_t i = 0; i < stats->size(); ++i) {
    const ModelVersionStats& s = (*stats)[i];
    if (i) body.push_back(',');
    body.append("{\"name\":");
    AppendJsonString(&body, s.name);
    body.append(",\"version\":");
    AppendVersion(&body, s.version);
    body.append(",\"last_inference\":");
    AppendJsonNumber(&body, s.last_inference_ms);
    body.append(",\"inference_count\":");
    AppendJsonNumber(&body, s.inference_count);
    body.append(",\"execution_count\":");
    AppendJsonNumber(&body, s.execution_count);
    body.append(",\"inference_stats\":{");
    AppendDuration(&body, "success", s.success);
    body.push_back(',');
    AppendDuration(&body, "fail", s.fail);
    body.push_back(',');
    AppendDuration(&body, "queue", s.queue);
    body.push_back(',');
    AppendComputeDurations(&body, s.compute_input, s.compute_infer, s.compute_output);
    body.push_back(',');
    AppendDuration(&body, "cache_hit", DurationStat{});  // no response cache yet
    body.push_back(',');
    AppendDuration(&body, "cache_miss", DurationStat{});
    body.append("},\"batch_stats\":[");
    for (size_t b = 0; b < s.batch_stats.size(); ++b) {
      const BatchStat& bs = s.batch_stats[b];
      if (b) body.push_back(',');
      body.append("{\"batch_size\":");
      AppendJsonNumber(&body, bs.batch_size);
      body.push_back(',');
      AppendComputeDurations(&body, bs.compute_input, bs.compute_infer, bs.compute_output);
      body.push_back('}');
    }
    body.append("]}");
  }
  body.append("]}");
  return JsonResponse(200, std::move(body));
}

namespace {

// The optional body of POST /v2/repository/index: {"ready": bool}.
StatusOr<bool> ReadyOnlyFilter(const std::shared_ptr<const std::string>& body) {
  if (!body || body->find_first_not_of(" \t\r\n") == std::string::npos) return false;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(simdjson::padded_string(*body)).get(root)) {
    return InvalidArgument(
        std::string("failed to parse the request JSON buffer: the repository index request: ") +
        simdjson::error_message(err));
  }
  simdjson::dom::object obj;
  if (root.get_object().get(obj)) {
    return InvalidArgument("the repository index request must be a JSON object");
  }
  bool ready = false;
  for (auto [key, value] : obj) {
    if (key != "ready") {
      return InvalidArgument("repository index request: unknown field '" + std::string(key) +
                             "' (expected ready)");
    }
    if (value.get_bool().get(ready)) {
      return InvalidArgument("repository index request: 'ready' must be a bool");
    }
  }
  return ready;
}

}  // namespace

void KServeHandler::RepositoryControl(const Route& route, HttpRequest request,
                                      std::string request_id, HttpResponder respond) const {
  const bool load = route.load;
  auto parameters = ParseModelControlParameters(
      request.body, load ? ModelControlAction::kLoad : ModelControlAction::kUnload);
  if (!parameters.ok())
    return Answer(request, request_id, ErrorResponse(parameters.status()), respond);
  // Answered when the load is done (seconds, for a large model), from a lifecycle thread: the
  // I/O thread is not held meanwhile.
  auto pending = std::make_shared<std::tuple<HttpRequest, std::string, HttpResponder>>(
      std::move(request), std::move(request_id), std::move(respond));
  auto done = [this, pending](Status status) {
    auto& [req, id, responder] = *pending;
    Answer(req, id, status.ok() ? EmptyOk() : ErrorResponse(status), responder);
  };
  if (load) {
    models_->LoadModel(route.model, std::move(parameters).value(), std::move(done));
  } else {
    models_->UnloadModel(route.model, std::move(done));
  }
}

HttpResponse KServeHandler::Traffic(const Route& route, const HttpRequest& request) const {
  if (request.method == "PUT") {
    const std::string_view body = request.body ? std::string_view(*request.body) : "";
    if (Status s = models_->SetTrafficPolicy(route.model, body); !s.ok()) return ErrorResponse(s);
  } else if (request.method == "DELETE") {
    if (Status s = models_->ClearTrafficPolicy(route.model); !s.ok()) return ErrorResponse(s);
  }
  StatusOr<std::string> state = models_->TrafficJson(route.model);
  if (!state.ok()) return ErrorResponse(state.status());
  return JsonResponse(200, std::move(state).value());
}

HttpResponse KServeHandler::RepositoryIndex(const HttpRequest& request) const {
  StatusOr<bool> ready_only = ReadyOnlyFilter(request.body);
  if (!ready_only.ok()) return ErrorResponse(ready_only.status());
  std::string body = "[";
  bool first = true;
  for (const ModelVersionState& m : models_->Index()) {
    if (*ready_only && m.state != ModelState::kReady) continue;
    if (!first) body.push_back(',');
    first = false;
    body.append("{\"name\":");
    AppendJsonString(&body, m.name);
    if (m.version > 0) {
      body.append(",\"version\":");
      AppendVersion(&body, m.version);
    }
    body.append(",\"state\":\"");
    body.append(ModelStateName(m.state));
    body.push_back('"');
    if (!m.reason.empty()) {
      body.append(",\"reason\":");
      AppendJsonString(&body, m.reason);
    }
    body.push_back('}');
  }
  body.push_back(']');
  return JsonResponse(200, std::move(body));
}

void KServeHandler::Infer(const Route& route, HttpRequest& request, std::string request_id,
                          HttpResponder respond) const {
  InferenceCall call;
  call.protocol = "http";
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
    call.trace = TracedRequest::Start(options_.tracer, request.Header("traceparent"),
                                      request.Header("tracestate"));
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
