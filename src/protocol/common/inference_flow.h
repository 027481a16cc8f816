// InferenceFlow: the one path a tensor inference takes between a front end's decoding and its
// encoding, whichever front end took it (the KServe REST handler on HTTP/1.1 and HTTP/2, the
// gRPC ModelInfer and ModelStreamInfer calls). It routes the request to a model version, counts
// every refusal where it belongs, pins the shared-memory outputs, fills in what the transport
// knows (receipt time, cancellation, inline execution), hands the request to the model and, when
// the model answers, times the encoding and reports the outcome to its observers: the access line
// (InferenceAccessLine, built only with an access log) and the trace (InferenceTraceStages, built
// only for a traced request). A front end keeps its decoding and its encoding only, as an
// InferenceCodec (below); the generation side's equivalent is openai::GenerationRecord.
//
// The steps, in order (each refusal is answered through the codec and reported once):
//   1. codec.Check()                     refused: not counted anywhere (a malformed call)
//   2. the call's version, then ModelManager::Route(model, version, headers)
//                                        refused: ModelManager::RecordUnroutedFailure (model="")
//   3. codec.Decode(model, shared memory) refused, and from here on: the version's RecordFailure
//   4. ResolveSharedMemoryOutputs        pinned until the response is encoded into them
//   5. received_at, cancellation, allow_inline; then codec.Prepare(model, request)
//   6. observers see the decoded request (input shapes; the server span, `decoded`)
//   7. ServableModel::Infer; in its callback codec.Encode(result, outputs), the outputs unpinned,
//      the observers told the outcome and the timing, codec.Send(answer)
//
// Cost: an untraced request allocates nothing for tracing and, with the access log off, nothing
// for logging; the flow's state and the codec come from a pool (InferenceInFlight below) and the
// model's callback holds a pointer to them, which std::function keeps inline: no allocation.
//
// Thread safety: Run() may be called from any number of threads at once. The codec's Decode,
// Prepare and Check run on the calling thread; Encode and Send on whichever thread the model's
// callback runs on (a worker, or the calling thread itself when run inline or refused).
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/block_pool.h"
#include "harrier/access_log.h"
#include "harrier/cancellation.h"
#include "harrier/inference_request.h"
#include "harrier/model_manager.h"
#include "harrier/status.h"
#include "protocol/common/traced_request.h"
#include "shared_memory/shared_memory_registry.h"
#include "shared_memory/shared_memory_tensors.h"

namespace harrier {

using SteadyTime = std::chrono::steady_clock::time_point;

// What the front end knows about one inference call besides its body. The string_views must
// stay valid until InferenceFlow::Run returns (the observers copy what they keep).
struct InferenceCall {
  std::string_view protocol;  // the access line's: "http" or "grpc"
  // The connection's (HttpRequest::version, HttpRequest::tls_version), for the access line.
  HttpVersion http_version = HttpVersion::kUnknown;
  std::string_view tls_version;
  std::string_view method;    // "POST"; the RPC's name for gRPC
  std::string_view target;    // the request target; the full gRPC method
  std::string request_id;     // as answered (X-Request-Id, gRPC's x-request-id)
  std::string_view key_id;    // the API key's id (HttpRequest::auth_key_id); empty: none
  std::string_view model;     // as the request names it
  // As the request names it; an error (a gRPC version that is not a number) is refused at
  // routing, counted as unrouted.
  StatusOr<std::optional<int64_t>> version = std::optional<int64_t>();
  // The model the access line names while no version is chosen (an unrouted refusal): gRPC's
  // has always named the requested model, REST's none.
  std::string_view unrouted_log_model;
  uint64_t request_bytes = 0;  // the body (gRPC: the request message)
  // Where the flow's clock starts: statistics, the request's receipt time, total_ns.
  SteadyTime received_at{};
  // Header fields for the traffic policy (docs/routing.md); null: none.
  const ModelManager::RequestHeaders* headers = nullptr;
  std::shared_ptr<CancellationToken> cancellation;  // may be null
  bool sole_requester = false;                      // HttpRequest::sole_requester
  // Non-null when the call is traced; its head (TracedRequest::SetHead) already filled in by the
  // front end. The flow stamps the stages and the outcome; who finishes it is the codec's affair
  // (REST's on_sent, gRPC's transport).
  std::shared_ptr<TracedRequest> trace;
};

// What an answer reports: the status the access line and the span carry (HTTP status, or the
// gRPC code), the error when it is one, and the answer's size as each front end counts it.
struct InferenceOutcome {
  int status = 0;
  Status error;
  uint64_t response_bytes = 0;
};

// The times of an answered inference: the model's stages, the encoding, receipt to encoded.
struct InferenceFlowTiming {
  InferenceTiming timing;
  uint64_t output_ns = 0;
  uint64_t total_ns = 0;
};

// Handed to InferenceCodec::Send, last: what the answer still needs of the flow.
struct InferenceAnswer {
  std::string request_id;
  // The model ran and its answer was encoded (not a refusal); `timing` is then set.
  bool completed = false;
  InferenceFlowTiming timing;
  // Null when untraced; the codec finishes it or lets it go.
  std::shared_ptr<TracedRequest> trace;
};

// A front end's half of one call: its decoding and its encoding. One per call; moved into the
// model's callback, so it holds what its answer needs (the outputs asked for, its responder);
// copyable, as the callback (std::function) must be.
template <class C>
concept InferenceCodec =
    std::copy_constructible<C> &&
    requires(C c, ServableModel& model, const SharedMemoryContext& shared_memory,
             InferenceRequest* request, StatusOr<InferenceResponse> result,
             std::span<const SharedMemoryOutput> outputs, const Status& refusal,
             InferenceAnswer answer) {
      // A refusal before routing, counted nowhere; Ok: go on.
      { c.Check() } -> std::same_as<Status>;
      // The request, for the version `model` that will run it.
      { c.Decode(model, shared_memory) } -> std::same_as<StatusOr<std::unique_ptr<InferenceRequest>>>;
      // The front end's own fields of the decoded request (scheduling fields, deadline, names);
      // also where it keeps what its encoding will need of the request.
      { c.Prepare(model, request) } -> std::same_as<Status>;
      // The answer to a refusal, and to the model's result; Send then sends it.
      { c.Refuse(refusal) } -> std::same_as<InferenceOutcome>;
      { c.Encode(std::move(result), outputs) } -> std::same_as<InferenceOutcome>;
      { c.Send(std::move(answer)) };
    };

// Every observer of the flow sees these, in this order: Routed (at most once), HandedOff (at
// most once, the request about to go to the model), Ran (the model answered; not for a
// refusal), Finished (exactly once).
class InferenceObserver {
 public:
  virtual void Routed(const ServableModel& model) = 0;
  virtual void HandedOff(InferenceRequest* request, SteadyTime at) = 0;
  virtual void Ran(SteadyTime at) = 0;
  // `timing` null for a refusal.
  virtual void Finished(std::string_view request_id, const InferenceOutcome& outcome,
                        const InferenceFlowTiming* timing, SteadyTime at) = 0;

 protected:
  ~InferenceObserver() = default;
};

// The access line of one inference, for AccessLog::Write once it is answered. Made only when the
// access log is on.
class InferenceAccessLine final : public InferenceObserver {
 public:
  InferenceAccessLine(AccessLog* log, const InferenceCall& call);

  void Routed(const ServableModel& model) override;
  void HandedOff(InferenceRequest* request, SteadyTime at) override;  // the input shapes
  void Ran(SteadyTime) override {}
  void Finished(std::string_view request_id, const InferenceOutcome& outcome,
                const InferenceFlowTiming* timing, SteadyTime at) override;

 private:
  AccessLog* log_;
  std::string_view protocol_;  // a literal
  HttpVersion http_version_;
  std::string_view tls_version_;  // static (OpenSSL's name)
  std::string method_, target_, key_id_, model_;
  int64_t model_version_ = 0;
  std::string input_shapes_json_;
  uint64_t request_bytes_ = 0;
};

// A traced inference's stages: the version, the server span handed to the model, the decode,
// the batch's end, the encode and the outcome. Made only for a traced request.
class InferenceTraceStages final : public InferenceObserver {
 public:
  explicit InferenceTraceStages(std::shared_ptr<TracedRequest> trace) : trace_(std::move(trace)) {}

  void Routed(const ServableModel& model) override;
  void HandedOff(InferenceRequest* request, SteadyTime at) override;
  void Ran(SteadyTime at) override;
  void Finished(std::string_view request_id, const InferenceOutcome& outcome,
                const InferenceFlowTiming* timing, SteadyTime at) override;

  std::shared_ptr<TracedRequest> Release() { return std::move(trace_); }

 private:
  std::shared_ptr<TracedRequest> trace_;
};

// The observers of one call, each present only when on. Adding an observer is adding it here.
class InferenceObservers {
 public:
  InferenceObservers(AccessLog* log, InferenceCall* call);

  void Routed(const ServableModel& model);
  void HandedOff(InferenceRequest* request, SteadyTime at);
  void Ran(SteadyTime at);
  void Finished(std::string_view request_id, const InferenceOutcome& outcome,
                const InferenceFlowTiming* timing, SteadyTime at);
  std::shared_ptr<TracedRequest> ReleaseTrace();

 private:
  std::optional<InferenceAccessLine> access_line_;
  std::optional<InferenceTraceStages> trace_;
};

// [{"name":..,"datatype":..,"shape":[..]},..] of decoded inputs: the access line's
// input_shapes_json.
std::string InputShapesJson(const std::vector<Tensor>& inputs);

uint64_t ElapsedNs(SteadyTime from, SteadyTime to);  // 0 when `to` is not after `from`

class InferenceFlow {
 public:
  struct Options {
    // Not owned; must outlive the flow and every call in flight. Null: no access log.
    AccessLog* access_log = nullptr;
    // Not owned, as above. Null: shared memory is off (a tensor naming a region is refused).
    const SharedMemoryRegistry* shared_memory = nullptr;
    // Which inferences may run on the thread that received them (InferenceRequest::
    // allow_inline; `--inline-execution`; docs/scheduling.md).
    InlinePolicy inline_execution = InlinePolicy::kSoleRequester;
  };

  // `models` is not owned and must outlive the flow and every call in flight.
  InferenceFlow(ModelManager* models, Options options)
      : models_(models), options_(std::move(options)) {}

  // Runs one call (the steps above). The codec's Send is called exactly once: on this thread
  // for a refusal, else on the thread of the model's callback. The codec (an rvalue: it is moved
  // once, into the call's pooled state, rather than into a parameter first) may hold a response
  // and the request's selection, hundreds of bytes.
  template <InferenceCodec Codec>
  requires(!std::is_reference_v<Codec>) void Run(InferenceCall call, Codec&& codec) const;

 private:
  // The routed version, or the refusal's status (already counted).
  StatusOr<std::shared_ptr<ServableModel>> RouteCall(const InferenceCall& call) const;

  ModelManager* const models_;
  const Options options_;
};

// What the model's callback answers with: the flow's state and the codec. Made with `new` from a
// pool of its own (ClassPool, one per codec type, at most 256 free blocks kept like the other
// pools of issue 10, core/block_pool.h), so that in a steady state it costs no allocation;
// the callback holds only a pointer to it (trivially copyable and 8 bytes: std::function keeps
// it inline). Ownership: the callback's one call (ServableModel::Infer calls `done` exactly once)
// completes it and deletes it.
template <InferenceCodec Codec>
struct InferenceInFlight {
  static void* operator new(std::size_t size) {
    return ClassPool<InferenceInFlight>().Allocate(size);
  }
  static void operator delete(void* p, std::size_t size) noexcept {
    ClassPool<InferenceInFlight>().Free(p, size);
  }

  Codec codec;
  InferenceObservers observers;
  std::vector<SharedMemoryOutput> shared_memory_outputs;
  std::string request_id;
  SteadyTime received_at;

  void Complete(StatusOr<InferenceResponse> result) {
    const SteadyTime encode_start = std::chrono::steady_clock::now();
    observers.Ran(encode_start);
    InferenceAnswer answer;
    answer.completed = true;
    if (result.ok()) answer.timing.timing = result->timing;
    InferenceOutcome outcome = codec.Encode(std::move(result), shared_memory_outputs);
    shared_memory_outputs.clear();  // the regions are written: unpin them now
    const SteadyTime encoded = std::chrono::steady_clock::now();
    answer.timing.output_ns = ElapsedNs(encode_start, encoded);
    answer.timing.total_ns = ElapsedNs(received_at, encoded);
    observers.Finished(request_id, outcome, &answer.timing, encoded);
    answer.request_id = std::move(request_id);
    answer.trace = observers.ReleaseTrace();
    codec.Send(std::move(answer));
  }
};

template <InferenceCodec Codec>
requires(!std::is_reference_v<Codec>) void InferenceFlow::Run(InferenceCall call,
                                                              Codec&& codec) const {
  InferenceObservers observers(options_.access_log, &call);
  std::shared_ptr<ServableModel> model;
  auto refuse = [&](const Status& s) {
    if (model != nullptr) model->RecordFailure(s.code(), call.received_at);
    const InferenceOutcome outcome = codec.Refuse(s);
    observers.Finished(call.request_id, outcome, nullptr, std::chrono::steady_clock::now());
    InferenceAnswer answer;
    answer.request_id = std::move(call.request_id);
    answer.trace = observers.ReleaseTrace();
    codec.Send(std::move(answer));
  };
  if (Status s = codec.Check(); !s.ok()) return refuse(s);
  // The model first: an unknown model is answered without decoding a large body.
  StatusOr<std::shared_ptr<ServableModel>> routed = RouteCall(call);
  if (!routed.ok()) return refuse(routed.status());
  model = std::move(routed).value();
  observers.Routed(*model);

  const SharedMemoryContext shared_memory{options_.shared_memory, model->name()};
  StatusOr<std::unique_ptr<InferenceRequest>> decoded = codec.Decode(*model, shared_memory);
  if (!decoded.ok()) return refuse(decoded.status());
  std::unique_ptr<InferenceRequest> request = std::move(decoded).value();
  // Pinned until the response is encoded into them, whatever unregisters them meanwhile.
  StatusOr<std::vector<SharedMemoryOutput>> outputs =
      ResolveSharedMemoryOutputs(shared_memory, request->outputs);
  if (!outputs.ok()) return refuse(outputs.status());
  request->received_at = call.received_at;
  request->cancellation = std::move(call.cancellation);
  request->allow_inline = AllowsInline(options_.inline_execution, call.sole_requester);
  if (Status s = codec.Prepare(*model, request.get()); !s.ok()) return refuse(s);
  observers.HandedOff(request.get(), std::chrono::steady_clock::now());

  auto* in_flight =
      new InferenceInFlight<Codec>{std::move(codec), std::move(observers),
                                   std::move(outputs).value(), std::move(call.request_id),
                                   call.received_at};
  model->Infer(std::move(request), [in_flight](StatusOr<InferenceResponse> result) {
    const std::unique_ptr<InferenceInFlight<Codec>> done(in_flight);
    done->Complete(std::move(result));
  });
}

}  // namespace harrier
