#include "lifecycle/loaded_model.h"

#include <chrono>

namespace harrier {
namespace {

uint64_t Ns(Clock::time_point from, Clock::time_point to) {
  return to > from ? std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count() : 0;
}

}  // namespace

StatusOr<std::shared_ptr<LoadedModel>> LoadedModel::Create(
    Options options, std::vector<std::unique_ptr<ModelInstance>> instances) {
  std::shared_ptr<LoadedModel> model(new LoadedModel(std::move(options)));
  ModelScheduler::Options scheduler_options;
  scheduler_options.name = model->options_.name + ":" + std::to_string(model->options_.version);
  scheduler_options.policy = model->options_.policy;
  scheduler_options.clock = model->clock_;
  scheduler_options.worker_cpus = model->options_.worker_cpus;
  LoadedModel* self = model.get();  // the scheduler is joined before the model goes away
  scheduler_options.on_complete = [self](std::unique_ptr<ScheduledRequest> r,
                                         StatusOr<std::vector<Tensor>> result,
                                         const RequestTiming& timing) {
    self->OnComplete(std::move(r), std::move(result), timing);
  };
  scheduler_options.on_batch_ran = [self](const BatchTiming& b) {
    if (b.ok) self->stats_.RecordExecution(b.batch_size, b.compute_input_ns, b.compute_infer_ns);
  };
  scheduler_options.on_batch_answered = [self](const BatchTiming& b) {
    if (b.ok) self->stats_.AddBatchOutputTime(b.batch_size, b.compute_output_ns);
  };
  ASSIGN_OR_RETURN(model->scheduler_,
                   ModelScheduler::Create(std::move(instances), scheduler_options));
  return model;
}

LoadedModel::LoadedModel(Options options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : &SteadyClock()),
      stats_(options_.io.max_batch_size) {}

LoadedModel::~LoadedModel() {
  if (scheduler_) scheduler_->Shutdown();
}

void LoadedModel::SnapshotStats(ModelVersionStats* out) const {
  out->name = options_.name;
  out->version = options_.version;
  stats_.Snapshot(out);
}

void LoadedModel::Infer(std::unique_ptr<InferenceRequest> request, InferCallback done) {
  const Clock::time_point validate_start = clock_->Now();
  if (request->received_at == Clock::time_point{}) request->received_at = validate_start;
  // Admission first: the cheapest "no", before any work is spent on the request.
  AdmissionTicket ticket;
  if (options_.admission != nullptr) {
    // Priority levels count from 1 (most urgent); 0 means the default level.
    const BatchingPolicy& policy = options_.policy;
    const uint64_t default_level = policy.default_priority_level != 0
                                       ? policy.default_priority_level
                                       : policy.priority_levels;
    const bool urgent = request->priority != 0 && request->priority <= policy.priority_levels &&
                        request->priority < default_level;
    StatusOr<AdmissionTicket> admitted = options_.admission->Admit(request->client_id, urgent);
    if (!admitted.ok()) {
      stats_.RecordFailure(Ns(request->received_at, clock_->Now()));
      done(admitted.status());
      return;
    }
    ticket = std::move(admitted).value();
  }
  auto scheduled = std::make_unique<ScheduledRequest>();
  scheduled->ticket = std::move(ticket);
  if (Status s =
          ValidateAndPrepare(options_.io, options_.name, request.get(), &scheduled->output_names);
      !s.ok()) {
    stats_.RecordFailure(Ns(request->received_at, clock_->Now()));
    done(std::move(s));
    return;
  }
  scheduled->request = std::move(request);
  scheduled->done = std::move(done);
  scheduled->compute_input_ns = Ns(validate_start, clock_->Now());
  scheduler_->Submit(std::move(scheduled));
}

void LoadedModel::OnComplete(std::unique_ptr<ScheduledRequest> r,
                             StatusOr<std::vector<Tensor>> result, const RequestTiming& timing) {
  const InferenceRequest& req = *r->request;
  const Clock::time_point ran = clock_->Now();
  // Overload feedback from requests that ran or waited out their deadline in the queue; not
  // from ones refused at Submit() or cancelled (their queue time says nothing about the load).
  if (timing.executed_batch_size > 0) {
    r->ticket.OnComplete(timing.queue_ns, timing.compute_input_ns + timing.compute_infer_ns);
  } else if (!result.ok() && result.status().code() == StatusCode::kDeadlineExceeded) {
    r->ticket.OnComplete(timing.queue_ns, 0);
  }
  // The ticket is released when `r` goes away at the end of this function, after `done`.
  if (!result.ok()) {
    stats_.RecordFailure(Ns(req.received_at, ran));
    r->done(result.status().WithContext("model '" + options_.name + "' version " +
                                        std::to_string(options_.version)));
    return;
  }
  ModelStats::Durations d;
  d.queue_ns = timing.queue_ns;
  d.compute_input_ns = r->compute_input_ns + timing.compute_input_ns;
  d.compute_infer_ns = timing.compute_infer_ns;
  d.total_ns = Ns(req.received_at, ran);
  // Counted before the answer leaves, so that a client holding its answer sees it counted.
  stats_.RecordSuccess(d, r->batch_size);
  InferenceResponse response;
  response.model_name = options_.name;
  response.model_version = options_.version;
  response.id = req.id;
  response.outputs = std::move(result).value();
  // The callback encodes the response (compute_output) and hands it to the connection.
  r->done(std::move(response));
  stats_.AddOutputTime(Ns(ran, clock_->Now()));
}

}  // namespace harrier
