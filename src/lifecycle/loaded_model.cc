#include "lifecycle/loaded_model.h"

#include <chrono>

namespace harrier {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t Ns(Clock::time_point from, Clock::time_point to) {
  return to > from ? std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count() : 0;
}

}  // namespace

LoadedModel::LoadedModel(Options options, std::unique_ptr<InstancePool> pool)
    : options_(std::move(options)), pool_(std::move(pool)) {}

LoadedModel::~LoadedModel() { pool_->Shutdown(); }

void LoadedModel::SnapshotStats(ModelVersionStats* out) const {
  out->name = options_.name;
  out->version = options_.version;
  stats_.Snapshot(out);
}

void LoadedModel::Infer(std::unique_ptr<InferenceRequest> request, InferCallback done) {
  const Clock::time_point received =
      request->received_at == Clock::time_point{} ? Clock::now() : request->received_at;
  const Clock::time_point validate_start = Clock::now();
  auto output_names = std::make_shared<std::vector<std::string>>();
  if (Status s = ValidateAndPrepare(options_.io, options_.name, request.get(), output_names.get());
      !s.ok()) {
    stats_.RecordFailure(Ns(received, Clock::now()));
    done(std::move(s));
    return;
  }
  const Clock::time_point queued = Clock::now();
  const uint64_t compute_input_ns = Ns(validate_start, queued);

  // std::function needs a copyable callable: the request and callback travel in a shared_ptr.
  struct Call {
    std::unique_ptr<InferenceRequest> request;
    InferCallback done;
  };
  auto call = std::make_shared<Call>(Call{std::move(request), std::move(done)});
  Status submitted = pool_->Submit([this, call, output_names, received, queued,
                                    compute_input_ns](ModelInstance& instance) {
    const Clock::time_point start = Clock::now();
    InferenceRequest& req = *call->request;
    InferenceResponse response;
    RunContext context{req.cancellation.get()};
    Status s = instance.Run(req.inputs, *output_names, &response.outputs, context);
    const Clock::time_point ran = Clock::now();
    if (!s.ok()) {
      stats_.RecordFailure(Ns(received, ran));
      call->done(s.WithContext("model '" + options_.name + "' version " +
                               std::to_string(options_.version)));
      return;
    }
    response.model_name = options_.name;
    response.model_version = options_.version;
    response.id = req.id;
    // The callback encodes the response (compute_output) and hands it to the connection.
    call->done(std::move(response));
    const Clock::time_point finished = Clock::now();
    ModelStats::Durations d;
    d.queue_ns = Ns(queued, start);
    d.compute_input_ns = compute_input_ns;
    d.compute_infer_ns = Ns(start, ran);
    d.compute_output_ns = Ns(ran, finished);
    d.total_ns = Ns(received, finished);
    int64_t batch = 1;
    if (options_.io.max_batch_size > 0 && !req.inputs.empty() && !req.inputs[0].shape.empty())
      batch = req.inputs[0].shape[0];
    stats_.RecordSuccess(d, batch);
  });
  if (!submitted.ok()) {
    stats_.RecordFailure(Ns(received, Clock::now()));
    call->done(std::move(submitted));
  }
}

}  // namespace harrier
