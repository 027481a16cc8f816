#include "protocol/openai/openai_handler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "core/request_id.h"
#include "core/route_answer.h"
#include "core/status_mapping.h"
#include "core/timer_thread.h"
#include "core/url_path.h"
#include "harrier/generation.h"
#include "harrier/response_stream.h"
#include "protocol/common/content_coding.h"
#include "protocol/kserve/scheduling_fields.h"
#include "protocol/openai/endpoint_answers.h"
#include "protocol/openai/generate_request.h"
#include "protocol/openai/generation_record.h"
#include "protocol/openai/generation_stream.h"
#include "protocol/openai/handler_shared.h"
#include "protocol/openai/openai_error.h"
#include "protocol/openai/openai_request.h"
#include "protocol/openai/openai_response.h"
#include "protocol/openai/sse.h"
#include "protocol/openai/stream_resumer.h"

namespace harrier::openai {
namespace {

using Clock = std::chrono::steady_clock;

std::string_view PathOf(std::string_view target) {
  return target.substr(0, std::min(target.find('?'), target.size()));
}

// OpenAI's 404 for a model no one serves. A name longer than any a repository directory can
// have (NAME_MAX) is not echoed: a body may carry megabytes of it.
Status UnknownModel(std::string_view name) {
  constexpr size_t kLongestName = 255;
  if (name.size() > kLongestName) {
    return NotFound("The model does not exist: its name is " + std::to_string(name.size()) +
                    " bytes, and no model's is over " + std::to_string(kLongestName));
  }
  return NotFound("The model '" + std::string(name) + "' does not exist");
}

// On /v1, a model the router found no ready version of, by what its versions are doing: OpenAI's
// clients retry a 503 (three times, with their own backoff, when no Retry-After comes) and give
// up on a 404, so a model with no version loading or unloading (unloaded in explicit mode,
// failed) is OpenAI's 404, as GET /v1/models/{id} says of it at the same moment; one still on
// its way is a 503 worth retrying soon (probe 59). Triton's endpoints keep Triton's 503.
// Only for a model with no ready version at all, whose router's 503 says no wait of its own: a
// version that a circuit breaker took out, or one X-Harrier-Model-Version forces, keeps the
// router's answer (probe 60: a breaker's Retry-After 600 became 1).
Status NotServedOnV1(const ModelManager& models, std::string_view name, const Status& routed) {
  const std::vector<ModelVersionState> rows = models.IndexOf(name);
  if (rows.empty()) return routed;  // the server is shutting down, or the model went meanwhile
  bool coming = false;
  for (const ModelVersionState& row : rows) {
    if (row.state == ModelState::kReady) return routed;
    coming = coming || row.state != ModelState::kUnavailable;
  }
  if (coming) return Unavailable(std::string(routed.message()) + "; retry after 1 s");
  return UnknownModel(name);
}

HttpResponse MethodNotAllowed(std::string_view allow) {
  HttpResponse r = ErrorResponse(
      kChat, Status(StatusCode::kInvalidArgument, "method not allowed; use " + std::string(allow)));
  r.status = 405;
  r.headers.emplace_back("Allow", std::string(allow));
  return r;
}

// /v2/models/{m}[/versions/{v}]/generate[_stream]: the model, the version and which, both
// segments percent-decoded as the KServe routes decode them; false when the path is not one of
// them, or when a segment is malformed (a bad escape, a version that is not a positive integer):
// the KServe routes then answer the 400 that names it.
bool MatchGenerate(std::string_view path, std::string* model, std::optional<int64_t>* version,
                   int* kind) {
  constexpr std::string_view kPrefix = "/v2/models/";
  if (path.substr(0, kPrefix.size()) != kPrefix) return false;
  std::string_view rest = path.substr(kPrefix.size());
  if (rest.ends_with("/generate_stream")) {
    *kind = kGenerateStream;
    rest.remove_suffix(std::string_view("/generate_stream").size());
  } else if (rest.ends_with("/generate")) {
    *kind = kGenerate;
    rest.remove_suffix(std::string_view("/generate").size());
  } else {
    return false;
  }
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos) {
    if (rest.empty() || !PercentDecode(rest, model).ok()) return false;
    *version = std::nullopt;
    return true;
  }
  std::string_view tail = rest.substr(slash);
  constexpr std::string_view kVersions = "/versions/";
  if (tail.substr(0, kVersions.size()) != kVersions) return false;
  tail.remove_prefix(kVersions.size());
  StatusOr<int64_t> v = ParseUrlVersion(tail);
  if (!v.ok() || !PercentDecode(rest.substr(0, slash), model).ok()) return false;
  *version = *v;
  return true;
}

bool IsOwnPath(std::string_view path) {
  if (path.substr(0, 4) == "/v1/" || path == "/v1") return true;
  std::string model;
  std::optional<int64_t> version;
  int kind;
  return MatchGenerate(path, &model, &version, &kind);
}

}  // namespace

OpenAiHandler::OpenAiHandler(ModelManager* models, HttpHandler* next, Options options)
    : models_(models), next_(next), shared_(std::make_shared<Shared>()) {
  shared_->options = std::move(options);
  shared_->resume_log = shared_->options.access_log;
  auto store = StreamStore::Create(shared_->options.store);
  if (!store.ok()) {
    spdlog::error("openai: stream store options refused ({}); using the defaults",
                  store.status().message());
    store = StreamStore::Create(StreamStoreOptions{});
  }
  shared_->store = std::move(store).value();
}

OpenAiHandler::~OpenAiHandler() {
  std::lock_guard lock(shared_->resume_log_mu);
  shared_->resume_log = nullptr;  // a resume still streaming writes no line from here on
}

std::optional<HttpResponse> OpenAiHandler::Precheck(const HttpRequest& head) {
  if (IsOwnPath(PathOf(head.target))) return std::nullopt;
  return next_->Precheck(head);
}

bool OpenAiHandler::ServesAsStream(const HttpRequest& head) const {
  return next_->ServesAsStream(head);
}

std::shared_ptr<HttpStreamHandler> OpenAiHandler::OpenStream(
    const HttpRequest& head, std::shared_ptr<HttpStreamWriter> writer,
    HttpResponse* response_head) {
  return next_->OpenStream(head, std::move(writer), response_head);
}

std::optional<HttpResponse> OpenAiHandler::TransportError(int status, std::string_view message,
                                                          const HttpRequest& request,
                                                          std::string_view code) {
  if (!std::string_view(request.target).starts_with("/v1/"))
    return next_->TransportError(status, message, request, code);
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = OpenAiErrorJson(status, message, code);
  return r;
}

void OpenAiHandler::Handle(HttpRequest&& request, HttpResponder respond) {
  const std::string_view path = PathOf(request.target);
  std::string model;
  std::optional<int64_t> version;
  int kind = kChat;
  // An answer of this handler's own that is not a generation: its X-Request-Id and access line.
  auto with_id = [&](HttpResponse r) {
    AnswerRoute(shared_->options.access_log, request,
                ResolveRequestId(request.Header("x-request-id"), RequestIdGenerator::Process()),
                std::move(r), respond);
  };
  if (MatchGenerate(path, &model, &version, &kind)) {
    if (request.method != "POST") return with_id(MethodNotAllowed("POST"));
    return Generate(std::move(request), std::move(respond), kind, std::move(model), version);
  }
  if (path.substr(0, 4) != "/v1/" && path != "/v1") {
    next_->Handle(std::move(request), std::move(respond));
    return;
  }
  if (path == "/v1/chat/completions" || path == "/v1/completions") {
    if (request.method != "POST") return with_id(MethodNotAllowed("POST"));
    const int k = path == "/v1/completions" ? kCompletion : kChat;
    return Generate(std::move(request), std::move(respond), k, std::string(), std::nullopt);
  }
  if (path == "/v1/models" || path.substr(0, 11) == "/v1/models/") {
    if (!IsGetOrHead(request.method)) return with_id(MethodNotAllowed("GET, HEAD"));
    const bool one = path.size() > 11;
    std::string id;  // percent-decoded, as the SDKs encode it (encodeURIComponent)
    if (Status s = one ? PercentDecode(path.substr(11), &id) : Status::Ok(); !s.ok())
      return with_id(ErrorResponse(kChat, s, "model", {}));
    return with_id(ListModels(one, id));
  }
  if (path.substr(0, 12) == "/v1/streams/" && path.size() > 12) {
    if (!IsGetOrHead(request.method)) return with_id(MethodNotAllowed("GET, HEAD"));
    const std::string id(path.substr(12));
    return Resume(std::move(request), std::move(respond), id);
  }
  with_id(
      ErrorResponse(kChat, NotFound("no such endpoint: " + std::string(path)), {}, "unknown_url"));
}

HttpResponse OpenAiHandler::ListModels(bool one, std::string_view id) {
  std::vector<ModelEntry> entries;
  std::string last;
  for (const auto& row : models_->Index()) {
    if (row.state != ModelState::kReady || row.name == last) continue;
    last = row.name;
    auto model = models_->Get(row.name, std::nullopt);
    if (!model.ok() || (*model)->generative() == nullptr) continue;
    entries.push_back(ModelEntry{row.name, shared_->started});
  }
  if (!one) return JsonResponse(200, ModelListJson(entries));
  for (const auto& e : entries)
    if (e.id == id) return JsonResponse(200, ModelJson(e));
  return ErrorResponse(kChat, UnknownModel(id), "model", "model_not_found");
}

void OpenAiHandler::Generate(HttpRequest request, HttpResponder respond, int kind,
                             std::string model_name, std::optional<int64_t> version) {
  const Clock::time_point received_at =
      request.received_at == Clock::time_point{} ? Clock::now() : request.received_at;
  const std::string client_id =
      ResolveRequestId(request.Header("x-request-id"), RequestIdGenerator::Process());
  // Decoded when it came compressed (as the KServe endpoints do); checked below, once the
  // record can answer for it.
  std::shared_ptr<const std::string> content = request.body;
  const Status decoded =
      DecodeRequestBody(request, shared_->options.max_body_bytes, /*padding=*/0, &content);
  const std::string_view body = content ? std::string_view(*content) : std::string_view();
  GenerationRecord::Head about;
  about.request_id = client_id;
  about.protocol = "http";
  about.http_version = request.version;
  about.tls_version = request.tls_version;
  about.transport = std::string(HttpVersionName(request.version));
  if (about.transport.empty()) about.transport = "HTTP";
  about.method = request.method;
  about.target = request.target;
  // Triton's generate routes name the model in the path: the span is named by the route, as
  // the KServe infer span is (probe 52: a client must not choose span names).
  const std::string_view path = PathOf(request.target);
  about.span_name =
      request.method + " " +
      (!path.starts_with("/v2/") ? std::string(path)
                                 : std::string(version ? "/v2/models/{model}/versions/{version}/"
                                                       : "/v2/models/{model}/") +
                                       std::string(path.substr(path.rfind('/') + 1)));
  about.model = model_name;
  about.key_id = request.auth_key_id;
  about.request_bytes = body.size();
  about.received = received_at;
  about.body_received = request.body_received_at;
  const TraceContextFields trace_context(request.headers);  // read by Start
  about.traceparent = trace_context.traceparent();
  about.tracestate = trace_context.tracestate();
  GenerationRecord local_record = GenerationRecord::Start(
      shared_->options.access_log, shared_->options.tracer, std::move(about));
  std::string stream_id;                     // the store's, once the request streams
  GenerationRecord* record = &local_record;  // the generation's once it has one
  // Now: the sequences may all have ended (and the record finished) before the head is sent.
  const std::string trace_response = local_record.TraceResponse();
  std::shared_ptr<ServableModel> model;  // once routed
  // Refused before any choice reached the engine, which counts its own: counted as the tensor
  // endpoints count theirs (InferenceFlow), under the version once it is known, under model=""
  // before (a Triton endpoint's model, named by the URL, as soon as the URL names one that
  // exists).
  auto count_failure = [&](StatusCode code) {
    if (model == nullptr && !model_name.empty()) {
      if (auto named = models_->Get(model_name, version); named.ok()) {
        record->SetModel((*named)->name(), (*named)->version());
        return (*named)->RecordFailure(code, received_at);
      }
    }
    if (model != nullptr) return model->RecordFailure(code, received_at);
    models_->RecordUnroutedFailure(code);
  };
  auto fail = [&](const Status& status, std::string_view param = {}, std::string_view code = {}) {
    count_failure(status.code());
    HttpResponse r = ErrorResponse(kind, status, param, code);
    r.headers.emplace_back("X-Request-Id", client_id);
    if (record->traced()) r.headers.emplace_back("traceresponse", record->TraceResponse());
    r.on_sent = record->Finish(r.status, status.message(), r.body.size());
    respond(std::move(r));
  };
  if (!decoded.ok()) return fail(decoded);

  std::string param;
  StatusOr<GenerationParams> parsed =
      kind == kChat ? ParseChatCompletionRequest(body, shared_->options.limits, &param)
      : kind == kCompletion
          ? ParseCompletionRequest(body, shared_->options.limits, &param)
          : ParseGenerateRequest(body, model_name,
                                 kind == kGenerateStream ? GenerateEndpoint::kGenerateStream
                                                         : GenerateEndpoint::kGenerate,
                                 shared_->options.limits, &param);
  if (!parsed.ok()) {
    // A body that names an existing model is that model's bad request, as a Triton endpoint's
    // URL makes it (probe 41: counted under model="" with no model in its line or span).
    if (!IsTriton(kind)) model_name = ModelNamedIn(body);
    return fail(parsed.status(), param);
  }
  GenerationParams params = std::move(parsed).value();
  if (!IsTriton(kind)) model_name = params.model;
  record->Decoded(Clock::now());
  const bool streaming = params.stream || kind == kGenerateStream;
  // X-Request-Timeout-Us (and X-Client-Id) as for any inference request (docs/api.md).
  InferenceRequest scheduling;
  scheduling.received_at = received_at;
  if (Status s = kserve::ApplySchedulingFields(request, &scheduling); !s.ok()) return fail(s);

  auto routed = models_->Route(model_name, version, request.headers);
  if (!routed.ok() && !IsTriton(kind) && !version.has_value() &&
      routed.status().code() == StatusCode::kUnavailable &&
      RetryAfterSeconds(routed.status()) == 0) {
    routed = NotServedOnV1(*models_, model_name, routed.status());
  }
  if (!routed.ok()) {
    const bool missing = routed.status().code() == StatusCode::kNotFound;
    // A version asked for (in the URL, or X-Harrier-Model-Version) that the model lacks: the
    // router says which version; otherwise the model is unknown, in OpenAI's words.
    const bool model_missing =
        missing && !version.has_value() && !models_->Get(model_name, std::nullopt).ok();
    return fail(model_missing ? UnknownModel(model_name) : routed.status(), "model",
                missing ? "model_not_found" : "");
  }
  model = std::move(routed).value();
  record->SetModel(model->name(), model->version());
  GenerativeModel* engine = model->generative();
  if (engine == nullptr) {
    return fail(InvalidArgument("model '" + model_name +
                                "' does not generate text: it takes tensors through "
                                "POST /v2/models/" +
                                model_name + "/infer"),
                "model");
  }
  if (const int most = engine->max_requests(); most > 0 && params.n > most) {
    // Refused for good, not a 429 to retry: the engine never holds that many at once.
    return fail(InvalidArgument("n is " + std::to_string(params.n) + ", but model '" + model_name +
                                "' holds at most " + std::to_string(most) +
                                " requests at once (its parallel_sequences and "
                                "max_waiting_requests), each choice being one"),
                "n");
  }
  ChatPrompt prompt;  // a completion's has no contents: its control texts are meant
  if (params.chat) {
    auto rendered = engine->ApplyChatTemplate(params.messages);
    if (!rendered.ok()) return fail(rendered.status(), "messages");
    prompt = std::move(rendered).value();
  } else {
    prompt.text = params.prompt;
  }

  if (streaming) {
    // A stream's id is the server's own (docs/generation.md), and what its access line names.
    stream_id = shared_->store->Open(request.auth_key_id);
    record->SetRequestId(stream_id,
                         client_id == request.Header("x-request-id") ? client_id : std::string());
  }
  Generation::Setup setup;
  setup.shared = shared_;
  setup.kind = kind;
  setup.model = model;
  setup.client_token = request.cancellation;
  setup.request_id = stream_id;
  const int n = std::max(1, params.n);
  setup.params = std::move(params);
  setup.params.n = n;
  auto g = std::make_shared<Generation>(std::move(setup), std::move(local_record));
  record = &g->record();
  g->client_request_id_ = client_id;
  const GenerationParams& p = g->params();

  std::shared_ptr<ResponseStream> out;
  if (streaming) {
    out = std::make_shared<ResponseStream>();
    HttpResponse head;
    head.headers.emplace_back("Content-Type", "text/event-stream");
    head.headers.emplace_back("Cache-Control", "no-cache");
    head.headers.emplace_back("X-Accel-Buffering", "no");  // proxies: do not hold the events
    head.headers.emplace_back("X-Request-Id", g->request_id());
    head.headers.emplace_back("X-Harrier-Model-Version", std::to_string(model->version()));
    if (!trace_response.empty()) head.headers.emplace_back("traceresponse", trace_response);
    head.stream = out;
    g->SetStream(out, std::move(head), respond);
  } else {
    g->SetResponder(respond);
  }
  g->WatchClient();

  if (streaming) {
    std::lock_guard lock(shared_->live_mu);
    shared_->live[g->request_id()] = g;
  }

  // The sequences, each with its own sink; all share the generation's token, and its version
  // counts them as one request (RequestTally). A stream's head, or the plain error when no
  // sequence is accepted, is the generation's to send.
  const auto tally = n > 1 ? std::make_shared<RequestTally>(n) : nullptr;
  for (int i = 0; i < n; ++i) {
    GenerationRequest r;
    FillGenerationRequest(p, i, &r);
    r.prompt = prompt.text;
    r.literal = prompt.contents;
    r.cancellation = g->engine_token();
    r.received_at = received_at;
    r.deadline = scheduling.deadline;
    r.client_id = scheduling.client_id;
    r.version_named = version.has_value();  // the URL's (X-Harrier-Model-Version: the router's)
    r.tally = tally;
    Status s = engine->Generate(std::move(r), std::make_shared<ChoiceSink>(g, i));
    if (s.ok()) continue;
    g->Refused(i, s);
    // The answer is this refusal whatever the others give, streamed or not: they stop now, and
    // the rest are not started.
    for (int j = i + 1; j < n; ++j) {
      g->Refused(j, Cancelled("another choice of this request was refused"));
    }
    g->engine_token()->Cancel();
    break;
  }
  g->Submitted();
}

void OpenAiHandler::Resume(HttpRequest request, HttpResponder respond, std::string_view stream_id) {
  // The store's ids are 128 random bits in 32 hex digits: anything else names no stream, and is
  // not echoed back (a client's text of any length in a header and a message).
  const bool well_formed =
      stream_id.size() == 32 && std::all_of(stream_id.begin(), stream_id.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
      });
  // The resume is a request of its own: its X-Request-Id and access line carry its own id (the
  // client's, or a new one), and the stream's is in its path. With the stream's, a resume's line
  // shared the id of the generation's (probe 42).
  const std::string request_id =
      ResolveRequestId(request.Header("x-request-id"), RequestIdGenerator::Process());
  auto error = [&](const Status& s) {
    AnswerRoute(shared_->options.access_log, request, request_id, ErrorResponse(kChat, s), respond);
  };
  if (!well_formed) {
    return error(
        NotFound("no such stream: a stream's id is the 32 hexadecimal digits of its "
                 "X-Request-Id"));
  }
  uint64_t last = 0;
  const auto ids = std::count_if(request.headers.begin(), request.headers.end(),
                                 [](const auto& h) { return h.first == "last-event-id"; });
  if (ids > 1) {  // which one the client meant is anyone's guess: not the server's to pick
    return error(
        InvalidArgument("Last-Event-ID is given " + std::to_string(ids) + " times; send it once"));
  }
  if (ids == 1) {
    auto parsed = ParseLastEventId(request.Header("last-event-id"));
    if (!parsed.ok()) return error(parsed.status());
    last = *parsed;
  }
  auto out = std::make_shared<ResponseStream>();
  HttpRequest line;
  line.method = request.method;
  line.target = request.target;
  line.auth_key_id = request.auth_key_id;
  auto resumer = std::make_shared<Resumer>(shared_, out, std::move(line), request_id);
  std::weak_ptr<Resumer> weak = resumer;
  TimerThread* timer = &shared_->timer;
  auto reader = shared_->store->Resume(stream_id, request.auth_key_id, last,
                                       [weak, timer] { Resumer::Wake(weak, timer); });
  if (!reader.ok()) {
    return error(
        reader.status().code() == StatusCode::kNotFound
            ? NotFound("no stream '" + std::string(stream_id) + "': unknown, expired or evicted")
            : reader.status());
  }
  if (request.method == "HEAD") {  // the head only: the stream exists; nothing is replayed
    HttpResponse head;
    head.headers.emplace_back("Content-Type", "text/event-stream");
    head.headers.emplace_back("Cache-Control", "no-cache");
    return AnswerRoute(shared_->options.access_log, request, request_id, std::move(head), respond);
  }
  resumer->SetReader(std::move(reader).value());
  {
    std::lock_guard lock(shared_->live_mu);
    if (auto it = shared_->live.find(std::string(stream_id)); it != shared_->live.end())
      if (auto g = it->second.lock()) g->MarkResumed();
  }
  if (request.cancellation) {
    request.cancellation->OnCancel([weak] {
      if (auto r = weak.lock()) r->ClientGone();
    });
  }
  HttpResponse head;
  head.headers.emplace_back("Content-Type", "text/event-stream");
  head.headers.emplace_back("Cache-Control", "no-cache");
  head.headers.emplace_back("X-Accel-Buffering", "no");
  head.headers.emplace_back("X-Request-Id", request_id);
  head.stream = out;
  respond(std::move(head));
  resumer->Pump();
}

}  // namespace harrier::openai
