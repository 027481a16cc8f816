// GrpcInferenceHandler: the logic of every RPC of the KServe v2 gRPC service (with Triton's
// additions) over a ModelManager, on the generated protobuf messages, independent of the gRPC
// library: GrpcServer (grpc_server.h) adapts it to grpc++ calls, and its unit tests drive it
// with the fake ModelManager. It mirrors KServeHandler (the REST API) RPC for RPC:
//
//   ServerLive            live = true
//   ServerReady           ready = every model of the repository is ready and the server is not
//                         draining (never an error)
//   ModelReady            ready = true; false when the model exists but is not ready;
//                         kNotFound for an unknown model or version
//   ServerMetadata        name, version, extensions (the REST API's list)
//   ModelMetadata         as GET /v2/models/{m}[/versions/{v}]
//   ModelConfig           the completed config (ServableModel::ConfigJson parsed into
//                         inference.ModelConfig)
//   ModelStatistics       as GET /v2/models[/{m}[/versions/{v}]]/stats; empty name: every model
//   RepositoryIndex       every model version and its state (`ready`: ready ones only)
//   RepositoryModelLoad/Unload   as POST /v2/repository/models/{m}/load|unload (parameters
//                         `config` as a string_param, file overrides as bytes_params)
//   SystemSharedMemoryStatus/Register/Unregister   as the REST systemsharedmemory endpoints
//                         (kserve/shared_memory_endpoints.h), over Options::shared_memory
//   CudaSharedMemoryStatus/Register   no GPU: status of all is empty, of one region and
//                         register kInvalidArgument (Unregister is answered by the transport)
//   LogSettings           as GET/POST /v2/logging, over Options::log_control: the request's
//                         settings applied (none: only read), every setting answered
//   ModelInfer            decode (infer_codec.h), run on the model, encode
//   ModelGenerate         a ModelStreamInfer request to a model that generates text: its
//                         tokens as Triton's decoupled responses (docs/generation.md)
//
// Errors are Status values; the caller turns them into gRPC codes with GrpcStatusCodeFor
// (core/status_mapping.h): kInvalidArgument for a malformed request or version string,
// kNotFound, kUnavailable, kResourceExhausted (admission control, a full queue, a size limit),
// kDeadlineExceeded, kCancelled, kUnimplemented, kInternal.
//
// Thread safety: every method may be called from any number of threads at once.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harrier/access_log.h"
#include "harrier/cancellation.h"
#include "harrier/log_control.h"
#include "harrier/model_manager.h"
#include "harrier/server_readiness.h"
#include "harrier/status.h"
#include "harrier/trace.h"
#include "protocol/grpc/grpc_service.pb.h"
#include "protocol/kserve/infer_request_decoder.h"
#include "protocol/common/inference_flow.h"
#include "protocol/common/traced_request.h"
#include "shared_memory/shared_memory_registry.h"

namespace harrier::grpc_frontend {

// What the transport knows about one inference call.
struct InferCallContext {
  std::chrono::steady_clock::time_point received_at{};
  // From grpc-timeout; max() = none.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Cancelled when the call is (client cancel, disconnect, server shutdown); may be null.
  std::shared_ptr<CancellationToken> cancellation;
  // Metadata `x-client-id` (per-client rate limits); empty = anonymous.
  std::string client_id;
  // The id sent back as `x-request-id` initial metadata, for the access log.
  std::string request_id;
  // HttpRequest::auth_key_id (the API key's id, src/auth/), for the access log and the trace.
  std::string key_id;
  // HttpRequest::tls_version of the call's connection, for the access log and the trace.
  std::string_view tls_version;
  // HttpRequest::sole_requester of the call's HTTP/2 stream (for a ModelStreamInfer stream, as
  // it was when the stream opened).
  bool sole_requester = false;
  // The call's metadata (header fields, names lower-cased), for the traffic policy's
  // X-Harrier-Model-Version and sticky header (docs/routing.md); null: none. Must outlive the
  // ModelInfer call that reads it (it is read before ModelInfer returns).
  const std::vector<std::pair<std::string, std::string>>* headers = nullptr;
  // The RPC, for the access log.
  std::string_view method = "ModelInfer";
  // Set by the transport when the call is traced (TracedRequest::Start with the call's
  // `traceparent` / `tracestate` metadata); null otherwise. ModelInfer fills in the record up to
  // the encode; the transport holds its own reference and finishes it when gRPC reports the
  // response written.
  std::shared_ptr<TracedRequest> trace;
};

class GrpcInferenceHandler {
 public:
  struct Options {
    std::string server_name = "harrier";
    std::string server_version = "unknown";  // the composition root passes the build's version
    std::vector<std::string> extensions;     // empty: kserve::DefaultKServeExtensions()
    kserve::DecodeLimits decode_limits;
    // Not owned; must outlive the handler and every call in flight. Null: no access log.
    // ModelInfer (and each ModelStreamInfer request) is logged; the other RPCs are not.
    AccessLog* access_log = nullptr;
    // Not owned, as above. Null: no tracing. The transport (GrpcServer) asks it whether to trace
    // ModelInfer and each ModelStreamInfer request; the other RPCs are not traced.
    Tracer* tracer = nullptr;
    // Which ModelInfer / ModelStreamInfer requests may run on the gRPC thread that read them
    // (InferenceRequest::allow_inline; `--inline-execution`; docs/scheduling.md).
    InlinePolicy inline_execution = InlinePolicy::kSoleRequester;
    // Not owned, as above; the REST API's registry. Null: shared memory is off (the
    // SystemSharedMemory RPCs and tensors naming a region are INVALID_ARGUMENT).
    SharedMemoryRegistry* shared_memory = nullptr;
    // Not owned, as above. While it says draining (a shutdown has begun), ServerReady answers
    // ready=false and every other RPC is served as before. Null: readiness is the models' alone.
    const ServerReadiness* readiness = nullptr;
    // Not owned, as above; the REST API's (GET/POST /v2/logging). Null: LogSettings is
    // UNIMPLEMENTED.
    LogControl* log_control = nullptr;
  };

  // `models` is not owned and must outlive the handler and every call in flight.
  GrpcInferenceHandler(ModelManager* models, Options options);

  Status ServerLive(inference::ServerLiveResponse* response) const;
  Status ServerReady(inference::ServerReadyResponse* response) const;
  Status ModelReady(const inference::ModelReadyRequest& request,
                    inference::ModelReadyResponse* response) const;
  Status ServerMetadata(inference::ServerMetadataResponse* response) const;
  Status ModelMetadata(const inference::ModelMetadataRequest& request,
                       inference::ModelMetadataResponse* response) const;
  Status ModelConfig(const inference::ModelConfigRequest& request,
                     inference::ModelConfigResponse* response) const;
  Status ModelStatistics(const inference::ModelStatisticsRequest& request,
                         inference::ModelStatisticsResponse* response) const;
  Status RepositoryIndex(const inference::RepositoryIndexRequest& request,
                         inference::RepositoryIndexResponse* response) const;
  // As POST /v2/repository/models/{m}/load|unload; `done` is called once, when the model
  // manager is done (from one of its lifecycle threads, or at once for a refusal).
  void RepositoryModelLoad(const inference::RepositoryModelLoadRequest& request,
                           std::function<void(Status)> done) const;
  void RepositoryModelUnload(const inference::RepositoryModelUnloadRequest& request,
                             std::function<void(Status)> done) const;
  Status SystemSharedMemoryStatus(const inference::SystemSharedMemoryStatusRequest& request,
                                  inference::SystemSharedMemoryStatusResponse* response) const;
  Status SystemSharedMemoryRegister(
      const inference::SystemSharedMemoryRegisterRequest& request) const;
  Status SystemSharedMemoryUnregister(
      const inference::SystemSharedMemoryUnregisterRequest& request) const;
  Status CudaSharedMemoryStatus(const inference::CudaSharedMemoryStatusRequest& request) const;
  Status CudaSharedMemoryRegister(const inference::CudaSharedMemoryRegisterRequest& request) const;
  Status LogSettings(const inference::LogSettingsRequest& request,
                     inference::LogSettingsResponse* response) const;

  // Decodes `request` (its raw_input_contents are moved out), runs it on the model and fills
  // `response`. `done` is called exactly once: on the calling thread for errors found before the
  // request is queued, else on a model worker thread. `response` must stay valid until then.
  void ModelInfer(inference::ModelInferRequest* request, InferCallContext call,
                  inference::ModelInferResponse* response, std::function<void(Status)> done) const;

  // ModelStreamInfer to a model that generates text, as Triton's decoupled models answer: the
  // BYTES input `text_input` (and the request parameters max_tokens, temperature, top_k,
  // top_p, min_p, repetition_penalty, seed, stop) is generated, and each piece of text is one
  // response (`text_output`, BYTES [1], in raw_output_contents) with the parameter
  // `triton_final_response` false; then one response without outputs and with it true (or an
  // error_message). False, with nothing called, when `request` does not name a ready model
  // that generates text: ModelInfer then answers it. `on_response` may be called from the
  // engine's thread; `done` once, after the last response.
  bool ModelGenerate(const inference::ModelInferRequest& request, const InferCallContext& call,
                     std::function<void(inference::ModelStreamInferResponse)> on_response,
                     std::function<void(Status)> done) const;

 private:
  ModelManager* const models_;
  const Options options_;
  // ModelInfer's path to the model, shared with the REST front end (protocol/common/).
  const InferenceFlow flow_;
};

}  // namespace harrier::grpc_frontend
