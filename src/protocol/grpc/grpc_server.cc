#include "protocol/grpc/grpc_server.h"

#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>

#include <atomic>
#include <climits>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string_view>
#include <utility>

#include "core/request_id.h"
#include "core/status_mapping.h"
#include "protocol/grpc/grpc_service.grpc.pb.h"

namespace harrier::grpc_frontend {

namespace {

// GrpcCode (src/core, no gRPC headers) carries the wire protocol's numbers.
static_assert(static_cast<int>(GrpcCode::kCancelled) == grpc::StatusCode::CANCELLED);
static_assert(static_cast<int>(GrpcCode::kInvalidArgument) == grpc::StatusCode::INVALID_ARGUMENT);
static_assert(static_cast<int>(GrpcCode::kDeadlineExceeded) == grpc::StatusCode::DEADLINE_EXCEEDED);
static_assert(static_cast<int>(GrpcCode::kNotFound) == grpc::StatusCode::NOT_FOUND);
static_assert(static_cast<int>(GrpcCode::kResourceExhausted) ==
              grpc::StatusCode::RESOURCE_EXHAUSTED);
static_assert(static_cast<int>(GrpcCode::kUnimplemented) == grpc::StatusCode::UNIMPLEMENTED);
static_assert(static_cast<int>(GrpcCode::kInternal) == grpc::StatusCode::INTERNAL);
static_assert(static_cast<int>(GrpcCode::kUnavailable) == grpc::StatusCode::UNAVAILABLE);

// The one place where a Status becomes a gRPC status. A refusal from admission control also
// carries trailing metadata `retry-after` (seconds), as REST's Retry-After header.
grpc::Status ToGrpcStatus(const Status& status, grpc::CallbackServerContext* context) {
  if (status.ok()) return grpc::Status::OK;
  if (int seconds = RetryAfterSeconds(status); seconds > 0)
    context->AddTrailingMetadata("retry-after", std::to_string(seconds));
  return grpc::Status(static_cast<grpc::StatusCode>(GrpcStatusCodeFor(status.code())),
                      status.message());
}

// grpc-timeout (a wall-clock deadline in gRPC's API) as a steady-clock deadline.
std::chrono::steady_clock::time_point SteadyDeadline(
    std::chrono::system_clock::time_point deadline,
    std::chrono::steady_clock::time_point steady_now) {
  if (deadline == std::chrono::system_clock::time_point::max())
    return std::chrono::steady_clock::time_point::max();
  const auto left = deadline - std::chrono::system_clock::now();
  // Beyond a year is "none"; keeps the arithmetic far from overflow.
  if (left > std::chrono::hours(24 * 365)) return std::chrono::steady_clock::time_point::max();
  return steady_now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
}

std::string ClientId(const grpc::CallbackServerContext* context) {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("x-client-id");
  return it == metadata.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

// Metadata `key`'s first value, or empty; valid while the call lives.
std::string_view MetadataValue(const grpc::CallbackServerContext* context, std::string_view key) {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find(grpc::string_ref(key.data(), key.size()));
  return it == metadata.end() ? std::string_view()
                              : std::string_view(it->second.data(), it->second.size());
}

// Whether to trace one inference of this call (`tracer` may be null), from the call's
// `traceparent` and `tracestate` metadata.
std::shared_ptr<kserve::TracedRequest> StartTrace(Tracer* tracer,
                                                  const grpc::CallbackServerContext* context) {
  if (tracer == nullptr) return nullptr;
  return kserve::TracedRequest::Start(tracer, MetadataValue(context, "traceparent"),
                                      MetadataValue(context, "tracestate"));
}

// Sends the call's request id as initial metadata `x-request-id`: the client's own
// `x-request-id` when acceptable (core/request_id.h), a generated one otherwise — as the REST
// API's X-Request-Id header; returns it. Must run before the call's initial metadata is sent.
std::string EchoRequestId(grpc::CallbackServerContext* context) {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("x-request-id");
  const std::string_view sent = it == metadata.end()
                                    ? std::string_view()
                                    : std::string_view(it->second.data(), it->second.size());
  std::string id = ResolveRequestId(sent, RequestIdGenerator::Process());
  context->AddInitialMetadata("x-request-id", id);
  return id;
}

InferCallContext NewCallContext(const grpc::CallbackServerContext* context) {
  InferCallContext call;
  call.received_at = std::chrono::steady_clock::now();
  call.deadline = SteadyDeadline(context->deadline(), call.received_at);
  call.cancellation = std::make_shared<CancellationToken>();
  call.client_id = ClientId(context);
  return call;
}

// One ModelInfer call: cancels the request's token when gRPC cancels the call. Finished from the
// handler's `done` (a model worker, or this thread for early errors and for a request run
// inline, before the reactor is even returned); deletes itself when gRPC is done with it.
// A traced call's record is finished in OnDone, when gRPC is done with the call: its response
// sent, unless the call was cancelled first.
class InferReactor final : public grpc::ServerUnaryReactor {
 public:
  InferReactor(std::shared_ptr<CancellationToken> token,
               std::shared_ptr<kserve::TracedRequest> trace)
      : token_(std::move(token)), trace_(std::move(trace)) {}
  // gRPC 1.51 otherwise hands OnDone (and OnCancel) of every call to its executor thread: one
  // more thread wake-up per call. Both reactions are short and never block (OnDone deletes the
  // reactor; OnCancel cancels a token, which may answer the call through Finish()), and gRPC
  // runs inlined reactions outside its locks, as it does for its own DefaultReactor. Not API
  // ("internal use"): a grpc++ upgrade that drops it fails to compile here (`override`).
  bool InternalInlineable() override { return true; }
  void OnCancel() override {
    cancelled_.store(true, std::memory_order_relaxed);
    token_->Cancel();
  }
  void OnDone() override {
    if (trace_ != nullptr) {
      trace_->Finish(!cancelled_.load(std::memory_order_relaxed), std::chrono::steady_clock::now());
    }
    delete this;
  }

 private:
  const std::shared_ptr<CancellationToken> token_;
  const std::shared_ptr<kserve::TracedRequest> trace_;  // null: untraced
  std::atomic<bool> cancelled_{false};
};

// One ModelStreamInfer call. Reads requests one at a time, runs up to `max_inflight` at once,
// and writes responses in completion order, one write at a time. Finishes (OK, or CANCELLED
// when the call was cancelled) once the client has stopped sending and every request is
// answered; deletes itself in OnDone, which gRPC calls only after Finish.
//
// Locking: mu_ guards the state below it. gRPC operations (StartRead, StartWrite, Finish) are
// started after mu_ is released, so a reaction that runs at once cannot deadlock; what they
// touch is claimed under mu_ first (read_outstanding_, writing_, finished_), and a claimed
// read or write keeps the stream from finishing, so `this` stays alive until they are started.
class StreamReactor final : public grpc::ServerBidiReactor<inference::ModelInferRequest,
                                                           inference::ModelStreamInferResponse> {
 public:
  StreamReactor(const GrpcInferenceHandler* handler, Tracer* tracer,
                grpc::CallbackServerContext* context, size_t max_inflight)
      : handler_(handler),
        tracer_(tracer),
        context_(context),
        max_inflight_(max_inflight == 0 ? 1 : max_inflight),
        token_(std::make_shared<CancellationToken>()) {
    request_id_ = EchoRequestId(context);  // one id for the whole stream
    read_outstanding_ = true;
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed, or the call is gone
      Actions next;
      {
        std::lock_guard lock(mu_);
        read_outstanding_ = false;
        reads_done_ = true;
        next = NextActionsLocked();
      }
      Run(next);
      return;
    }
    // read_outstanding_ stays true until the end of this reaction: the stream cannot finish
    // (and delete itself) while it runs, even if the request is answered inline.
    auto* slot = new Slot;
    slot->request = std::move(incoming_);
    incoming_.Clear();
    {
      std::lock_guard lock(mu_);
      ++inflight_;
    }
    InferCallContext call = NewCallContext(context_);
    call.request_id = request_id_;
    call.method = "ModelStreamInfer";
    call.cancellation = token_;  // one token: cancelling the stream cancels all its requests
    // Each request of the stream is traced on its own, as a child of the stream's traceparent.
    call.trace = StartTrace(tracer_, context_);
    slot->trace = call.trace;
    handler_->ModelInfer(&slot->request, std::move(call), slot->response.mutable_infer_response(),
                         [this, slot](Status status) { OnInferDone(slot, status); });
    Actions next;
    {
      std::lock_guard lock(mu_);
      read_outstanding_ = false;
      next = NextActionsLocked();
    }
    Run(next);
  }

  void OnWriteDone(bool ok) override {
    Actions next;
    {
      std::lock_guard lock(mu_);
      // Its response is written (or never will be): the send ends its trace.
      if (writes_.front()->trace) {
        writes_.front()->trace->Finish(ok, std::chrono::steady_clock::now());
      }
      delete writes_.front();
      writes_.pop_front();
      --inflight_;
      writing_ = false;
      if (!ok) broken_ = true;  // the call is gone: drop the answers still queued
      if (broken_) {
        for (Slot* s : writes_) delete s;
        inflight_ -= writes_.size();
        writes_.clear();
      }
      next = NextActionsLocked();
    }
    Run(next);
  }

  void OnCancel() override {
    {
      std::lock_guard lock(mu_);
      cancelled_ = true;
    }
    // Outside mu_: cancellation callbacks may answer requests inline (OnInferDone). The stream
    // cannot finish before this returns: gRPC runs OnDone only after OnCancel.
    token_->Cancel();
    Actions next;
    {
      std::lock_guard lock(mu_);
      next = NextActionsLocked();
    }
    Run(next);
  }

  void OnDone() override { delete this; }

 private:
  struct Slot {
    inference::ModelInferRequest request;
    inference::ModelStreamInferResponse response;
    std::shared_ptr<kserve::TracedRequest> trace;  // null: untraced
  };
  // What to start once mu_ is released.
  struct Actions {
    bool read = false;
    inference::ModelStreamInferResponse* write = nullptr;
    bool finish = false;
    bool finish_cancelled = false;
  };

  void OnInferDone(Slot* slot, const Status& status) {
    if (!status.ok()) {
      // The stream carries on: this request's error goes in its response, with the id and model
      // so that the client can tell which request failed.
      slot->response.Clear();
      slot->response.set_error_message(status.message());
      inference::ModelInferResponse* r = slot->response.mutable_infer_response();
      r->set_id(slot->request.id());
      r->set_model_name(slot->request.model_name());
      r->set_model_version(slot->request.model_version());
    }
    Actions next;
    {
      std::lock_guard lock(mu_);
      if (broken_) {
        delete slot;
        --inflight_;
      } else {
        writes_.push_back(slot);
      }
      next = NextActionsLocked();
    }
    Run(next);
  }

  // Claims the next read (when the client may still send and there is room), the next write,
  // or the finish.
  Actions NextActionsLocked() {
    Actions a;
    if (finished_) return a;
    if (!writing_ && !writes_.empty()) {
      writing_ = true;
      a.write = &writes_.front()->response;
    }
    if (!read_outstanding_ && !reads_done_ && !cancelled_ && inflight_ < max_inflight_) {
      read_outstanding_ = true;
      a.read = true;
    }
    if (!read_outstanding_ && inflight_ == 0 && !writing_ && (reads_done_ || cancelled_)) {
      finished_ = true;
      a.finish = true;
      a.finish_cancelled = cancelled_;
    }
    return a;
  }

  // Without mu_ held. A finish is the last use of `this`: OnDone may delete it at once.
  void Run(const Actions& a) {
    if (a.write) StartWrite(a.write);
    if (a.read) StartRead(&incoming_);
    if (a.finish) {
      Finish(a.finish_cancelled
                 ? grpc::Status(grpc::StatusCode::CANCELLED, "the stream was cancelled")
                 : grpc::Status::OK);
    }
  }

  const GrpcInferenceHandler* const handler_;
  Tracer* const tracer_;  // null: tracing off
  grpc::CallbackServerContext* const context_;
  const size_t max_inflight_;
  const std::shared_ptr<CancellationToken> token_;
  inference::ModelInferRequest incoming_;  // the read in progress writes here
  std::string request_id_;                 // constant after construction

  std::mutex mu_;
  std::deque<Slot*> writes_;       // answered, not yet written; front is being written
  size_t inflight_ = 0;            // read and not yet written (or dropped)
  bool read_outstanding_ = false;  // a read is started or OnReadDone is running
  bool writing_ = false;
  bool reads_done_ = false;
  bool cancelled_ = false;
  bool broken_ = false;  // a write failed
  bool finished_ = false;
};

StatusOr<std::string> ReadFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("cannot read " + std::string(what) + " '" + path + "'");
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

}  // namespace

class GrpcServer::Service final : public inference::GRPCInferenceService::CallbackService {
 public:
  Service(ModelManager* models, const Options& options)
      : handler_(models, options.handler),
        tracer_(options.handler.tracer),
        max_stream_inflight_(options.max_stream_inflight) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* response) override {
    return Answer(context, handler_.ServerLive(response));
  }
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest*,
                                        inference::ServerReadyResponse* response) override {
    return Answer(context, handler_.ServerReady(response));
  }
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override {
    return Answer(context, handler_.ModelReady(*request, response));
  }
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* response) override {
    return Answer(context, handler_.ServerMetadata(response));
  }
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override {
    return Answer(context, handler_.ModelMetadata(*request, response));
  }
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override {
    return Answer(context, handler_.ModelConfig(*request, response));
  }
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* context,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override {
    return Answer(context, handler_.ModelStatistics(*request, response));
  }
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* context,
                                            const inference::RepositoryIndexRequest* request,
                                            inference::RepositoryIndexResponse* response) override {
    return Answer(context, handler_.RepositoryIndex(*request, response));
  }
  grpc::ServerUnaryReactor* RepositoryModelLoad(
      grpc::CallbackServerContext* context, const inference::RepositoryModelLoadRequest* request,
      inference::RepositoryModelLoadResponse*) override {
    return Answer(context, handler_.RepositoryModelLoad(*request));
  }
  grpc::ServerUnaryReactor* RepositoryModelUnload(
      grpc::CallbackServerContext* context, const inference::RepositoryModelUnloadRequest* request,
      inference::RepositoryModelUnloadResponse*) override {
    return Answer(context, handler_.RepositoryModelUnload(*request));
  }

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override {
    std::string request_id = EchoRequestId(context);
    InferCallContext call = NewCallContext(context);
    call.request_id = std::move(request_id);
    call.trace = StartTrace(tracer_, context);
    // W3C Trace Context Level 2's traceresponse, as over REST: the server span.
    if (call.trace) context->AddInitialMetadata("traceresponse", call.trace->TraceResponse());
    auto* reactor = new InferReactor(call.cancellation, call.trace);
    // The library owns `request` (a mutable object handed over as const) until the reactor is
    // done; the codec moves the raw input bytes out of it instead of copying them.
    handler_.ModelInfer(
        const_cast<inference::ModelInferRequest*>(request), std::move(call), response,
        [reactor, context](Status status) { reactor->Finish(ToGrpcStatus(status, context)); });
    return reactor;
  }

  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
  ModelStreamInfer(grpc::CallbackServerContext* context) override {
    return new StreamReactor(&handler_, tracer_, context, max_stream_inflight_);
  }

 private:
  static grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context,
                                          const Status& status) {
    EchoRequestId(context);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(status, context));
    return reactor;
  }

  const GrpcInferenceHandler handler_;
  Tracer* const tracer_;  // null: tracing off
  const size_t max_stream_inflight_;
};

StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Create(const Options& options,
                                                         ModelManager* models) {
  if (options.tls_cert_file.empty() != options.tls_key_file.empty())
    return InvalidArgument("gRPC TLS needs both a certificate and a key");
  if (!options.tls_client_ca_file.empty() && options.tls_cert_file.empty())
    return InvalidArgument("a gRPC client CA needs a server certificate and key");
  std::unique_ptr<GrpcServer> server(new GrpcServer(options, models));
  if (!options.tls_cert_file.empty()) {
    ASSIGN_OR_RETURN(server->tls_cert_pem_, ReadFile(options.tls_cert_file, "TLS certificate"));
    ASSIGN_OR_RETURN(server->tls_key_pem_, ReadFile(options.tls_key_file, "TLS key"));
  }
  if (!options.tls_client_ca_file.empty()) {
    ASSIGN_OR_RETURN(server->tls_client_ca_pem_,
                     ReadFile(options.tls_client_ca_file, "TLS client CA"));
  }
  return server;
}

GrpcServer::GrpcServer(const Options& options, ModelManager* models)
    : options_(options), service_(std::make_unique<Service>(models, options)) {}

GrpcServer::~GrpcServer() {
  Stop(std::chrono::milliseconds(0));
}

Status GrpcServer::Start() {
  // Debian's abseil is built with its Mutex deadlock detection on (no NDEBUG): every gRPC lock
  // acquisition then updates a global lock graph, measurably slowing each call (perf on the
  // tiny model, docs/benchmarks.md). It is a debugging aid; turn it off for the process.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (tls()) {
    grpc::SslServerCredentialsOptions ssl(
        tls_client_ca_pem_.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                   : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = tls_client_ca_pem_;
    ssl.pem_key_cert_pairs.push_back({tls_key_pem_, tls_cert_pem_});
    credentials = grpc::SslServerCredentials(ssl);
  }
  const std::string host = options_.address.find(':') != std::string::npos
                               ? "[" + options_.address + "]"
                               : options_.address;
  int bound_port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(host + ":" + std::to_string(options_.port), credentials, &bound_port);
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<uint64_t>(options_.max_receive_message_bytes, INT_MAX)));
  // gRPC sets SO_REUSEPORT by default, which would let a second server share a port in use
  // silently; a busy port must be an error, as for HTTP.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || bound_port == 0) {
    server_.reset();
    return Unavailable("cannot listen for gRPC on " + host + ":" + std::to_string(options_.port));
  }
  port_ = static_cast<uint16_t>(bound_port);
  return Status::Ok();
}

void GrpcServer::Stop(std::chrono::milliseconds grace) {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
  server_.reset();
}

}  // namespace harrier::grpc_frontend
