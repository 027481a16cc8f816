#include "protocol/grpc/grpc_inference_handler.h"

#include <google/protobuf/util/json_util.h>

#include <optional>
#include <string_view>
#include <utility>

#include "protocol/grpc/infer_codec.h"
#include "protocol/kserve/kserve_handler.h"
#include "protocol/kserve/scheduling_fields.h"

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
    : models_(models), options_([&] {
        if (options.extensions.empty()) options.extensions = kserve::DefaultKServeExtensions();
        return std::move(options);
      }()) {}

Status GrpcInferenceHandler::ServerLive(inference::ServerLiveResponse* response) const {
  response->set_live(true);
  return Status::Ok();
}

Status GrpcInferenceHandler::ServerReady(inference::ServerReadyResponse* response) const {
  response->set_ready(models_->AllReady());
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

namespace {
Status ModelControlUnsupported() {
  return Unimplemented(
      "model load and unload are not supported: the server loads every model in its "
      "repository at start");
}
}  // namespace

Status GrpcInferenceHandler::RepositoryModelLoad(
    const inference::RepositoryModelLoadRequest&) const {
  return ModelControlUnsupported();
}

Status GrpcInferenceHandler::RepositoryModelUnload(
    const inference::RepositoryModelUnloadRequest&) const {
  return ModelControlUnsupported();
}

void GrpcInferenceHandler::ModelInfer(inference::ModelInferRequest* request, InferCallContext call,
                                      inference::ModelInferResponse* response,
                                      std::function<void(Status)> done) const {
  if (call.client_id.size() > kserve::kMaxClientIdBytes) {
    return done(InvalidArgument("metadata x-client-id is longer than " +
                                std::to_string(kserve::kMaxClientIdBytes) + " bytes"));
  }
  // The model first: an unknown model is answered without decoding the tensors.
  // Failures before a version is known count under model="" (as over REST); from there on
  // in the version's statistics and metrics.
  StatusOr<std::optional<int64_t>> version = ParseModelVersion(request->model_version());
  if (!version.ok()) {
    models_->RecordUnroutedFailure(version.status().code());
    return done(version.status());
  }
  auto model = models_->Get(request->model_name(), *version);
  if (!model.ok()) {
    models_->RecordUnroutedFailure(model.status().code());
    return done(model.status());
  }

  StatusOr<DecodedInferRequest> decoded = DecodeModelInferRequest(request, options_.decode_limits);
  if (!decoded.ok()) {
    (*model)->RecordFailure(decoded.status().code(), call.received_at);
    return done(decoded.status());
  }
  std::unique_ptr<InferenceRequest> infer_request = std::move(decoded->request);
  infer_request->received_at = call.received_at;
  if (call.deadline < infer_request->deadline) infer_request->deadline = call.deadline;
  infer_request->cancellation = std::move(call.cancellation);
  infer_request->client_id = std::move(call.client_id);

  // What the response needs of the request, which the model now owns and may free.
  InferenceRequest selection;
  selection.model_name = infer_request->model_name;
  selection.id = infer_request->id;
  selection.outputs = infer_request->outputs;
  const int64_t max_batch_size = (*model)->max_batch_size();
  const OutputForm form = decoded->output_form;

  (*model)->Infer(std::move(infer_request),
                  [selection = std::move(selection), max_batch_size, form, response,
                   done = std::move(done)](StatusOr<InferenceResponse> result) {
                    if (!result.ok()) return done(result.status());
                    done(EncodeModelInferResponse(std::move(result).value(), selection,
                                                  max_batch_size, form, response));
                  });
}

}  // namespace harrier::grpc_frontend
