#include "lifecycle/loaded_model.h"

#include <algorithm>
#include <chrono>

namespace harrier {
namespace {

uint64_t Ns(Clock::time_point from, Clock::time_point to) {
  return to > from ? std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count() : 0;
}

OverloadLimiter::Run AdmissionRun(const BatchTiming& b) {
  return {b.instance, static_cast<int>(b.request_count), b.batch_size};
}

// The priority level a scheduler of `policy` gives a request asking for `requested` (1 the most
// urgent; 0 or past the levels: the default). 0 when the policy has no levels.
uint64_t PriorityLevel(const BatchingPolicy& policy, uint64_t requested) {
  if (policy.priority_levels == 0) return 0;
  const uint64_t default_level =
      policy.default_priority_level != 0 ? policy.default_priority_level : policy.priority_levels;
  return requested == 0 || requested > policy.priority_levels ? default_level : requested;
}

// Whether a request's end says its version is sick, for the circuit breaker and the rollout
// guard: an engine failure, or a timeout of the server's own (the model's queue policy). Not a
// client's bad request (an engine's kInvalidArgument included), its leaving, or a deadline it
// chose itself: a client sending a 1 us X-Request-Timeout-Us opened breakers (an outage for
// everyone) and rolled rollouts back (probe 28).
bool ServerFailure(StatusCode code, bool client_deadline) {
  return code == StatusCode::kInternal ||
         (code == StatusCode::kDeadlineExceeded && !client_deadline);
}

// Whether a request cancelled at `now` was cancelled by its deadline: a gRPC client cancels the
// call when its own clock says the deadline passed (and reports DEADLINE_EXCEEDED), and its clock
// started before the call reached the server, whose deadline is counted from the call's arrival.
// So the cancellation may come a little before the server's deadline: within 1/16 of the timeout
// (2 to 20 ms), it counts as the deadline's, as it does after it. Before, a third to a half of
// grpc-js's deadline misses were counted as cancellations (probe 41): reason `cancelled` and no
// error on the span, instead of `timeout`. Not for HTTP (InferenceRequest::
// client_cancels_at_deadline): a client that closes has gone away, whatever its reason (499).
bool CancelledAtItsDeadline(const InferenceRequest& request, Clock::time_point now) {
  if (!request.client_cancels_at_deadline || request.deadline == Clock::time_point::max())
    return false;
  const Clock::duration timeout = request.deadline - request.received_at;
  const Clock::duration slack = std::clamp<Clock::duration>(
      timeout / 16, std::chrono::milliseconds(2), std::chrono::milliseconds(20));
  return now + slack >= request.deadline;
}

// More urgent than the default level: exempt from overload protection, ahead in the queue.
bool IsUrgent(const BatchingPolicy& policy, uint64_t requested) {
  const uint64_t level = PriorityLevel(policy, requested);
  return level != 0 && level < PriorityLevel(policy, 0);
}

// Ends `count` choices of a generation request with `code`; when they were its last, counts
// the request once in its version's figures: in flight no more, and its success (queueing until
// its first choice got a sequence, then generating) or its failure, a client that went away
// also as a cancellation, queued or running.
void EndChoices(ModelStats* stats, RequestTally& tally, int count, StatusCode code,
                Clock::time_point received, Clock::time_point now) {
  Clock::time_point started;
  if (!tally.End(count, &code, &started)) return;
  stats->RequestFinished();
  if (code == StatusCode::kOk) {
    ModelStats::Durations d;
    d.total_ns = Ns(received, now);
    d.queue_ns = started == Clock::time_point{} ? 0 : Ns(received, started);
    d.compute_infer_ns = d.total_ns - d.queue_ns;
    stats->RecordSuccess(d, 1);
    stats->AddOutputTime(0, d.total_ns);
    return;
  }
  stats->RecordFailure(Ns(received, now), code);
  if (code == StatusCode::kCancelled) {
    stats->RecordCancellation(started == Clock::time_point{} ? CancellationStage::kQueued
                                                             : CancellationStage::kRunning);
  }
}

// Times one generation (one choice of its request) for its version: time per token, the
// request's time to first token and outcome through its RequestTally, tells the traffic
// controller, gives back the admission ticket, then hands everything on.
class TimingSink final : public GenerationSink {
 public:
  TimingSink(std::shared_ptr<GenerationSink> next, ModelStats* stats,
             const LoadedModel::Options* model, const Clock* clock,
             const GenerationRequest& request, Clock::time_point received, AdmissionTicket ticket,
             std::shared_ptr<RequestTally> tally)
      : next_(std::move(next)),
        stats_(stats),
        model_(model),
        clock_(clock),
        received_(received),
        routed_by_split_(!request.version_named),
        client_deadline_(request.deadline != Clock::time_point::max()),
        ticket_(std::move(ticket)),
        tally_(std::move(tally)) {}
  void OnAccepted() override {
    accepted_ = true;
    next_->OnAccepted();
  }
  void OnStart(int prompt_tokens, int reused) override {
    tally_->Started(clock_->Now());
    stats_->RecordPromptTokens(static_cast<uint64_t>(std::max(0, prompt_tokens)),
                               static_cast<uint64_t>(std::max(0, reused)));
    next_->OnStart(prompt_tokens, reused);
  }
  void OnToken(std::string_view text, float logprob) override {
    const Clock::time_point now = clock_->Now();
    stats_->RecordGeneratedToken();  // the engine calls OnToken once per token sampled
    if (tokens_++ == 0) {
      first_ = now;
      if (tally_->FirstToken()) stats_->RecordTimeToFirstToken(Ns(received_, now));
    }
    last_ = now;
    next_->OnToken(text, logprob);
  }
  void OnTokenLogprobs(const TokenLogprobs& token) override { next_->OnTokenLogprobs(token); }
  void OnEnd(FinishReason reason, const GenerationUsage& usage, const Status& status) override {
    const Clock::time_point now = clock_->Now();
    if (tokens_ >= 2) stats_->RecordTimePerOutputToken(Ns(first_, last_) / (tokens_ - 1));
    const StatusCode code = FinishStatus(reason, status).code();
    EndChoices(stats_, *tally_, 1, code, received_, now);
    // As for tensor models (ServerFailure): engine failures and the server's own timeouts say
    // the version is sick; a client's bad request, its leaving or its own deadline do not. The
    // latency is the time to the first token, what a generation's user waits on (its whole
    // duration is the length the client asked for). A request refused before it was accepted
    // (its prompt too long) is not the version's doing. Each choice is one sample.
    if (accepted_ && model_->traffic != nullptr && model_->traffic->active()) {
      RequestOutcome outcome;
      outcome.latency = (tokens_ > 0 ? first_ : now) - received_;
      outcome.server_failure = ServerFailure(code, client_deadline_);
      outcome.routed_by_split = routed_by_split_;
      model_->traffic->Record(model_->version, outcome);
    }
    ticket_.Release();  // before the answer goes out: a client that sends the next at once fits
    next_->OnEnd(reason, usage, status);
  }

 private:
  const std::shared_ptr<GenerationSink> next_;
  ModelStats* const stats_;
  const LoadedModel::Options* const model_;
  const Clock* const clock_;
  const Clock::time_point received_;
  const bool routed_by_split_;  // the client did not name the version
  const bool client_deadline_;  // the request carries a deadline of the client's
  AdmissionTicket ticket_;      // the engine's thread only, after construction
  const std::shared_ptr<RequestTally> tally_;
  uint64_t tokens_ = 0;     // the engine's thread only
  bool accepted_ = false;   // the engine's threads, one after the other
  Clock::time_point first_, last_;
};

// What generative() hands out: the engine, every generation admitted (admission control, as
// for any request), given its priority level, and timed through a TimingSink.
class MeteredGenerator final : public GenerativeModel {
 public:
  MeteredGenerator(const LoadedModel::Options* model, ModelStats* stats, const Clock* clock)
      : model_(model), stats_(stats), clock_(clock) {}
  StatusOr<ChatPrompt> ApplyChatTemplate(const std::vector<ChatMessage>& messages) override {
    return model_->generator->ApplyChatTemplate(messages);
  }
  Status Generate(GenerationRequest request, std::shared_ptr<GenerationSink> sink) override {
    const Clock::time_point received =
        request.received_at == Clock::time_point{} ? clock_->Now() : request.received_at;
    std::shared_ptr<RequestTally> tally =
        request.tally != nullptr ? request.tally : std::make_shared<RequestTally>(1);
    if (tally->Submitted()) stats_->RequestStarted();
    // A refusal ends this choice and those of the request never submitted (RequestTally).
    auto refused = [&](const Status& s) {
      EndChoices(stats_, *tally, 1 + tally->unsubmitted(), s.code(), received, clock_->Now());
      return s;
    };
    AdmissionTicket ticket;
    if (model_->admission != nullptr) {
      StatusOr<AdmissionTicket> admitted =
          model_->admission->Admit(request.client_id, IsUrgent(model_->policy, request.priority));
      if (!admitted.ok()) return refused(admitted.status());
      ticket = std::move(admitted).value();
    }
    request.priority = PriorityLevel(model_->policy, request.priority);
    // The ticket travels with the sink; a refusal below destroys both, which gives it back.
    auto timing = std::make_shared<TimingSink>(std::move(sink), stats_, model_, clock_, request,
                                               received, std::move(ticket), tally);
    Status s = model_->generator->Generate(std::move(request), std::move(timing));
    if (!s.ok()) return refused(s);
    return s;
  }
  int context_size() const override { return model_->generator->context_size(); }
  int max_requests() const override { return model_->generator->max_requests(); }
  GenerationStats Stats() const override { return model_->generator->Stats(); }
  void EndWaiting(const Status& why) override { model_->generator->EndWaiting(why); }
  void Shutdown(const Status& why) override { model_->generator->Shutdown(why); }

 private:
  const LoadedModel::Options* const model_;
  ModelStats* const stats_;
  const Clock* const clock_;
};

}  // namespace

StatusOr<std::shared_ptr<LoadedModel>> LoadedModel::Create(
    Options options, std::vector<std::unique_ptr<ModelInstance>> instances) {
  if (options.generator) {
    if (!instances.empty())
      return InvalidArgument("a generative model version has no instances of its own");
    std::shared_ptr<LoadedModel> model(new LoadedModel(std::move(options)));
    model->metered_ =
        std::make_unique<MeteredGenerator>(&model->options_, model->stats_.get(), model->clock_);
    return model;
  }
  std::shared_ptr<LoadedModel> model(new LoadedModel(std::move(options)));
  ModelScheduler::Options scheduler_options;
  scheduler_options.name = model->options_.name + ":" + std::to_string(model->options_.version);
  scheduler_options.policy = model->options_.policy;
  scheduler_options.clock = model->clock_;
  scheduler_options.worker_cpus = model->options_.worker_cpus;
  scheduler_options.inline_execution_max_us = model->options_.inline_execution_max_us;
  LoadedModel* self = model.get();  // the scheduler is joined before the model goes away
  scheduler_options.on_complete = [self](std::unique_ptr<ScheduledRequest> r,
                                         StatusOr<std::vector<Tensor>> result,
                                         const RequestTiming& timing) {
    self->OnComplete(std::move(r), std::move(result), timing);
  };
  scheduler_options.on_batch_ran = [self](const BatchTiming& b) {
    if (b.ok) self->stats_->RecordExecution(b.batch_size, b.compute_input_ns, b.compute_infer_ns);
    // Before the answers release their tickets: until then the finished requests still count
    // as queued, which errs towards refusing, never towards a longer wait than predicted.
    if (self->options_.admission != nullptr) {
      const std::chrono::nanoseconds service(b.compute_input_ns + b.compute_infer_ns);
      self->options_.admission->RunFinished(AdmissionRun(b), b.ok ? service : service.zero(),
                                            service);
    }
  };
  scheduler_options.on_batch_answered = [self](const BatchTiming& b) {
    if (b.ok) self->stats_->AddBatchOutputTime(b.batch_size, b.compute_output_ns);
  };
  // Overload protection predicts a newcomer's queue delay from the runs in progress.
  scheduler_options.on_batch_start = [self](const BatchTiming& b) {
    if (self->options_.admission != nullptr) self->options_.admission->RunStarted(AdmissionRun(b));
  };
  ASSIGN_OR_RETURN(model->scheduler_,
                   ModelScheduler::Create(std::move(instances), scheduler_options));
  return model;
}

LoadedModel::LoadedModel(Options options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : &SteadyClock()),
      stats_(options_.stats != nullptr &&
                     options_.stats->max_batch_size() == options_.io.max_batch_size
                 ? options_.stats
                 : std::make_shared<ModelStats>(options_.io.max_batch_size)) {
  for (const IoSpec& o : options_.io.outputs) all_output_names_.push_back(o.name);
}

LoadedModel::~LoadedModel() {
  Shutdown();
}

std::string LoadedModel::label() const {
  return "model '" + name() + "' version " + std::to_string(version());
}

void LoadedModel::Shutdown() {
  Shutdown(Unavailable(label() + " is shutting down"));
}

void LoadedModel::EndWaitingGenerations(const Status& why) {
  if (options_.generator) options_.generator->EndWaiting(why);
}

void LoadedModel::EndGenerations(const Status& why) {
  if (options_.generator) options_.generator->Shutdown(why);
}

void LoadedModel::Shutdown(const Status& why) {
  if (scheduler_) scheduler_->Shutdown();
  if (options_.generator) options_.generator->Shutdown(why);
}

uint64_t LoadedModel::queue_depth() const {
  if (options_.generator)
    return static_cast<uint64_t>(std::max(0, options_.generator->Stats().waiting_requests));
  return scheduler_->queue_depth();
}

void LoadedModel::SnapshotStats(ModelVersionStats* out) const {
  out->name = options_.name;
  out->version = options_.version;
  stats_->Snapshot(out);
}

void LoadedModel::RecordFailure(StatusCode code, Clock::time_point received_at) {
  stats_->RecordFailure(Ns(received_at, clock_->Now()), code);
}

Status LoadedModel::CheckAdmission(std::string_view client_id) const {
  if (options_.admission == nullptr) return Status::Ok();
  // The priority is in the body: when a request could be more urgent than the default level
  // (and so exempt from overload protection in Infer()), only the other limits are checked.
  const bool may_be_urgent = PriorityLevel(options_.policy, 0) > 1;
  return options_.admission->Peek(client_id, /*check_overload=*/!may_be_urgent);
}

void LoadedModel::Infer(std::unique_ptr<InferenceRequest> request, InferCallback done) {
  const Clock::time_point validate_start = clock_->Now();
  if (request->received_at == Clock::time_point{}) request->received_at = validate_start;
  // Admission first: the cheapest "no", before any work is spent on the request.
  AdmissionTicket ticket;
  if (scheduler_ && options_.admission != nullptr) {
    StatusOr<AdmissionTicket> admitted =
        options_.admission->Admit(request->client_id, IsUrgent(options_.policy, request->priority));
    if (!admitted.ok()) {
      stats_->RecordFailure(Ns(request->received_at, clock_->Now()), admitted.status().code());
      done(admitted.status());
      return;
    }
    ticket = std::move(admitted).value();
  }
  Submit(std::move(request), std::move(done), std::move(ticket), validate_start);
}

void LoadedModel::InferShadowCopy(std::unique_ptr<InferenceRequest> request, InferCallback done) {
  const Clock::time_point validate_start = clock_->Now();
  if (request->received_at == Clock::time_point{}) request->received_at = validate_start;
  // No ticket: a copy takes no in-flight slot, no overload slot and no rate-limit token, so it
  // never refuses a client's request. It only uses spare capacity: none spare, it is shed (not a
  // failure of the version, not in its statistics).
  if (options_.admission != nullptr && !options_.admission->ServerHasSpareInflight()) {
    done(ResourceExhausted("shadow copy shed: the server's in-flight limit is reached"));
    return;
  }
  Submit(std::move(request), std::move(done), AdmissionTicket(), validate_start);
}

void LoadedModel::Submit(std::unique_ptr<InferenceRequest> request, InferCallback done,
                         AdmissionTicket ticket, Clock::time_point validate_start) {
  if (!scheduler_) {
    stats_->RecordFailure(Ns(request->received_at, clock_->Now()), StatusCode::kInvalidArgument);
    done(InvalidArgument("model '" + options_.name +
                         "' generates text and takes no tensors: use POST /v1/chat/completions, "
                         "POST /v1/completions or POST /v2/models/" +
                         options_.name + "/generate"));
    return;
  }
  auto scheduled = std::make_unique<ScheduledRequest>();
  scheduled->ticket = std::move(ticket);
  if (Status s = ValidateAndPrepare(options_.io, options_.name, request.get(),
                                    &scheduled->output_names, AllOutputs::kLeftEmpty);
      !s.ok()) {
    stats_->RecordFailure(Ns(request->received_at, clock_->Now()), s.code());
    done(std::move(s));
    return;
  }
  if (request->outputs.empty()) scheduled->all_outputs = &all_output_names_;
  scheduled->request = std::move(request);
  scheduled->done = std::move(done);
  scheduled->compute_input_ns = Ns(validate_start, clock_->Now());
  stats_->RequestStarted();  // RequestFinished() in OnComplete, which every Submit() reaches
  scheduler_->Submit(std::move(scheduled));
}

void LoadedModel::OnComplete(std::unique_ptr<ScheduledRequest> r,
                             StatusOr<std::vector<Tensor>> result, const RequestTiming& timing) {
  const InferenceRequest& req = *r->request;
  const Clock::time_point ran = clock_->Now();
  stats_->RequestFinished();
  // Overload feedback from requests that ran or waited out their deadline in the queue; not
  // from ones refused at Submit() or cancelled (their queue time says nothing about the load).
  if (timing.executed_batch_size > 0) {
    r->ticket.OnComplete(timing.queue_ns, timing.compute_input_ns + timing.compute_infer_ns);
  } else if (!result.ok() && result.status().code() == StatusCode::kDeadlineExceeded) {
    r->ticket.OnComplete(timing.queue_ns, 0);
  }
  // Released here, before `done` hands the answer on: a client that sends its next request the
  // moment it has its answer must find its in-flight slot free (as a generation's ticket is
  // released before its end goes out).
  r->ticket.Release();
  if (!result.ok() && result.status().code() == StatusCode::kCancelled &&
      CancelledAtItsDeadline(req, ran)) {
    result = DeadlineExceeded(timing.executed_batch_size > 0
                                  ? "the call's deadline passed while it ran (its client "
                                    "cancelled it then)"
                                  : "the call's deadline passed while it was queued");
  }
  if (result.ok()) {
    if (Status presented = PresentOutputs(options_.io, options_.name, &*result); !presented.ok())
      result = std::move(presented);
  }
  if (options_.traffic != nullptr && options_.traffic->active()) {
    // The breaker and the guard count what says the version is sick (ServerFailure). A deadline
    // or a `timeout` parameter is the client's. A request that names its version (the URL's,
    // X-Harrier-Model-Version through ForcedVersionModel, a shadow copy) was not sent by the
    // split: not the rollout's traffic.
    const StatusCode code = result.ok() ? StatusCode::kOk : result.status().code();
    RequestOutcome outcome;
    outcome.latency = ran - req.received_at;
    outcome.server_failure =
        ServerFailure(code, req.deadline != Clock::time_point::max() || req.timeout_us != 0);
    outcome.routed_by_split = !req.model_version.has_value();
    options_.traffic->Record(options_.version, outcome);
  }
  if (!result.ok()) {
    stats_->RecordFailure(Ns(req.received_at, ran), result.status().code());
    if (result.status().code() == StatusCode::kCancelled) {
      stats_->RecordCancellation(timing.executed_batch_size > 0 ? CancellationStage::kRunning
                                                                : CancellationStage::kQueued);
    }
    r->done(result.status().WithContext(label()));
    return;
  }
  ModelStats::Durations d;
  d.queue_ns = timing.queue_ns;
  d.compute_input_ns = r->compute_input_ns + timing.compute_input_ns;
  d.compute_infer_ns = timing.compute_infer_ns;
  d.total_ns = Ns(req.received_at, ran);
  // Counted before the answer leaves, so that a client holding its answer sees it counted.
  stats_->RecordSuccess(d, r->batch_size);
  InferenceResponse response;
  response.model_name = options_.name;
  response.model_version = options_.version;
  response.id = req.id;
  response.outputs = std::move(result).value();
  response.timing.queue_ns = d.queue_ns;
  response.timing.compute_input_ns = d.compute_input_ns;
  response.timing.compute_infer_ns = d.compute_infer_ns;
  response.timing.batch_start = timing.batch_start;
  response.timing.infer_start = timing.infer_start;
  response.timing.infer_end = timing.infer_end;
  response.timing.batch_size = timing.executed_batch_size;
  response.timing.batch_requests = timing.batch_requests;
  response.timing.batch_peers = timing.batch_peers;
  // The callback encodes the response (compute_output) and hands it to the connection.
  r->done(std::move(response));
  const Clock::time_point answered = clock_->Now();
  stats_->AddOutputTime(Ns(ran, answered), Ns(req.received_at, answered));
}

}  // namespace harrier
