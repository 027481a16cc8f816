#include "protocol/grpc/grpc_http_handler.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "core/request_id.h"
#include "protocol/grpc/grpc_wire.h"

namespace harrier::grpc_frontend {

namespace {

constexpr std::string_view kServicePrefix = "/inference.GRPCInferenceService/";
// gRPC's standard health-checking protocol (grpc-health-probe, Kubernetes' gRPC probes), which
// Triton serves too. Only Check; Watch is UNIMPLEMENTED.
constexpr std::string_view kHealthCheck = "/grpc.health.v1.Health/Check";
using Clock = std::chrono::steady_clock;

bool IsGrpcContentType(std::string_view type) {
  constexpr std::string_view kGrpc = "application/grpc";
  if (type.substr(0, kGrpc.size()) != kGrpc) return false;
  return type.size() == kGrpc.size() || type[kGrpc.size()] == '+' || type[kGrpc.size()] == ';';
}

// Status 200, the gRPC content type and the call's request id: the head of every answer.
HttpResponse Head(std::string request_id) {
  HttpResponse r;
  r.headers.emplace_back("content-type", "application/grpc");
  r.headers.emplace_back("x-request-id", std::move(request_id));
  return r;
}

// A call that ends without a message: the head (clients read x-request-id and traceresponse
// from it as initial metadata) and the status in trailers. Not gRPC's Trailers-Only form, whose
// single HEADERS frame clients report as trailing metadata only.
HttpResponse Failed(HttpResponse head, const Status& status) {
  if (status.code() == StatusCode::kUnimplemented)
    head.headers.emplace_back("grpc-accept-encoding", kAcceptedMessageEncodings);
  head.body.clear();
  head.trailers = StatusFields(status);
  return head;
}

// `message` serialised behind its 5-byte prefix, in one allocation.
std::string Framed(const google::protobuf::MessageLite& message) {
  const std::size_t size = message.ByteSizeLong();
  std::string out(kMessagePrefixBytes + size, '\0');
  WriteMessagePrefix(size, out.data());
  message.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.data()) +
                                          kMessagePrefixBytes);
  return out;
}

// A unary call's one message: in place in `body`, or decompressed into `*storage` when the
// call's grpc-encoding compressed it.
StatusOr<std::string_view> UnaryMessage(const HttpRequest& request, std::size_t max_bytes,
                                        std::string* storage) {
  const std::string& body = *request.body;
  if (body.size() < kMessagePrefixBytes)
    return Status(StatusCode::kInternal, "the request carries no message");
  ASSIGN_OR_RETURN(const MessagePrefix prefix, ReadMessagePrefix(body.data(), max_bytes));
  if (body.size() != kMessagePrefixBytes + prefix.length) {
    return Status(StatusCode::kInternal, body.size() < kMessagePrefixBytes + prefix.length
                                             ? "the request's message is cut short"
                                             : "a unary call carries exactly one message");
  }
  return MessageBytes(prefix, std::string_view(body).substr(kMessagePrefixBytes),
                      ParseMessageEncoding(request.Header("grpc-encoding")), max_bytes, storage);
}

Status CannotParse(std::string_view type) {
  return Status(StatusCode::kInternal,
                "cannot parse the request message as inference." + std::string(type));
}

// The call's deadline from grpc-timeout (max(): none).
StatusOr<Clock::time_point> Deadline(const HttpRequest& request, Clock::time_point received) {
  const std::string_view timeout = request.Header("grpc-timeout");
  if (timeout.empty()) return Clock::time_point::max();
  auto parsed = ParseGrpcTimeout(timeout);
  if (!parsed.ok())
    return Status(StatusCode::kInternal, "malformed grpc-timeout: " + parsed.status().message());
  return received + std::chrono::duration_cast<Clock::duration>(*parsed);
}

std::shared_ptr<TracedRequest> StartTrace(Tracer* tracer, std::string_view traceparent,
                                          std::string_view tracestate) {
  if (tracer == nullptr) return nullptr;
  return TracedRequest::Start(tracer, traceparent, tracestate);
}

template <class Request, class Response, class Call>
HttpResponse Unary(std::string_view message, HttpResponse head, std::string_view type, Call call) {
  Request request;
  if (!request.ParseFromArray(message.data(), static_cast<int>(message.size())))
    return Failed(std::move(head), CannotParse(type));
  Response response;
  if (Status status = call(request, &response); !status.ok())
    return Failed(std::move(head), status);
  head.body = Framed(response);
  head.trailers.emplace_back("grpc-status", "0");
  return head;
}

// A request that is not a gRPC call at all: an HTTP error, with a grpc-status for gRPC clients.
HttpResponse NotGrpc(int http_status, std::string_view message) {
  HttpResponse r;
  r.status = http_status;
  r.headers.emplace_back("content-type", "text/plain");
  for (auto& field : StatusFields(GrpcCode::kInternal, message))
    r.headers.push_back(std::move(field));
  r.body = std::string(message) + "\n";
  return r;
}

}  // namespace

// One ModelStreamInfer call. Every member runs on the connection's I/O thread (the transport
// calls the HttpStreamHandler methods and the writers' on_written there), except OnInferDone,
// which a model worker may call and which only touches its slot and the (thread-safe) writer.
class GrpcHttpHandler::InferStream final : public HttpStreamHandler,
                                           public std::enable_shared_from_this<InferStream> {
 public:
  InferStream(const GrpcInferenceHandler* handler, Tracer* tracer, const HttpRequest& head,
              std::shared_ptr<HttpStreamWriter> writer, std::string request_id,
              Clock::time_point deadline, const Options& options)
      : handler_(handler),
        tracer_(tracer),
        writer_(std::move(writer)),
        request_id_(std::move(request_id)),
        client_id_(head.Header("x-client-id")),
        key_id_(head.auth_key_id),
        tls_version_(head.tls_version),
        sole_requester_(head.sole_requester),
        headers_(head.headers),
        traceparent_(TraceContextFields(head.headers).traceparent()),
        tracestate_(TraceContextFields(head.headers).tracestate()),
        deadline_(deadline),
        max_inflight_(options.max_stream_inflight == 0 ? 1 : options.max_stream_inflight),
        reader_(options.max_receive_message_bytes,
                ParseMessageEncoding(head.Header("grpc-encoding"))),
        token_(std::make_shared<CancellationToken>()),
        authorizer_(head.message_authorizer),
        max_pending_bytes_(options.max_pending_stream_bytes),
        pending_(std::make_shared<PendingResponses>()) {}

  void OnBody(std::string_view bytes) override {
    if (failed_ || cancelled_) {
      writer_->Consumed(bytes.size());
      return;
    }
    reader_.Append(bytes);
    if (!reader_.error().ok()) {
      // The messages before the bad one are still answered (DispatchReady), then the stream
      // ends with the error.
      writer_->Consumed(bytes.size());
      Fail(reader_.error());
      DispatchReady();
      return;
    }
    // Bytes are taken while there is room for more requests; past that the client waits.
    if (inflight_ < max_inflight_) {
      writer_->Consumed(bytes.size());
    } else {
      held_ += bytes.size();
    }
    DispatchReady();
  }

  void OnBodyEnd() override {
    reads_done_ = true;
    if (reader_.partial()) Fail(Status(StatusCode::kInternal, "the stream ended inside a message"));
    DispatchReady();
    MaybeFinish();
  }

  void OnCancel() override {
    cancelled_ = true;
    token_->Cancel();
  }

  // Part of a message is here and bytes are taken: a client that stops there is held to the
  // body timeout. Bytes held back (the stream's requests are at their limit) are the server's
  // wait, not the client's.
  bool InsideMessage() const override {
    return reader_.partial() && held_ == 0 && !failed_ && !cancelled_;
  }

  std::size_t PartialMessageBytes() const override {
    return failed_ || cancelled_ ? 0 : reader_.partial_bytes();
  }

  // Ends the stream with `status` before anything is read (a malformed grpc-timeout).
  void Refuse(Status status) { Fail(std::move(status)); }

 private:
  struct Slot {
    inference::ModelInferRequest request;
    inference::ModelStreamInferResponse response;
    std::shared_ptr<TracedRequest> trace;  // null: untraced
  };

  // Dispatches the complete messages while there is room. After a failure, those the reader
  // completed before it still are (it hands out none after it), but none after a message that
  // does not parse or whose key access control refused.
  void DispatchReady() {
    while (!stop_reading_ && !cancelled_ && inflight_ < max_inflight_) {
      std::optional<std::string> message = reader_.Next();
      if (!message) break;
      auto slot = std::make_shared<Slot>();
      if (!slot->request.ParseFromString(*message)) {
        stop_reading_ = true;
        Fail(CannotParse("ModelInferRequest"));
        break;
      }
      if (authorizer_ != nullptr) {
        // Access control for this message (the key may have gone since the stream opened): a
        // rate limit refuses this request in-band, as the stream's other refusals are said; a
        // key no longer valid for it ends the stream.
        MessageAuthorizer::Refusal refused = authorizer_->AuthorizeNext();
        if (refused.http_status == 429) {
          ++inflight_;
          OnInferDone(slot, ResourceExhausted(std::move(refused.message)));
          continue;
        }
        if (refused.http_status != 0) {
          stop_reading_ = true;
          failure_code_ = GrpcCodeForHttpStatus(refused.http_status);
          Fail(Status(StatusCode::kInternal, std::move(refused.message)));
          break;
        }
      }
      ++inflight_;
      InferCallContext call;
      call.received_at = Clock::now();
      call.deadline = deadline_;
      call.cancellation = token_;  // one token: cancelling the stream cancels all its requests
      call.client_id = client_id_;
      call.key_id = key_id_;
      call.tls_version = tls_version_;
      call.sole_requester = sole_requester_;
      call.headers = &headers_;
      call.request_id = request_id_;
      call.method = "ModelStreamInfer";
      // Each request of the stream is traced on its own, as a child of the stream's traceparent.
      call.trace = StartTrace(tracer_, traceparent_, tracestate_);
      slot->trace = call.trace;
      // A model that generates text answers with many responses (Triton's decoupled models);
      // the slot is free once the last is written.
      if (handler_->ModelGenerate(
              slot->request, call,
              [writer = writer_, pending = pending_, token = token_,
               bound = max_pending_bytes_](inference::ModelStreamInferResponse r) {
                // On the engine's thread. A client that reads so slowly that more than the
                // bound waits for it stops the stream's sequences (its token), and what they
                // still say is dropped; the stream then ends RESOURCE_EXHAUSTED (OnWritten).
                // Without it, a client that never read kept them generating for nobody, each
                // response queued (probe 31).
                if (pending->too_slow.load(std::memory_order_relaxed)) return;
                std::string framed = Framed(r);
                const std::size_t size = framed.size();
                if (pending->bytes.load(std::memory_order_relaxed) + size > bound) {
                  pending->too_slow.store(true, std::memory_order_relaxed);
                  token->Cancel();
                  return;
                }
                pending->bytes.fetch_add(size, std::memory_order_relaxed);
                writer->Write(std::move(framed), [pending, size](bool) {
                  pending->bytes.fetch_sub(size, std::memory_order_relaxed);
                });
              },
              [self = shared_from_this(), slot](const Status&) {
                self->writer_->Write(
                    std::string(), [self, slot](bool written) { self->OnWritten(*slot, written); });
              })) {
        continue;  // its trace is finished with the last response's write (OnWritten)
      }
      handler_->ModelInfer(
          &slot->request, std::move(call), slot->response.mutable_infer_response(),
          [self = shared_from_this(), slot](Status status) { self->OnInferDone(slot, status); });
    }
    if (held_ > 0 && (inflight_ < max_inflight_ || failed_ || cancelled_)) {
      writer_->Consumed(held_);
      held_ = 0;
    }
  }

  void OnInferDone(const std::shared_ptr<Slot>& slot, const Status& status) {
    if (!status.ok()) {
      // The stream carries on: this request's error goes in its response, with the id and model
      // so that the client can tell which request failed.
      slot->response.Clear();
      slot->response.set_error_message(status.message());
      inference::ModelInferResponse* r = slot->response.mutable_infer_response();
      r->set_id(slot->request.id());
      r->set_model_name(slot->request.model_name());
      r->set_model_version(slot->request.model_version());
      // An error is its request's last response, whatever the model: a client of a decoupled
      // model that waits for the flag per id (generation.md) never waits in vain, also when the
      // model was not found and so never known to generate (probe 45 F3).
      (*r->mutable_parameters())["triton_final_response"].set_bool_param(true);
    }
    writer_->Write(Framed(slot->response), [self = shared_from_this(), slot](bool written) {
      self->OnWritten(*slot, written);
    });
  }

  void OnWritten(const Slot& slot, bool written) {
    if (slot.trace) slot.trace->Finish(written, Clock::now());
    if (pending_->too_slow.load(std::memory_order_relaxed) && !failed_) {
      stop_reading_ = true;
      Fail(ResourceExhausted("the client reads the stream too slowly: more than " +
                             std::to_string(max_pending_bytes_) +
                             " bytes of generated responses waited for it; its generations "
                             "were stopped"));
    }
    --inflight_;
    DispatchReady();
    MaybeFinish();
  }

  // The stream ends with `status` once the requests it already took are answered: a bad
  // message is the client's, and the requests before it are answered as if it had not come
  // (docs/grpc.md), not cancelled.
  void Fail(Status status) {
    if (failed_) return;
    failed_ = true;
    failure_ = std::move(status);
    MaybeFinish();
  }

  void MaybeFinish() {
    if (finished_ || cancelled_ || inflight_ > 0 || !(reads_done_ || failed_)) return;
    if (failed_ && !stop_reading_ && reader_.has_next()) return;  // still to dispatch
    finished_ = true;
    writer_->Finish(failure_code_ ? StatusFields(*failure_code_, failure_.message())
                                  : StatusFields(failed_ ? failure_ : Status::Ok()));
  }

  const GrpcInferenceHandler* const handler_;
  Tracer* const tracer_;  // null: tracing off
  const std::shared_ptr<HttpStreamWriter> writer_;
  const std::string request_id_;  // one id for the whole stream
  const std::string client_id_;
  const std::string key_id_;  // the API key's id (src/auth/); empty: none
  const std::string_view tls_version_;  // HttpRequest::tls_version (static)
  const bool sole_requester_;
  const std::vector<std::pair<std::string, std::string>> headers_;  // the stream's metadata
  // The stream's trace context (TraceContextFields), kept for each of its requests' traces.
  const std::string traceparent_, tracestate_;
  const Clock::time_point deadline_;
  const std::size_t max_inflight_;

  MessageReader reader_;
  const std::shared_ptr<CancellationToken> token_;
  std::size_t inflight_ = 0;  // read and not yet written (or dropped)
  std::size_t held_ = 0;      // body bytes not reported as consumed (the client is held back)
  bool reads_done_ = false;
  bool cancelled_ = false;
  bool failed_ = false;
  bool stop_reading_ = false;  // a message did not parse, or its key was refused: none after it
  std::optional<GrpcCode> failure_code_;  // the stream's end, when failure_'s code does not say it
  const std::shared_ptr<MessageAuthorizer> authorizer_;  // access control per message; null: none
  bool finished_ = false;
  Status failure_ = Status::Ok();
  // Generation responses written and not yet with the kernel, shared with the engine threads
  // that write them.
  struct PendingResponses {
    std::atomic<std::size_t> bytes{0};
    std::atomic<bool> too_slow{false};  // past the bound: the stream's generations stop
  };
  const std::size_t max_pending_bytes_;
  const std::shared_ptr<PendingResponses> pending_;
};

HttpResponse GrpcHttpHandler::HealthCheck(const HttpRequest& request, HttpResponse head) const {
  std::string decompressed;
  auto message = UnaryMessage(request, options_.max_receive_message_bytes, &decompressed);
  if (!message.ok()) return Failed(std::move(head), message.status());
  // As Triton: SERVING when the server is ready (ServerReady's answer), else NOT_SERVING,
  // whatever HealthCheckRequest.service names. HealthCheckResponse { ServingStatus status = 1; }
  // is two bytes, written here rather than generated from health.proto: the field's tag (1,
  // varint) and the enum's value.
  inference::ServerReadyResponse ready;
  if (Status s = handler_.ServerReady(&ready); !s.ok()) return Failed(std::move(head), s);
  constexpr char kStatusTag = 0x08, kServing = 1, kNotServing = 2;
  head.body.assign(kMessagePrefixBytes + 2, '\0');
  WriteMessagePrefix(2, head.body.data());
  head.body[kMessagePrefixBytes] = kStatusTag;
  head.body[kMessagePrefixBytes + 1] = ready.ready() ? kServing : kNotServing;
  head.trailers.emplace_back("grpc-status", "0");
  return head;
}

GrpcHttpHandler::GrpcHttpHandler(ModelManager* models, const Options& options)
    : options_(options), handler_(models, options.handler) {}

void GrpcHttpHandler::Handle(HttpRequest&& request, HttpResponder respond) {
  if (request.method != "POST") {
    respond(NotGrpc(405, "gRPC calls are POST requests"));
    return;
  }
  if (!IsGrpcContentType(request.Header("content-type"))) {
    respond(NotGrpc(415, "this port serves gRPC: content-type must be application/grpc"));
    return;
  }
  if (request.version == HttpVersion::kHttp11) {
    respond(NotGrpc(505, "gRPC needs HTTP/2"));
    return;
  }
  const Clock::time_point received =
      request.received_at == Clock::time_point{} ? Clock::now() : request.received_at;
  std::string request_id =
      ResolveRequestId(request.Header("x-request-id"), RequestIdGenerator::Process());
  HttpResponse head = Head(request_id);
  const std::string_view target = request.target;
  if (target == kHealthCheck) {
    respond(HealthCheck(request, std::move(head)));
    return;
  }
  if (target.substr(0, kServicePrefix.size()) != kServicePrefix) {
    respond(Failed(std::move(head), Status(StatusCode::kUnimplemented,
                                           "unknown service in " + std::string(target))));
    return;
  }
  const std::string_view method = target.substr(kServicePrefix.size());
  if (method == "ModelStreamInfer") {  // only an h2c Upgrade's first stream comes here whole
    respond(Failed(std::move(head), Status(StatusCode::kUnimplemented,
                                           "ModelStreamInfer needs an HTTP/2 stream of its own")));
    return;
  }
  std::string decompressed;  // the message, when the call compressed it
  auto message = UnaryMessage(request, options_.max_receive_message_bytes, &decompressed);
  if (!message.ok()) {
    respond(Failed(std::move(head), message.status()));
    return;
  }
  const GrpcInferenceHandler& h = handler_;
  if (method == "ModelInfer") {
    auto deadline = Deadline(request, received);
    if (!deadline.ok()) {
      respond(Failed(std::move(head), deadline.status()));
      return;
    }
    struct Call {
      inference::ModelInferRequest request;
      inference::ModelInferResponse response;
    };
    auto state = std::make_shared<Call>();
    if (!state->request.ParseFromArray(message->data(), static_cast<int>(message->size()))) {
      respond(Failed(std::move(head), CannotParse("ModelInferRequest")));
      return;
    }
    InferCallContext call;
    call.received_at = received;
    call.deadline = *deadline;
    call.cancellation =
        request.cancellation ? request.cancellation : std::make_shared<CancellationToken>();
    call.client_id = std::string(request.Header("x-client-id"));
    call.key_id = request.auth_key_id;
    call.tls_version = request.tls_version;
    call.request_id = std::move(request_id);
    call.sole_requester = request.sole_requester;
    call.headers = &request.headers;
    if (options_.handler.tracer != nullptr) {
      const TraceContextFields context(request.headers);
      call.trace = StartTrace(options_.handler.tracer, context.traceparent(), context.tracestate());
    }
    if (call.trace) {
      // W3C Trace Context Level 2's traceresponse, as over REST: the server span.
      head.headers.emplace_back("traceresponse", call.trace->TraceResponse());
      head.on_sent = TracedRequest::OnSent(call.trace);
    }
    h.ModelInfer(
        &state->request, std::move(call), &state->response,
        [state, head = std::move(head), respond = std::move(respond)](Status status) mutable {
          if (!status.ok()) {
            respond(Failed(std::move(head), status));
            return;
          }
          head.body = Framed(state->response);
          head.trailers.emplace_back("grpc-status", "0");
          respond(std::move(head));
        });
    return;
  }
  using namespace inference;  // NOLINT: the message types of the one service
  HttpResponse answer;
  if (method == "ServerLive") {
    answer = Unary<ServerLiveRequest, ServerLiveResponse>(
        *message, std::move(head), "ServerLiveRequest",
        [&](const ServerLiveRequest&, ServerLiveResponse* r) { return h.ServerLive(r); });
  } else if (method == "ServerReady") {
    answer = Unary<ServerReadyRequest, ServerReadyResponse>(
        *message, std::move(head), "ServerReadyRequest",
        [&](const ServerReadyRequest&, ServerReadyResponse* r) { return h.ServerReady(r); });
  } else if (method == "ModelReady") {
    answer = Unary<ModelReadyRequest, ModelReadyResponse>(
        *message, std::move(head), "ModelReadyRequest",
        [&](const ModelReadyRequest& q, ModelReadyResponse* r) { return h.ModelReady(q, r); });
  } else if (method == "ServerMetadata") {
    answer = Unary<ServerMetadataRequest, ServerMetadataResponse>(
        *message, std::move(head), "ServerMetadataRequest",
        [&](const ServerMetadataRequest&, ServerMetadataResponse* r) {
          return h.ServerMetadata(r);
        });
  } else if (method == "ModelMetadata") {
    answer = Unary<ModelMetadataRequest, ModelMetadataResponse>(
        *message, std::move(head), "ModelMetadataRequest",
        [&](const ModelMetadataRequest& q, ModelMetadataResponse* r) {
          return h.ModelMetadata(q, r);
        });
  } else if (method == "ModelConfig") {
    answer = Unary<ModelConfigRequest, ModelConfigResponse>(
        *message, std::move(head), "ModelConfigRequest",
        [&](const ModelConfigRequest& q, ModelConfigResponse* r) { return h.ModelConfig(q, r); });
  } else if (method == "ModelStatistics") {
    answer = Unary<ModelStatisticsRequest, ModelStatisticsResponse>(
        *message, std::move(head), "ModelStatisticsRequest",
        [&](const ModelStatisticsRequest& q, ModelStatisticsResponse* r) {
          return h.ModelStatistics(q, r);
        });
  } else if (method == "RepositoryIndex") {
    answer = Unary<RepositoryIndexRequest, RepositoryIndexResponse>(
        *message, std::move(head), "RepositoryIndexRequest",
        [&](const RepositoryIndexRequest& q, RepositoryIndexResponse* r) {
          return h.RepositoryIndex(q, r);
        });
  } else if (method == "RepositoryModelLoad" || method == "RepositoryModelUnload") {
    // Answered when the model manager is done (a load takes as long as the model's set-up),
    // from one of its lifecycle threads: the I/O thread is not held meanwhile.
    auto answered = [head, respond](Status status) mutable {
      if (!status.ok()) return respond(Failed(std::move(head), status));
      head.body = Framed(RepositoryModelLoadResponse());  // both answers are empty messages
      head.trailers.emplace_back("grpc-status", "0");
      respond(std::move(head));
    };
    if (method == "RepositoryModelLoad") {
      RepositoryModelLoadRequest q;
      if (!q.ParseFromArray(message->data(), static_cast<int>(message->size())))
        return respond(Failed(std::move(head), CannotParse("RepositoryModelLoadRequest")));
      h.RepositoryModelLoad(q, std::move(answered));
    } else {
      RepositoryModelUnloadRequest q;
      if (!q.ParseFromArray(message->data(), static_cast<int>(message->size())))
        return respond(Failed(std::move(head), CannotParse("RepositoryModelUnloadRequest")));
      h.RepositoryModelUnload(q, std::move(answered));
    }
    return;
  } else if (method == "SystemSharedMemoryStatus") {
    answer = Unary<SystemSharedMemoryStatusRequest, SystemSharedMemoryStatusResponse>(
        *message, std::move(head), "SystemSharedMemoryStatusRequest",
        [&](const SystemSharedMemoryStatusRequest& q, SystemSharedMemoryStatusResponse* r) {
          return h.SystemSharedMemoryStatus(q, r);
        });
  } else if (method == "SystemSharedMemoryRegister") {
    answer = Unary<SystemSharedMemoryRegisterRequest, SystemSharedMemoryRegisterResponse>(
        *message, std::move(head), "SystemSharedMemoryRegisterRequest",
        [&](const SystemSharedMemoryRegisterRequest& q, SystemSharedMemoryRegisterResponse*) {
          return h.SystemSharedMemoryRegister(q);
        });
  } else if (method == "SystemSharedMemoryUnregister") {
    answer = Unary<SystemSharedMemoryUnregisterRequest, SystemSharedMemoryUnregisterResponse>(
        *message, std::move(head), "SystemSharedMemoryUnregisterRequest",
        [&](const SystemSharedMemoryUnregisterRequest& q, SystemSharedMemoryUnregisterResponse*) {
          return h.SystemSharedMemoryUnregister(q);
        });
  } else if (method == "CudaSharedMemoryStatus") {
    answer = Unary<CudaSharedMemoryStatusRequest, CudaSharedMemoryStatusResponse>(
        *message, std::move(head), "CudaSharedMemoryStatusRequest",
        [&](const CudaSharedMemoryStatusRequest& q, CudaSharedMemoryStatusResponse*) {
          return h.CudaSharedMemoryStatus(q);
        });
  } else if (method == "CudaSharedMemoryRegister") {
    answer = Unary<CudaSharedMemoryRegisterRequest, CudaSharedMemoryRegisterResponse>(
        *message, std::move(head), "CudaSharedMemoryRegisterRequest",
        [&](const CudaSharedMemoryRegisterRequest& q, CudaSharedMemoryRegisterResponse*) {
          return h.CudaSharedMemoryRegister(q);
        });
  } else if (method == "CudaSharedMemoryUnregister") {
    answer = Unary<CudaSharedMemoryUnregisterRequest, CudaSharedMemoryUnregisterResponse>(
        *message, std::move(head), "CudaSharedMemoryUnregisterRequest",
        [&](const CudaSharedMemoryUnregisterRequest&, CudaSharedMemoryUnregisterResponse*) {
          return Status::Ok();  // no CUDA region can exist here: nothing to unregister
        });
  } else if (method == "LogSettings") {
    answer = Unary<LogSettingsRequest, LogSettingsResponse>(
        *message, std::move(head), "LogSettingsRequest",
        [&](const LogSettingsRequest& q, LogSettingsResponse* r) { return h.LogSettings(q, r); });
  } else {
    answer = Failed(std::move(head),
                    Status(StatusCode::kUnimplemented, "unknown method " + std::string(method) +
                                                           " of inference.GRPCInferenceService"));
  }
  respond(std::move(answer));
}

bool GrpcHttpHandler::ServesAsStream(const HttpRequest& head) const {
  static constexpr std::string_view kStream = "/inference.GRPCInferenceService/ModelStreamInfer";
  // A unary call (or not gRPC at all) is read whole and answered by Handle().
  return head.target == kStream && head.method == "POST" &&
         IsGrpcContentType(head.Header("content-type"));
}

std::shared_ptr<HttpStreamHandler> GrpcHttpHandler::OpenStream(
    const HttpRequest& head, std::shared_ptr<HttpStreamWriter> writer,
    HttpResponse* response_head) {
  const Clock::time_point received =
      head.received_at == Clock::time_point{} ? Clock::now() : head.received_at;
  std::string request_id =
      ResolveRequestId(head.Header("x-request-id"), RequestIdGenerator::Process());
  *response_head = Head(request_id);
  auto deadline = Deadline(head, received);
  auto stream = std::make_shared<InferStream>(&handler_, options_.handler.tracer, head,
                                              std::move(writer), std::move(request_id),
                                              deadline.ok() ? *deadline : received, options_);
  if (!deadline.ok()) stream->Refuse(deadline.status());  // the status ends the stream at once
  return stream;
}

std::optional<HttpResponse> GrpcHttpHandler::TransportError(int status, std::string_view message,
                                                            const HttpRequest& request,
                                                            std::string_view code) {
  (void)code;
  // A gRPC client speaks HTTP/2; an HTTP/1.1 request to this port gets the server's JSON error
  // with its HTTP status, not a grpc-status under a 200 it could not read.
  if (request.version == HttpVersion::kHttp11) return std::nullopt;
  HttpResponse r;
  r.headers.emplace_back("content-type", "application/grpc");
  // A body over the HTTP layer's limit is a message over this port's (the limit and the 5-byte
  // prefix): said as a stream's message over it is, not in the REST refusal's words.
  std::string too_large;
  if (status == 413) {
    too_large = "received message larger than max (" +
                std::to_string(options_.max_receive_message_bytes) + " bytes)";
    message = too_large;
  }
  for (auto& field : StatusFields(GrpcCodeForHttpStatus(status), message))
    r.headers.push_back(std::move(field));
  return r;
}

}  // namespace harrier::grpc_frontend
