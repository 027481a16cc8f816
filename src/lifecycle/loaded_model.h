// LoadedModel: one ready model version — its I/O, completed config, scheduler and statistics.
// The ServableModel the handlers get from ModelRepositoryManager::Get().
//
// Infer() validates a request on the calling thread and submits it to the version's
// ModelScheduler (src/scheduler/), which queues, batches and runs it on the instances' worker
// threads (or, for a short model with nothing queued, on the calling thread: inline
// execution); the scheduler's completions build the response, call the request's callback and
// record statistics.
//
// A version of a model that generates text (a GGUF model, docs/generation.md) has a
// GenerativeModel instead of instances and a scheduler: generative() returns it and Infer()
// refuses, pointing at the generation endpoints.
//
// Thread safety: Infer() from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harrier/clock.h"
#include "harrier/generation.h"
#include "harrier/model_manager.h"
#include "lifecycle/model_io.h"
#include "lifecycle/model_stats.h"
#include "routing/traffic_controller.h"
#include "scheduler/admission_controller.h"
#include "scheduler/batching_policy.h"
#include "scheduler/model_scheduler.h"

namespace harrier {

class LoadedModel : public ServableModel {
 public:
  struct Options {
    std::string name;
    int64_t version = 0;
    ModelIO io;
    std::string config_json;       // the completed config, as GET .../config returns it
    BatchingPolicy policy;         // from dynamic_batching (defaults: one request per execution)
    const Clock* clock = nullptr;  // null: SteadyClock()
    // Admission control for this version (AdmissionController::ForModel); null: admit
    // everything. Outlives the scheduler (options_ is destroyed after scheduler_).
    std::unique_ptr<ModelAdmission> admission;
    // CPUs for the instances' worker threads (ModelScheduler::Options::worker_cpus).
    std::vector<int> worker_cpus;
    // ModelScheduler::Options::inline_execution_max_us (--inline-execution-max-us); 0 = off.
    uint64_t inline_execution_max_us = 0;
    // The model's traffic controller (routing/traffic_controller.h), told of every finished
    // request while it has a policy; null: nobody.
    std::shared_ptr<TrafficController> traffic;
    // A model that generates text: its engine, in place of instances (Create gets none).
    std::shared_ptr<GenerativeModel> generator;
    // The statistics and metrics to count into. A reload of a serving version passes the ones of
    // the version it replaces (stats()), so that its counters and histograms go on across the
    // swap, the requests the old one still answers included: a reset counter under the same
    // labels is a loss Prometheus cannot always see (probe 41). Null, or ones made for another
    // max_batch_size: new ones.
    std::shared_ptr<ModelStats> stats;
  };

  // Builds the scheduler over `instances` (kInvalidArgument when there are none), or, with
  // options.generator, no scheduler (kInvalidArgument when there are instances too).
  static StatusOr<std::shared_ptr<LoadedModel>> Create(
      Options options, std::vector<std::unique_ptr<ModelInstance>> instances);
  ~LoadedModel() override;

  const std::string& name() const override { return options_.name; }
  int64_t version() const override { return options_.version; }
  // "model 'm' version N": how reasons and logs name this version.
  std::string label() const;
  int64_t max_batch_size() const override { return options_.io.max_batch_size; }
  std::shared_ptr<const std::vector<std::string>> ClassificationLabels(
      std::string_view output) const override {
    const auto it = options_.io.labels.find(output);
    return it == options_.io.labels.end() ? nullptr : it->second;
  }
  std::string ConfigJson() const override { return options_.config_json; }
  // Errors through `done`: kInvalidArgument (validation, on the calling thread), and the
  // scheduler's: kResourceExhausted, kDeadlineExceeded, kCancelled, kUnavailable, kInternal.
  void Infer(std::unique_ptr<InferenceRequest> request, InferCallback done) override;
  // A traffic policy's shadow copy of a request another version answers (ShadowedModel): as
  // Infer(), but outside admission control — it takes no server in-flight slot, no overload
  // slot and no rate-limit token, so shadow traffic never makes a client's request refused.
  // When the server has no in-flight slot to spare it is shed instead: kResourceExhausted
  // through `done`, not counted in the version's statistics.
  void InferShadowCopy(std::unique_ptr<InferenceRequest> request, InferCallback done);
  // ModelAdmission::Peek: nothing taken. With priority levels more urgent than the default
  // (which Infer() exempts from overload protection) the overload part is skipped.
  Status CheckAdmission(std::string_view client_id) const override;
  void RecordFailure(StatusCode code, Clock::time_point received_at) override;
  // The engine, every generation through admission control (a ticket held until it ends; overload
  // protection is off for generators, whose waiting room is the engine's own bound), at its
  // priority level (from `policy`), and timed into this version's statistics and metrics.
  GenerativeModel* generative() override { return metered_.get(); }

  const ModelIO& io() const { return options_.io; }
  const BatchingPolicy& batching_policy() const { return options_.policy; }
  // Not for a generator (which has no scheduler).
  ModelScheduler& scheduler() { return *scheduler_; }
  // Requests waiting to run: the scheduler's queue, or the generations waiting for a slot.
  uint64_t queue_depth() const;
  void SnapshotStats(ModelVersionStats* out) const;
  // The version's admission control; null when it admits everything.
  const ModelAdmission* admission() const { return options_.admission.get(); }
  // The version's Prometheus histograms and counters (recorded by its ModelStats).
  const ModelMetrics& metrics() const { return stats_->metrics(); }
  // The statistics it counts into, for the version that replaces it (Options::stats).
  const std::shared_ptr<ModelStats>& stats() const { return stats_; }

  // A generative version's waiting generations, which never started, end with `why`, and new
  // ones are refused with it (GenerativeModel::EndWaiting); the running ones go on. A tensor
  // model's queued requests are not touched: they run in their turn. For an unload.
  void EndWaitingGenerations(const Status& why);
  // A generative version's generations, running and waiting, end with `why`, and new ones are
  // refused with it (its engine shuts down: GenerativeModel::Shutdown); a tensor model's
  // requests are not touched. For the server's stop, before its transports give up on the
  // streams (App::Stop).
  void EndGenerations(const Status& why);

  // Stops accepting requests, finishes queued and running ones. Idempotent. A generation still
  // running is ended with `why` (GenerativeModel::Shutdown): the server's reason, which its
  // client sees (the first overload says the version is shutting down).
  void Shutdown();
  void Shutdown(const Status& why);

 private:
  explicit LoadedModel(Options options);
  // Validates and submits an admitted request (or a shadow copy, with an empty ticket);
  // `validate_start`: when Infer() began, the start of compute_input.
  void Submit(std::unique_ptr<InferenceRequest> request, InferCallback done, AdmissionTicket ticket,
              Clock::time_point validate_start);
  void OnComplete(std::unique_ptr<ScheduledRequest> r, StatusOr<std::vector<Tensor>> result,
                  const RequestTiming& timing);

  // Constant after construction.
  const Options options_;
  const Clock* const clock_;
  std::unique_ptr<ModelScheduler> scheduler_;  // set by Create(); null for a generator
  std::unique_ptr<GenerativeModel> metered_;   // set by Create() for a generator
  // Every output's name, in the model's order: what a request that asks for all of them computes
  // (ScheduledRequest::all_outputs points here). Filled by the constructor.
  std::vector<std::string> all_output_names_;

  const std::shared_ptr<ModelStats> stats_;  // never null
};

}  // namespace harrier
