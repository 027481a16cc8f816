// ModelScheduler: the scheduler of one model version, between LoadedModel and its instances.
//
// Requests are queued in a BatchFormer (priority levels, queue policies, deadlines, dynamic
// batching; see batch_former.h and docs/scheduling.md) and run by one worker thread per
// instance: an idle worker asks the BatchFormer what to run, runs it on its own instance
// (gathering a batch's inputs once into reusable buffers and splitting the outputs back without
// copies), and hands every request back through Options::on_complete.
//
// Cancellation: a queued request whose token is cancelled is taken out of the queue at once
// (CancellationToken::OnCancel) and answered kCancelled without running. A running execution is
// cancelled (RunContext::cancellation) only when every request in it is cancelled.
//
// Deadlines: an idle worker wakes for the next queued deadline; while every worker is busy, a
// timer thread answers expired requests, so a deadline is honoured within the clock's
// wake-up latency even behind a long run.
//
// Shutdown(): new requests are answered kUnavailable; everything already queued still runs,
// without waiting for batches to fill; then the workers are joined and inline runs awaited.
//
// Inline execution (Options::inline_execution_max_us, docs/scheduling.md): a request submitted
// while nothing is queued, an instance is idle, the batch decision is "run now" and the model's
// recent executions took at most that long is run by the submitting thread itself,
// on the idle instance it claims, and answered there — no hand-off to a worker and back. A
// claimed instance is never run by its worker until the inline run releases it, and an inline
// run never takes an instance its worker holds. Before it releases the instance, the inline run
// also runs what queued behind it, within inline_execution_max_us of its claim. A request whose
// InlineAllowance is kUncontended runs inline only after its thread has been the only one
// submitting for 1 ms.
//
// Thread safety: Submit() and Shutdown() from any thread. All of the scheduler's locking is in
// model_scheduler.cc: one mutex guards the BatchFormer, the stopping flag and which instance is
// in use by whom (answer ordering, under preserve_ordering, is the ResponseSequencer's own lock).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "harrier/backend.h"
#include "harrier/clock.h"
#include "harrier/status.h"
#include "scheduler/batch_former.h"
#include "scheduler/batch_tensors.h"
#include "scheduler/batching_policy.h"
#include "scheduler/response_sequencer.h"
#include "scheduler/scheduled_request.h"

namespace harrier {

class ModelScheduler {
 public:
  // Called exactly once per submitted request, with its outputs (in output_names order) or the
  // reason it did not run: kDeadlineExceeded (deadline or REJECT timeout passed while queued),
  // kCancelled, kResourceExhausted (queue full), kUnavailable (shutting down), or the backend's
  // error. Runs on a worker thread, on the thread that cancelled the request, or on the
  // submitting thread (refusals at Submit(), and requests run inline). Must not block.
  using CompletionFn = std::function<void(std::unique_ptr<ScheduledRequest>,
                                          StatusOr<std::vector<Tensor>>, const RequestTiming&)>;
  // Called twice per model execution on the thread that runs it (a worker, or the submitting
  // thread for an inline run): `on_batch_ran` after the run and
  // before its requests' completions (compute_output_ns is 0), so that statistics count the
  // execution before any client has its answer; `on_batch_answered` after the completions,
  // with compute_output_ns set.
  using BatchFn = std::function<void(const BatchTiming&)>;

  struct Options {
    std::string name;  // for thread names and messages, e.g. "simple:1"
    BatchingPolicy policy;
    const Clock* clock = nullptr;  // null: SteadyClock()
    CompletionFn on_complete;      // required
    // Called on the executing thread as an execution starts (batch_size, request_count and
    // instance set; the rest 0). Every call is followed by one on_batch_ran and one
    // on_batch_answered. Optional.
    BatchFn on_batch_start;
    BatchFn on_batch_ran;       // optional
    BatchFn on_batch_answered;  // optional
    // Worker i runs pinned to CPU worker_cpus[i % size] (--cpu-affinity); empty: not pinned.
    // ONNX Runtime's own intra-op pool threads are not pinned.
    std::vector<int> worker_cpus;
    // Inline execution (--inline-execution-max-us): the longest recent execution
    // time (an EWMA of run + answer, in µs) for which Submit() may run a request on the calling
    // thread instead of waking a worker; 0 = never (the default here; the server's is 100).
    uint64_t inline_execution_max_us = 0;
    // A worker idle this long frees the buffers it gathered batches into (BatchInputBuffers),
    // so that a burst of large batches does not hold its memory after the burst. One timed
    // wake-up per idle period, and only while buffers are held. Default 10 s.
    std::chrono::milliseconds idle_buffer_release{10'000};
  };

  // kInvalidArgument when `instances` is empty, on_complete is missing, or a worker cannot be
  // pinned to its CPU (naming it). Starts one worker thread per instance.
  static StatusOr<std::unique_ptr<ModelScheduler>> Create(
      std::vector<std::unique_ptr<ModelInstance>> instances, const Options& options);

  ~ModelScheduler();  // Shutdown()
  ModelScheduler(const ModelScheduler&) = delete;
  ModelScheduler& operator=(const ModelScheduler&) = delete;

  // Queues a validated request, or runs it on the calling thread (inline execution, above);
  // every outcome is reported through on_complete.
  void Submit(std::unique_ptr<ScheduledRequest> request);

  // Runs `job` on every instance on the calling thread (warm-up, before any Submit()).
  // Returns the first error.
  Status RunOnEachInstance(const std::function<Status(ModelInstance&)>& job);

  // Stops accepting requests, runs every queued one, joins the workers and waits for inline
  // runs to finish. Idempotent.
  void Shutdown();

  size_t instance_count() const { return instances_.size(); }
  size_t queue_depth() const;
  // The bytes the workers' gather buffers hold now (batches of more than one request).
  size_t gather_buffer_bytes() const;
  // Instances running an execution now, by their worker or inline.
  size_t busy_instances() const;

 private:
  ModelScheduler(std::vector<std::unique_ptr<ModelInstance>> instances, const Options& options);
  void WorkerLoop(size_t index);
  // Answers queued requests whose deadline passes while every worker is busy.
  void ExpiryLoop();
  void AnswerRejected(std::vector<std::pair<std::unique_ptr<ScheduledRequest>, Status>>* rejected);
  // The OnCancel callback of a queued request.
  void CancelQueued(uint64_t seq);
  void Complete(std::unique_ptr<ScheduledRequest> r, StatusOr<std::vector<Tensor>> result,
                const RequestTiming& timing);
  // A worker's reusable state: input buffers and vectors whose capacity survives batches.
  struct WorkerScratch {
    size_t instance_index = 0;
    BatchInputBuffers buffers;
    std::vector<std::unique_ptr<ScheduledRequest>> members;
    std::vector<ScheduledRequest*> raw;
    std::vector<int64_t> item_counts;
    std::vector<Tensor> gathered;
    std::vector<std::vector<Tensor>> parts;
    BatchFormer::Decision drain;  // an inline run's next batch (RunInline)
  };
  // Runs one execution on `instance` and answers its requests.
  void Execute(ModelInstance& instance, std::vector<std::unique_ptr<ScheduledRequest>>* batch,
               WorkerScratch* scratch);

  // Inline execution. Who runs an instance now: nobody, its worker, or a submitting thread.
  enum class InstanceUse : uint8_t { kIdle, kWorker, kInline };
  // REQUIRES: mu_ held, `request` just enqueued. When the request may run inline, claims an
  // idle instance, takes the request out of the queue into decision->batch and returns the
  // instance's index; otherwise returns instances_.size() with the request still queued — or,
  // when its deadline has already passed, in decision->rejected for the caller to answer.
  size_t ClaimInline(const ScheduledRequest& request, Clock::time_point now,
                     BatchFormer::Decision* decision);
  // Runs a claimed instance's batch on the calling thread, then releases the instance.
  void RunInline(size_t index, std::vector<std::unique_ptr<ScheduledRequest>>* batch);
  // Whom to wake for newly queued work. Only a worker whose instance is idle can take it: a
  // busy worker looks at the queue when it finishes, and one whose instance an inline run holds
  // is woken by the release — but notify_one might pick such a worker, so with inline runs in
  // progress every worker is woken.
  enum class Wake : uint8_t { kNone, kOne, kAll };
  Wake WorkersToWake() const;  // REQUIRES: mu_ held
  void WakeWorkers(Wake wake);
  // REQUIRES: mu_ held. Feeds the execution estimates from a finished execution: the time it
  // held its instance and its requests' average input bytes. A batch counts whole — at least
  // what one of its requests alone would take — so that a model whose requests are batched
  // under load keeps a current estimate (fed by one-request runs only, one slow run could
  // stop inline execution for as long as the load lasted).
  void RecordRun(size_t input_bytes, uint64_t held_ns);
  // REQUIRES: mu_ held. The recent executions fit inline_execution_max_us (false
  // before the first, and when inline execution is off).
  bool ShortModel() const;

  // Constant after construction.
  const Options options_;
  const Clock* const clock_;
  const std::vector<std::unique_ptr<ModelInstance>> instances_;
  // Per instance, used only by whoever holds the instance (its worker or an inline run).
  const std::vector<std::unique_ptr<WorkerScratch>> scratch_;

  std::atomic<uint64_t> next_seq_{1};

  mutable std::mutex mu_;
  std::condition_variable cv_;         // workers: something to run or to decide
  std::condition_variable expiry_cv_;  // the expiry timer: an earlier expiry or stopping
  BatchFormer former_;                 // guarded by mu_
  bool stopping_ = false;              // guarded by mu_
  uint64_t next_order_ = 1;            // guarded by mu_ (preserve_ordering)
  Clock::time_point expiry_wake_at_ = Clock::time_point::max();  // guarded by mu_
  // Guarded by mu_: who runs each instance now, and how many instances inline runs hold.
  std::vector<InstanceUse> instance_use_;
  size_t inline_running_ = 0;
  std::condition_variable inline_done_cv_;  // Shutdown(): the last inline run finished
  // EWMAs over executions (weight 0.2): the time the instance was held (run and answer) and
  // the requests' average input bytes; < 0 before the first. Guarded by mu_.
  double held_ns_ = -1;
  double input_bytes_ = -1;
  // The thread that submitted last, and when a thread other than the one before it submitted
  // (InlineAllowance::kUncontended). Guarded by mu_.
  std::thread::id last_submitter_;
  Clock::time_point other_submitter_at_{};  // set by the first Submit()

  ResponseSequencer sequencer_;

  std::vector<std::thread> workers_;
  std::thread expiry_thread_;
};

}  // namespace harrier
