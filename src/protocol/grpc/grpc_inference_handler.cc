#include "protocol/grpc/grpc_inference_handler.h"

#include <google/protobuf/util/json_util.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "core/status_mapping.h"
#include "harrier/generation.h"
#include "protocol/grpc/infer_codec.h"
#include "protocol/kserve/kserve_handler.h"
#include "protocol/kserve/logging_settings.h"
#include "protocol/kserve/scheduling_fields.h"
#include "protocol/kserve/shared_memory_endpoints.h"
#include "protocol/openai/generate_request.h"
#include "protocol/openai/generation_params.h"
#include "protocol/openai/generation_record.h"
#include "protocol/openai/json_text.h"

namespace harrier::grpc_frontend {

namespace {

void FillTensorMetadata(
    const std::vector<TensorSpec>& specs,
    google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>* out) {
  for (const TensorSpec& spec : specs) {
    auto* t = out->Add();
    t->set_name(spec.name);
    t->set_datatype(std::string(DataTypeName(spec.dtype)));
    t->mutable_shape()->Add(spec.dims.begin(), spec.dims.end());
  }
}

void FillDuration(const DurationStat& d, inference::StatisticDuration* out) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

}  // namespace

GrpcInferenceHandler::GrpcInferenceHandler(ModelManager* models, Options options)
    : models_(models),
      options_([&] {
        if (options.extensions.empty()) options.extensions = kserve::DefaultKServeExtensions();
        return std::move(options);
      }()),
      flow_(models, {.access_log = options_.access_log,
                     .shared_memory = options_.shared_memory,
                     .inline_execution = options_.inline_execution}) {}

Status GrpcInferenceHandler::ServerLive(inference::ServerLiveResponse* response) const {
  response->set_live(true);
  return Status::Ok();
}

Status GrpcInferenceHandler::ServerReady(inference::ServerReadyResponse* response) const {
  const bool draining = options_.readiness != nullptr && options_.readiness->draining();
  response->set_ready(!draining && models_->AllReady());
  return Status::Ok();
}

Status GrpcInferenceHandler::ModelReady(const inference::ModelReadyRequest& request,
                                        inference::ModelReadyResponse* response) const {
  ASSIGN_OR_RETURN(std::optional<int64_t> version, ParseModelVersion(request.version()));
  auto model = models_->Get(request.name(), version);
  if (!model.ok() && model.status().code() != StatusCode::kUnavailable) return model.status();
  response->set_ready(model.ok());
  return Status::Ok();
}

Status GrpcInferenceHandler::ServerMetadata(inference::ServerMetadataResponse* response) const {
  response->set_name(options_.server_name);
  response->set_version(options_.server_version);
  for (const std::string& e : options_.extensions) response->add_extensions(e);
  return Status::Ok();
}

Status GrpcInferenceHandler::ModelMetadata(const inference::ModelMetadataRequest& request,
                                           inference::ModelMetadataResponse* response) const {
  ASSIGN_OR_RETURN(std::optional<int64_t> version, ParseModelVersion(request.version()));
  ASSIGN_OR_RETURN(harrier::ModelMetadata md, models_->Metadata(request.name(), version));
  response->set_name(md.name);
  for (const std::string& v : md.versions) response->add_versions(v);
  response->set_platform(md.platform);
  FillTensorMetadata(md.inputs, response->mutable_inputs());
  FillTensorMetadata(md.outputs, response->mutable_outputs());
  return Status::Ok();
}

Status GrpcInferenceHandler::ModelConfig(const inference::ModelConfigRequest& request,
                                         inference::ModelConfigResponse* response) const {
  ASSIGN_OR_RETURN(std::optional<int64_t> version, ParseModelVersion(request.version()));
  ASSIGN_OR_RETURN(auto model, models_->Get(request.name(), version));
  // ConfigJson is the protobuf JSON mapping of the very message (proto field names, 64-bit
  // integers as numbers, which the parser accepts); parsing it back is cheaper to maintain than
  // a second accessor, and this RPC is not on the request path.
  google::protobuf::util::JsonParseOptions parse_options;
  parse_options.ignore_unknown_fields = true;
  auto parsed = google::protobuf::util::JsonStringToMessage(
      model->ConfigJson(), response->mutable_config(), parse_options);
  if (!parsed.ok()) {
    return Internal("model '" + request.name() + "': its configuration does not convert to " +
                    "inference.ModelConfig: " + std::string(parsed.message()));
  }
  return Status::Ok();
}

Status GrpcInferenceHandler::ModelStatistics(const inference::ModelStatisticsRequest& request,
                                             inference::ModelStatisticsResponse* response) const {
  ASSIGN_OR_RETURN(std::optional<int64_t> version, ParseModelVersion(request.version()));
  std::optional<std::string_view> name;
  if (!request.name().empty()) name = request.name();
  ASSIGN_OR_RETURN(std::vector<ModelVersionStats> stats, models_->Stats(name, version));
  for (const ModelVersionStats& s : stats) {
    inference::ModelStatistics* m = response->add_model_stats();
    m->set_name(s.name);
    m->set_version(std::to_string(s.version));
    m->set_last_inference(s.last_inference_ms);
    m->set_inference_count(s.inference_count);
    m->set_execution_count(s.execution_count);
    inference::InferStatistics* is = m->mutable_inference_stats();
    FillDuration(s.success, is->mutable_success());
    FillDuration(s.fail, is->mutable_fail());
    FillDuration(s.queue, is->mutable_queue());
    FillDuration(s.compute_input, is->mutable_compute_input());
    FillDuration(s.compute_infer, is->mutable_compute_infer());
    FillDuration(s.compute_output, is->mutable_compute_output());
    is->mutable_cache_hit();  // no response cache: zero, present as in the REST answer
    is->mutable_cache_miss();
    for (const BatchStat& b : s.batch_stats) {
      inference::InferBatchStatistics* bs = m->add_batch_stats();
      bs->set_batch_size(b.batch_size);
      FillDuration(b.compute_input, bs->mutable_compute_input());
      FillDuration(b.compute_infer, bs->mutable_compute_infer());
      FillDuration(b.compute_output, bs->mutable_compute_output());
    }
  }
  return Status::Ok();
}

Status GrpcInferenceHandler::RepositoryIndex(const inference::RepositoryIndexRequest& request,
                                             inference::RepositoryIndexResponse* response) const {
  for (const ModelVersionState& m : models_->Index()) {
    if (request.ready() && m.state != ModelState::kReady) continue;
    auto* entry = response->add_models();
    entry->set_name(m.name);
    if (m.version > 0) entry->set_version(std::to_string(m.version));
    entry->set_state(std::string(ModelStateName(m.state)));
    entry->set_reason(m.reason);
  }
  return Status::Ok();
}

void GrpcInferenceHandler::RepositoryModelLoad(const inference::RepositoryModelLoadRequest& request,
                                               std::function<void(Status)> done) const {
  ModelLoadOptions options;
  for (const auto& [name, parameter] : request.parameters()) {
    if (name == "config") {
      if (!parameter.has_string_param())
        return done(
            InvalidArgument("load parameter 'config' must be a string_param holding the "
                            "config as JSON"));
      options.config_json = parameter.string_param();
    } else if (name.rfind("file:", 0) == 0) {
      // Triton's: the file's content as a bytes_param (the model manager checks the path).
      if (!parameter.has_bytes_param())
        return done(InvalidArgument("load parameter '" + name.substr(0, 128) +
                                    "' must be a bytes_param holding the file's content"));
      options.files.push_back({name.substr(5), parameter.bytes_param()});
    } else {
      return done(InvalidArgument("unknown load parameter '" + name.substr(0, 128) +
                                  "' (expected config, a string_param, or file:<version>/<name>, "
                                  "a bytes_param)"));
    }
  }
  models_->LoadModel(request.model_name(), std::move(options), std::move(done));
}

void GrpcInferenceHandler::RepositoryModelUnload(
    const inference::RepositoryModelUnloadRequest& request,
    std::function<void(Status)> done) const {
  for (const auto& [name, parameter] : request.parameters()) {
    // No model depends on another here (no ensembles yet): unload_dependents changes nothing.
    if (name != "unload_dependents") {
      return done(InvalidArgument("unknown unload parameter '" + name.substr(0, 128) +
                                  "' (expected unload_dependents)"));
    }
    if (!parameter.has_bool_param())
      return done(InvalidArgument("unload parameter 'unload_dependents' must be a bool_param"));
  }
  models_->UnloadModel(request.model_name(), std::move(done));
}

Status GrpcInferenceHandler::SystemSharedMemoryStatus(
    const inference::SystemSharedMemoryStatusRequest& request,
    inference::SystemSharedMemoryStatusResponse* response) const {
  if (options_.shared_memory == nullptr) return kserve::SystemSharedMemoryOff();
  ASSIGN_OR_RETURN(std::vector<SharedMemoryRegionStatus> regions,
                   options_.shared_memory->Regions(request.name()));
  for (const SharedMemoryRegionStatus& r : regions) {
    auto& entry = (*response->mutable_regions())[r.name];
    entry.set_name(r.name);
    entry.set_key(r.key);
    entry.set_offset(r.offset);
    entry.set_byte_size(r.byte_size);
  }
  return Status::Ok();
}

Status GrpcInferenceHandler::SystemSharedMemoryRegister(
    const inference::SystemSharedMemoryRegisterRequest& request) const {
  if (options_.shared_memory == nullptr) return kserve::SystemSharedMemoryOff();
  return options_.shared_memory->Register(request.name(), request.key(), request.offset(),
                                          request.byte_size());
}

Status GrpcInferenceHandler::SystemSharedMemoryUnregister(
    const inference::SystemSharedMemoryUnregisterRequest& request) const {
  return kserve::SystemSharedMemoryUnregister(options_.shared_memory, request.name());
}

Status GrpcInferenceHandler::CudaSharedMemoryStatus(
    const inference::CudaSharedMemoryStatusRequest& request) const {
  return kserve::CudaSharedMemoryStatusJson(request.name()).status();
}

Status GrpcInferenceHandler::CudaSharedMemoryRegister(
    const inference::CudaSharedMemoryRegisterRequest& request) const {
  return kserve::CudaSharedMemoryRegister(request.name());
}

Status GrpcInferenceHandler::LogSettings(const inference::LogSettingsRequest& request,
                                         inference::LogSettingsResponse* response) const {
  if (options_.log_control == nullptr) {
    return Status(StatusCode::kUnimplemented, "this server has no log settings to change");
  }
  harrier::LogSettings wanted = options_.log_control->Get();
  using Value = inference::LogSettingsRequest::SettingValue;
  for (const auto& [key, value] : request.settings()) {
    kserve::LogSettingValue v;
    switch (value.parameter_choice_case()) {
      case Value::kBoolParam: v = value.bool_param(); break;
      case Value::kUint32Param: v = int64_t{value.uint32_param()}; break;
      case Value::kStringParam: v = std::string_view(value.string_param()); break;
      case Value::PARAMETER_CHOICE_NOT_SET: break;
    }
    RETURN_IF_ERROR(kserve::ApplyLogSetting(key, v, &wanted));
  }
  if (!request.settings().empty()) RETURN_IF_ERROR(options_.log_control->Set(wanted));
  const harrier::LogSettings now = options_.log_control->Get();
  auto& out = *response->mutable_settings();
  out["log_file"].set_string_param(now.log_file);
  out["log_info"].set_bool_param(now.log_info);
  out["log_warning"].set_bool_param(now.log_warning);
  out["log_error"].set_bool_param(now.log_error);
  out["log_verbose_level"].set_uint32_param(static_cast<uint32_t>(now.log_verbose_level));
  out["log_format"].set_string_param(now.log_format);
  return Status::Ok();
}

namespace {

// ModelInfer's half of the inference flow: the protobuf messages in and out.
class GrpcInferCodec {
 public:
  GrpcInferCodec(inference::ModelInferRequest* request, inference::ModelInferResponse* response,
                 const kserve::DecodeLimits* limits, InferCallContext* call,
                 std::function<void(Status)> done)
      : request_(request),
        response_(response),
        limits_(limits),
        deadline_(call->deadline),
        client_id_(std::move(call->client_id)),
        done_(std::move(done)) {}

  Status Check() const {
    if (client_id_.size() > kserve::kMaxClientIdBytes) {
      return InvalidArgument("metadata x-client-id is longer than " +
                             std::to_string(kserve::kMaxClientIdBytes) + " bytes");
    }
    return Status::Ok();
  }
  // `request_` is read here only: it is the transport's, valid until `done` runs.
  StatusOr<std::unique_ptr<InferenceRequest>> Decode(ServableModel&,
                                                     const SharedMemoryContext& shared_memory) {
    StatusOr<DecodedInferRequest> decoded =
        DecodeModelInferRequest(request_, *limits_, shared_memory);
    if (!decoded.ok()) return decoded.status();
    form_ = decoded->output_form;
    return std::move(decoded->request);
  }
  Status Prepare(ServableModel& model, InferenceRequest* request) {
    if (deadline_ < request->deadline) request->deadline = deadline_;
    request->client_cancels_at_deadline = request->deadline != Clock::time_point::max();
    request->client_id = std::move(client_id_);
    // What the response needs of the request, which the model now owns and may free.
    selection_.model_name = request->model_name;
    selection_.id = request->id;
    selection_.outputs = request->outputs;
    for (RequestedOutput& o : selection_.outputs) {
      if (o.classification > 0) o.labels = model.ClassificationLabels(o.name);
    }
    max_batch_size_ = model.max_batch_size();
    return Status::Ok();
  }
  InferenceOutcome Refuse(const Status& s) {
    status_ = s;
    return {static_cast<int>(GrpcStatusCodeFor(s.code())), s, 0};
  }
  InferenceOutcome Encode(StatusOr<InferenceResponse> result,
                          std::span<const SharedMemoryOutput> shared_memory) {
    status_ = result.ok()
                  ? EncodeModelInferResponse(std::move(result).value(), selection_, max_batch_size_,
                                             form_, response_, shared_memory)
                  : result.status();
    // A failed call's response message is never sent: its size is not counted.
    return {static_cast<int>(GrpcStatusCodeFor(status_.code())), status_,
            status_.ok() ? response_->ByteSizeLong() : 0};
  }
  // The trace is the transport's to finish (it holds its own reference).
  void Send(InferenceAnswer) { done_(std::move(status_)); }

 private:
  inference::ModelInferRequest* request_;
  inference::ModelInferResponse* response_;
  const kserve::DecodeLimits* limits_;
  std::chrono::steady_clock::time_point deadline_;
  std::string client_id_;
  InferenceRequest selection_;
  int64_t max_batch_size_ = 0;
  OutputForm form_ = OutputForm::kRaw;
  Status status_;
  std::function<void(Status)> done_;
};

}  // namespace

void GrpcInferenceHandler::ModelInfer(inference::ModelInferRequest* request, InferCallContext call,
                                      inference::ModelInferResponse* response,
                                      std::function<void(Status)> done) const {
  const bool observed = options_.access_log != nullptr || call.trace != nullptr;
  // Built only for the access line or the span.
  const std::string target =
      observed ? "/inference.GRPCInferenceService/" + std::string(call.method) : std::string();
  const uint64_t request_bytes = observed ? request->ByteSizeLong() : 0;
  if (call.trace != nullptr) {
    TraceHead head;
    head.name = call.method;
    head.protocol = "grpc";
    head.transport = "gRPC";
    head.tls_version = call.tls_version;
    head.target = target;
    head.request_id = call.request_id;
    head.key_id = call.key_id;
    head.model = request->model_name();
    head.request_bytes = request_bytes;
    head.received = call.received_at;  // gRPC hands over the whole message at once
    head.body_received = call.received_at;
    call.trace->SetHead(head);
  }
  InferenceCall flow_call;
  flow_call.protocol = "grpc";
  flow_call.http_version = HttpVersion::kHttp2;
  flow_call.tls_version = call.tls_version;
  flow_call.method = call.method;
  flow_call.target = target;
  flow_call.request_id = std::move(call.request_id);
  flow_call.key_id = call.key_id;
  flow_call.model = request->model_name();
  flow_call.version = ParseModelVersion(request->model_version());
  flow_call.unrouted_log_model = request->model_name();
  flow_call.request_bytes = request_bytes;
  flow_call.received_at = call.received_at;
  flow_call.headers = call.headers;
  flow_call.cancellation = std::move(call.cancellation);
  flow_call.sole_requester = call.sole_requester;
  flow_call.trace = std::move(call.trace);
  flow_.Run(std::move(flow_call),
            GrpcInferCodec(request, response, &options_.decode_limits, &call, std::move(done)));
}

namespace {

// One generation's tokens as decoupled responses, reported through its GenerationRecord (the
// access log, the trace). Holds the version's handle until the end. Its calls come from the
// engine's thread, one sequence's, so the record needs no lock.
class StreamGenerationSink final : public GenerationSink {
 public:
  StreamGenerationSink(std::shared_ptr<ServableModel> model, std::string id,
                       openai::GenerationRecord record,
                       std::function<void(inference::ModelStreamInferResponse)> on_response,
                       std::function<void(Status)> done)
      : model_(std::move(model)),
        id_(std::move(id)),
        record_(std::move(record)),
        on_response_(std::move(on_response)),
        done_(std::move(done)) {}
  void OnStart(int, int) override { record_.SequenceStarted(std::chrono::steady_clock::now()); }
  void OnToken(std::string_view text, float) override {
    record_.Token(std::chrono::steady_clock::now());
    if (text.empty()) return;  // held back by the engine (a possible stop string)
    inference::ModelStreamInferResponse r = Head(false);
    inference::ModelInferResponse* infer = r.mutable_infer_response();
    auto* out = infer->add_outputs();
    out->set_name("text_output");
    out->set_datatype("BYTES");
    out->add_shape(1);
    std::string raw;
    AppendBytesElement(&raw, text);
    infer->add_raw_output_contents(std::move(raw));
    response_bytes_ += r.ByteSizeLong();
    on_response_(std::move(r));
  }
  void OnEnd(FinishReason reason, const GenerationUsage& usage, const Status& status) override {
    record_.SequenceEnded(usage);
    const Status outcome = FinishStatus(reason, status);
    inference::ModelStreamInferResponse last = Head(true);
    if (!outcome.ok()) last.set_error_message(outcome.message());
    response_bytes_ += last.ByteSizeLong();
    // The transport finishes the trace when the last response is written.
    (void)record_.Finish(static_cast<int>(GrpcStatusCodeFor(outcome.code())), outcome.message(),
                         response_bytes_);
    on_response_(std::move(last));
    auto done = std::move(done_);
    done(outcome);
  }

 private:
  inference::ModelStreamInferResponse Head(bool final) const {
    inference::ModelStreamInferResponse r;
    inference::ModelInferResponse* infer = r.mutable_infer_response();
    infer->set_model_name(model_->name());
    infer->set_model_version(std::to_string(model_->version()));
    infer->set_id(id_);
    (*infer->mutable_parameters())["triton_final_response"].set_bool_param(final);
    return r;
  }

  const std::shared_ptr<ServableModel> model_;
  const std::string id_;
  openai::GenerationRecord record_;
  uint64_t response_bytes_ = 0;
  const std::function<void(inference::ModelStreamInferResponse)> on_response_;
  std::function<void(Status)> done_;
};

// The call's parameters as the generate extension's body, {"text_input": "", "parameters":
// {...}}, so that one parser (protocol/openai/generate_request.h) reads them for both front
// ends: the same fields, defaults, ranges and messages. The text goes beside it, unparsed.
// JSON has no NaN or infinity: a double parameter that is one is refused here, by name.
StatusOr<std::string> GenerateBodyOf(const inference::ModelInferRequest& request) {
  std::string body = R"({"text_input":"","parameters":{)";
  bool first = true;
  for (const auto& [key, value] : request.parameters()) {
    if (!first) body.push_back(',');
    first = false;
    openai::AppendJsonText(&body, key);
    body.push_back(':');
    char digits[32];
    auto number = [&](auto v) {
      body.append(digits, std::to_chars(digits, digits + sizeof(digits), v).ptr);
    };
    switch (value.parameter_choice_case()) {
      case inference::InferParameter::kBoolParam:
        body += value.bool_param() ? "true" : "false";
        break;
      case inference::InferParameter::kInt64Param: number(value.int64_param()); break;
      case inference::InferParameter::kUint64Param: number(value.uint64_param()); break;
      case inference::InferParameter::kDoubleParam:
        if (!std::isfinite(value.double_param())) {
          return InvalidArgument("'parameters." + key + "' must be a finite number, got " +
                                 std::to_string(value.double_param()));
        }
        number(value.double_param());
        break;
      case inference::InferParameter::kStringParam:
        openai::AppendJsonText(&body, value.string_param());
        break;
      default: body += "null"; break;
    }
  }
  body += "}}";
  return body;
}

// text_input's bytes: the one element of a BYTES input, raw or typed. One prompt per request, as
// the REST endpoints take: a shape of more than one element (two prompts), or data that holds
// more elements than the shape, is refused rather than cut to its first.
StatusOr<std::string> TextInput(const inference::ModelInferRequest& request) {
  int found = -1;
  for (int i = 0; i < request.inputs_size(); ++i) {
    if (request.inputs(i).name() != "text_input") continue;
    if (found >= 0) return InvalidArgument("input 'text_input' is given twice");
    found = i;
  }
  if (found < 0) return InvalidArgument("a generative model takes the BYTES input 'text_input'");
  const auto& in = request.inputs(found);
  if (in.datatype() != "BYTES")
    return InvalidArgument("input 'text_input' must be BYTES, not " + in.datatype());
  if (in.parameters().contains("shared_memory_region")) {
    return InvalidArgument(
        "input 'text_input' cannot be read from shared memory: a model that generates text "
        "takes its prompt in the request (bytes_contents or raw_input_contents)");
  }
  bool one = true;  // every dimension 1 ([1], [1, 1] with a batch dimension, or a scalar)
  bool empty = false;
  std::string shape;
  for (int64_t d : in.shape()) {
    shape += (shape.empty() ? "" : ",") + std::to_string(d);
    if (d == 0) empty = true;
    if (d != 1) one = false;
  }
  if (empty) return InvalidArgument("input 'text_input' has no data");
  if (!one) {
    return InvalidArgument("input 'text_input' has shape [" + shape +
                           "]: this server takes one prompt per request (shape [1])");
  }
  const int typed = in.contents().bytes_contents_size();
  if (typed > 1) {
    return InvalidArgument("input 'text_input' holds " + std::to_string(typed) +
                           " elements: this server takes one prompt per request (shape [1])");
  }
  if (typed == 1) return in.contents().bytes_contents(0);
  if (found >= request.raw_input_contents_size())
    return InvalidArgument("input 'text_input' has no data");
  const std::string& raw = request.raw_input_contents(found);
  if (raw.size() < 4) return InvalidArgument("input 'text_input' is malformed");
  uint32_t n = 0;
  for (int k = 0; k < 4; ++k) n |= static_cast<uint32_t>(static_cast<uint8_t>(raw[k])) << (8 * k);
  // One element: its length prefix must account for every byte (a second element would not).
  if (raw.size() != 4 + static_cast<size_t>(n))
    return InvalidArgument("input 'text_input' is malformed: one BYTES element of " +
                           std::to_string(n) + " bytes in " + std::to_string(raw.size()) +
                           " bytes of raw contents");
  return raw.substr(4, n);
}

}  // namespace

bool GrpcInferenceHandler::ModelGenerate(
    const inference::ModelInferRequest& request, const InferCallContext& call,
    std::function<void(inference::ModelStreamInferResponse)> on_response,
    std::function<void(Status)> done) const {
  StatusOr<std::optional<int64_t>> version = ParseModelVersion(request.model_version());
  if (!version.ok()) return false;
  // Whether the model generates, from its handle alone: routing here for a tensor model (then
  // routed again by ModelInfer) took a half-open breaker's probe and never reported it, so the
  // breaker never closed for stream clients (probe 28).
  auto named = models_->Get(request.model_name(), *version);
  if (!named.ok() || (*named)->generative() == nullptr) return false;
  static const ModelManager::RequestHeaders kNoHeaders;
  auto model = models_->Route(request.model_name(), *version,
                              call.headers != nullptr ? *call.headers : kNoHeaders);
  if (!model.ok() || (*model)->generative() == nullptr) return false;
  GenerativeModel* engine = (*model)->generative();
  openai::GenerationRecord::Head about;
  about.request_id = call.request_id;
  about.protocol = "grpc";
  about.transport = "gRPC";
  about.http_version = HttpVersion::kHttp2;
  about.tls_version = call.tls_version;
  about.method = call.method;
  about.target = "/inference.GRPCInferenceService/" + std::string(call.method);
  about.span_name = std::string(call.method);
  about.model = request.model_name();
  about.key_id = call.key_id;
  about.request_bytes = request.ByteSizeLong();
  about.received = call.received_at;  // gRPC hands over the whole message at once
  openai::GenerationRecord record =
      openai::GenerationRecord::Start(options_.access_log, nullptr, std::move(about), call.trace);
  record.SetModel((*model)->name(), (*model)->version());
  // A request refused before the engine: counted under its version, as the REST endpoints
  // count theirs, and answered as any generation's end is, with the final flag (probe 31: a
  // client waiting for the flag per request waited for good).
  auto fail = [&](Status s) {
    (*model)->RecordFailure(s.code(), call.received_at);
    inference::ModelStreamInferResponse r;
    r.set_error_message(s.message());
    inference::ModelInferResponse* infer = r.mutable_infer_response();
    infer->set_model_name(request.model_name());
    infer->set_model_version(std::to_string((*model)->version()));
    infer->set_id(request.id());
    (*infer->mutable_parameters())["triton_final_response"].set_bool_param(true);
    (void)record.Finish(static_cast<int>(GrpcStatusCodeFor(s.code())), s.message(),
                        r.ByteSizeLong());
    on_response(std::move(r));
    done(std::move(s));
    return true;
  };
  StatusOr<std::string> text = TextInput(request);
  if (!text.ok()) return fail(text.status());
  const openai::RequestLimits limits;
  if (text->size() > limits.max_text_bytes) {
    return fail(InvalidArgument("input 'text_input' is over " +
                                std::to_string(limits.max_text_bytes) +
                                " bytes, this server's limit"));
  }
  StatusOr<std::string> body = GenerateBodyOf(request);
  if (!body.ok()) return fail(body.status());
  StatusOr<openai::GenerationParams> params = openai::ParseGenerateRequest(
      *body, (*model)->name(), openai::GenerateEndpoint::kGenerateStream, limits);
  if (!params.ok()) return fail(params.status());
  GenerationRequest g;
  openai::FillGenerationRequest(*params, 0, &g);
  g.prompt = std::move(text).value();
  g.cancellation = call.cancellation;
  g.deadline = call.deadline;
  g.received_at = call.received_at;
  g.version_named = version->has_value();
  if (call.client_id.size() > kserve::kMaxClientIdBytes) {
    return fail(InvalidArgument("metadata x-client-id is longer than " +
                                std::to_string(kserve::kMaxClientIdBytes) + " bytes"));
  }
  g.client_id = call.client_id;
  record.Decoded(std::chrono::steady_clock::now());
  auto sink = std::make_shared<StreamGenerationSink>(*model, request.id(), std::move(record),
                                                     on_response, std::move(done));
  Status accepted = engine->Generate(std::move(g), sink);
  // Refused at once: the engine never calls the sink, so the final (error) response is ours.
  if (!accepted.ok()) sink->OnEnd(FinishReason::kError, {}, accepted);
  return true;
}

}  // namespace harrier::grpc_frontend
