#include "scheduler/model_scheduler.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>

#include "core/block_pool.h"
#include "core/thread_spawner.h"
#include "scheduler/batch_tensors.h"

namespace harrier {

void* ScheduledRequest::operator new(std::size_t size) {
  return ClassPool<ScheduledRequest>().Allocate(size);
}

void ScheduledRequest::operator delete(void* p, std::size_t size) noexcept {
  ClassPool<ScheduledRequest>().Free(p, size);
}

namespace {

uint64_t Ns(Clock::time_point from, Clock::time_point to) {
  return to > from ? std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count() : 0;
}

// Cancels a running execution once every one of its requests is cancelled: each request's
// token counts down; the last one cancels the execution's own token.
class BatchCancellation {
 public:
  explicit BatchCancellation(const std::vector<std::unique_ptr<ScheduledRequest>>& batch)
      : remaining_(batch.size()) {
    for (const auto& r : batch) {
      if (r->request->cancellation == nullptr) return;  // someone always waits: never cancel
    }
    for (const auto& r : batch) {
      CancellationToken* token = r->request->cancellation.get();
      registrations_.emplace_back(token, token->OnCancel([this] {
        if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) token_.Cancel();
      }));
    }
  }
  ~BatchCancellation() {
    for (auto& [token, id] : registrations_) token->Unregister(id);
  }
  // Null when the execution can never be cancelled.
  CancellationToken* token() { return registrations_.empty() ? nullptr : &token_; }

 private:
  CancellationToken token_;
  std::atomic<size_t> remaining_;
  std::vector<std::pair<CancellationToken*, uint64_t>> registrations_;
};

size_t InputBytes(const ScheduledRequest& r) {
  size_t bytes = 0;
  for (const Tensor& t : r.request->inputs) bytes += t.size_bytes;
  return bytes;
}

template <class T>
std::vector<std::unique_ptr<T>> MakeEach(size_t n) {
  std::vector<std::unique_ptr<T>> v;
  for (size_t i = 0; i < n; ++i) v.push_back(std::make_unique<T>());
  return v;
}

// Weight of a new sample in the inline-execution estimates (as AdaptiveDelay::kAlpha).
constexpr double kInlineAlpha = 0.2;
// A request with more input bytes than this many times the recent average per request is left to
// the workers: the estimate says nothing about it, and its measured run then updates it.
constexpr double kInlineMaxInputRatio = 2.0;
// InlineAllowance::kUncontended: a request runs inline only when no other thread has submitted
// to the version for this long (as HttpServer::Options::sole_requester_window).
constexpr std::chrono::microseconds kContention{1'000};

}  // namespace

StatusOr<std::unique_ptr<ModelScheduler>> ModelScheduler::Create(
    std::vector<std::unique_ptr<ModelInstance>> instances, const Options& options) {
  if (instances.empty()) return InvalidArgument("a model scheduler needs at least one instance");
  if (!options.on_complete) return InvalidArgument("a model scheduler needs on_complete");
  std::unique_ptr<ModelScheduler> s(new ModelScheduler(std::move(instances), options));
  for (size_t i = 0; i < s->instances_.size(); ++i) {
    // At the normal priority even when a load on a (nice +10) lifecycle thread creates it.
    StatusOr<std::thread> worker = SpawnThread([p = s.get(), i] { p->WorkerLoop(i); });
    if (!worker.ok()) {
      s->Shutdown();  // the workers made so far
      return worker.status().WithContext("the worker of instance " + std::to_string(i) + " of '" +
                                         options.name + "'");
    }
    s->workers_.push_back(std::move(worker).value());
    // Linux limits thread names to 15 characters.
    std::string thread_name = ("w" + std::to_string(i) + ":" + options.name).substr(0, 15);
    pthread_setname_np(s->workers_.back().native_handle(), thread_name.c_str());
    if (!options.worker_cpus.empty()) {
      const int cpu = options.worker_cpus[i % options.worker_cpus.size()];
      cpu_set_t set;
      CPU_ZERO(&set);
      if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
      if (cpu < 0 || cpu >= CPU_SETSIZE ||
          pthread_setaffinity_np(s->workers_.back().native_handle(), sizeof(set), &set) != 0) {
        s->Shutdown();
        return InvalidArgument("cannot pin the worker of instance " + std::to_string(i) + " of '" +
                               options.name + "' to CPU " + std::to_string(cpu));
      }
    }
  }
  StatusOr<std::thread> expiry = SpawnThread([p = s.get()] { p->ExpiryLoop(); });
  if (!expiry.ok()) {
    s->Shutdown();
    return expiry.status().WithContext("the queue timer of '" + options.name + "'");
  }
  s->expiry_thread_ = std::move(expiry).value();
  pthread_setname_np(s->expiry_thread_.native_handle(),
                     ("t:" + options.name).substr(0, 15).c_str());
  return s;
}

ModelScheduler::ModelScheduler(std::vector<std::unique_ptr<ModelInstance>> instances,
                               const Options& options)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : &SteadyClock()),
      instances_(std::move(instances)),
      scratch_(MakeEach<WorkerScratch>(instances_.size())),
      former_(options.policy),
      instance_use_(instances_.size(), InstanceUse::kIdle) {
  for (size_t i = 0; i < scratch_.size(); ++i) scratch_[i]->instance_index = i;
}

ModelScheduler::~ModelScheduler() {
  Shutdown();
}

void ModelScheduler::Complete(std::unique_ptr<ScheduledRequest> r,
                              StatusOr<std::vector<Tensor>> result, const RequestTiming& timing) {
  if (r->order == 0) {
    options_.on_complete(std::move(r), std::move(result), timing);
    return;
  }
  // std::function needs a copyable callable: the answer travels in a shared_ptr.
  struct Answer {
    std::unique_ptr<ScheduledRequest> r;
    StatusOr<std::vector<Tensor>> result;
    RequestTiming timing;
  };
  const uint64_t order = r->order;
  auto answer = std::make_shared<Answer>(Answer{std::move(r), std::move(result), timing});
  sequencer_.Deliver(order, [this, answer] {
    options_.on_complete(std::move(answer->r), std::move(answer->result), answer->timing);
  });
}

void ModelScheduler::AnswerRejected(
    std::vector<std::pair<std::unique_ptr<ScheduledRequest>, Status>>* rejected) {
  const Clock::time_point now = clock_->Now();
  for (auto& [r, status] : *rejected) {
    if (r->cancel_callback_id != 0) r->request->cancellation->Unregister(r->cancel_callback_id);
    r->cancel_callback_id = 0;
    RequestTiming timing;
    timing.queue_ns = Ns(r->enqueued_at, now);
    Complete(std::move(r), std::move(status), timing);
  }
  rejected->clear();
}

void ModelScheduler::ExpiryLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const Clock::time_point now = clock_->Now();
    auto expired = former_.Expire(now);
    if (!expired.empty()) {
      lock.unlock();
      AnswerRejected(&expired);
      lock.lock();
      continue;
    }
    expiry_wake_at_ = former_.next_expiry();
    if (expiry_wake_at_ == Clock::time_point::max()) {
      expiry_cv_.wait(lock);
    } else {
      expiry_cv_.wait_for(lock, expiry_wake_at_ - now);
    }
  }
}

void ModelScheduler::Submit(std::unique_ptr<ScheduledRequest> request) {
  request->seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t seq = request->seq;
  CancellationToken* token = request->request->cancellation.get();
  if (token != nullptr) {
    if (token->cancelled()) {
      Complete(std::move(request), Cancelled("the request was cancelled before it was queued"), {});
      return;
    }
    request->cancel_callback_id = token->OnCancel([this, seq] { CancelQueued(seq); });
  }
  Status status;
  bool wake_expiry = false;
  Wake wake = Wake::kNone;
  size_t inline_index = instances_.size();
  BatchFormer::Decision inline_decision;
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      status = Unavailable("model '" + options_.name + "' is shutting down");
    } else {
      request->order = options_.policy.preserve_ordering ? next_order_ : 0;
      const Clock::time_point now = clock_->Now();
      if (const std::thread::id me = std::this_thread::get_id(); me != last_submitter_) {
        last_submitter_ = me;
        other_submitter_at_ = now;
      }
      const ScheduledRequest& queued = *request;  // Enqueue() moves the owner
      status = former_.Enqueue(request, now);
      if (status.ok()) {
        if (options_.policy.preserve_ordering) ++next_order_;
        inline_index = ClaimInline(queued, now, &inline_decision);
        if (inline_index == instances_.size()) {
          wake_expiry = former_.next_expiry() < expiry_wake_at_;
          if (wake_expiry) expiry_wake_at_ = former_.next_expiry();
          wake = WorkersToWake();
        }
      } else {
        request->order = 0;  // refused: answered at once, outside the order
      }
    }
  }
  if (!status.ok()) {
    if (token != nullptr) token->Unregister(request->cancel_callback_id);
    request->cancel_callback_id = 0;
    Complete(std::move(request), std::move(status), {});
    return;
  }
  if (!inline_decision.rejected.empty()) AnswerRejected(&inline_decision.rejected);
  if (inline_index < instances_.size()) {
    // Answered on this thread. A cancellation from now on is seen by Execute() (the queued
    // callback finds nothing to remove), as for a request a worker has just taken.
    RunInline(inline_index, &inline_decision.batch);
    return;
  }
  WakeWorkers(wake);
  if (wake_expiry) expiry_cv_.notify_one();
  // Cancelled between OnCancel and Enqueue: the callback found nothing to remove.
  if (token != nullptr && token->cancelled()) CancelQueued(seq);
}

void ModelScheduler::CancelQueued(uint64_t seq) {
  std::unique_ptr<ScheduledRequest> r;
  Clock::time_point now;
  {
    std::lock_guard lock(mu_);
    r = former_.Remove(seq);
    now = clock_->Now();
  }
  if (r == nullptr) return;  // already running, answered, or not queued yet
  // Cancel() consumed the callback; there is nothing to unregister. (A second call from
  // Submit() finds the request gone.)
  r->cancel_callback_id = 0;
  RequestTiming timing;
  timing.queue_ns = Ns(r->enqueued_at, now);
  Complete(std::move(r), Cancelled("the request was cancelled while queued"), timing);
}

Status ModelScheduler::RunOnEachInstance(const std::function<Status(ModelInstance&)>& job) {
  // Only used before the model serves (warm-up), when nothing is queued: running on the
  // caller's thread is simplest and pins each call to its instance.
  for (const auto& instance : instances_) RETURN_IF_ERROR(job(*instance));
  return Status::Ok();
}

void ModelScheduler::Shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  expiry_cv_.notify_all();
  if (expiry_thread_.joinable()) expiry_thread_.join();
  for (auto& w : workers_)
    if (w.joinable()) w.join();
  std::unique_lock lock(mu_);
  workers_.clear();
  // An inline run uses the instances and the callbacks: the scheduler may go away only after.
  inline_done_cv_.wait(lock, [this] { return inline_running_ == 0; });
}

size_t ModelScheduler::ClaimInline(const ScheduledRequest& request, Clock::time_point now,
                                   BatchFormer::Decision* decision) {
  const size_t none = instances_.size();
  // Only with nothing else queued (so no more urgent or earlier request is passed over) and
  // a short model, measured: before the first execution, workers run.
  const InlineAllowance allowance = request.request->allow_inline;
  if (allowance == InlineAllowance::kNever ||
      (allowance == InlineAllowance::kUncontended && now - other_submitter_at_ < kContention) ||
      former_.size() != 1 || !ShortModel() ||
      static_cast<double>(InputBytes(request)) > kInlineMaxInputRatio * input_bytes_) {
    return none;
  }
  size_t index = 0;
  while (index < none && instance_use_[index] != InstanceUse::kIdle) ++index;
  if (index == none) return none;
  // The batch former decides as for a worker. A batching delay worth waiting for leaves the
  // request queued for the workers; a deadline already passed puts it in decision->rejected,
  // which Submit() answers.
  former_.NextDecision(now, /*flush=*/false, decision);
  if (decision->batch.empty()) return none;
  instance_use_[index] = InstanceUse::kInline;
  ++inline_running_;
  return index;
}

void ModelScheduler::RunInline(size_t index,
                               std::vector<std::unique_ptr<ScheduledRequest>>* batch) {
  WorkerScratch& scratch = *scratch_[index];
  BatchFormer::Decision& next = scratch.drain;
  const Clock::time_point claimed_at = clock_->Now();
  const auto budget = std::chrono::microseconds(options_.inline_execution_max_us);
  std::vector<std::unique_ptr<ScheduledRequest>>* run = batch;
  for (;;) {
    Execute(*instances_[index], run, &scratch);
    std::unique_lock lock(mu_);
    // What queued while this thread held the instance is run here too, while the model is
    // still short and this thread has held it for less than the inline budget: handing it to
    // a worker would cost the two wake-ups inline execution exists to save.
    const Clock::time_point now = clock_->Now();
    if (!stopping_ && !former_.empty() && now - claimed_at < budget && ShortModel()) {
      former_.NextDecision(now, /*flush=*/false, &next);
      if (!next.batch.empty() || !next.rejected.empty()) {
        lock.unlock();
        AnswerRejected(&next.rejected);
        run = &next.batch;  // possibly empty: Execute() then returns at once
        continue;
      }
    }
    instance_use_[index] = InstanceUse::kIdle;
    --inline_running_;
    // Notified under the lock: once Shutdown() sees no inline run, this thread no longer
    // touches the scheduler. Worker `index` may be waiting for its instance.
    if (!former_.empty() || stopping_) cv_.notify_all();
    if (inline_running_ == 0) inline_done_cv_.notify_all();
    return;
  }
}

ModelScheduler::Wake ModelScheduler::WorkersToWake() const {
  const bool any_idle = std::find(instance_use_.begin(), instance_use_.end(), InstanceUse::kIdle) !=
                        instance_use_.end();
  if (!any_idle) return Wake::kNone;
  return inline_running_ > 0 ? Wake::kAll : Wake::kOne;
}

void ModelScheduler::WakeWorkers(Wake wake) {
  if (wake == Wake::kOne) cv_.notify_one();
  if (wake == Wake::kAll) cv_.notify_all();
}

bool ModelScheduler::ShortModel() const {
  return options_.inline_execution_max_us != 0 && held_ns_ >= 0 &&
         held_ns_ <= static_cast<double>(options_.inline_execution_max_us) * 1000.0;
}

void ModelScheduler::RecordRun(size_t input_bytes, uint64_t held_ns) {
  const auto ewma = [](double* avg, double sample) {
    *avg = *avg < 0 ? sample : *avg + kInlineAlpha * (sample - *avg);
  };
  ewma(&held_ns_, static_cast<double>(held_ns));
  ewma(&input_bytes_, static_cast<double>(input_bytes));
}

size_t ModelScheduler::queue_depth() const {
  std::lock_guard lock(mu_);
  return former_.size();
}

size_t ModelScheduler::gather_buffer_bytes() const {
  size_t bytes = 0;
  for (const auto& scratch : scratch_) bytes += scratch->buffers.held_bytes();
  return bytes;
}

size_t ModelScheduler::busy_instances() const {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(std::count_if(instance_use_.begin(), instance_use_.end(),
                                           [](InstanceUse u) { return u != InstanceUse::kIdle; }));
}

void ModelScheduler::WorkerLoop(size_t index) {
  ModelInstance& instance = *instances_[index];
  WorkerScratch& scratch = *scratch_[index];  // reused across batches
  BatchFormer::Decision decision;             // likewise
  for (;;) {
    Wake wake = Wake::kNone;
    {
      std::unique_lock lock(mu_);
      if (instance_use_[index] == InstanceUse::kWorker) instance_use_[index] = InstanceUse::kIdle;
      for (;;) {
        const Clock::time_point now = clock_->Now();
        // While an inline run holds this instance, its worker takes nothing (the expiry timer
        // answers deadlines meanwhile); the inline run wakes it when it releases the instance.
        const bool held_inline = instance_use_[index] == InstanceUse::kInline;
        if (!held_inline) {
          former_.NextDecision(now, stopping_, &decision);
          if (!decision.batch.empty()) instance_use_[index] = InstanceUse::kWorker;
          if (!decision.batch.empty() || !decision.rejected.empty()) break;
        }
        if (stopping_ && former_.empty()) return;
        if (held_inline) {
          cv_.wait(lock);
        } else if (decision.wake_at == Clock::time_point::max()) {
          if (scratch.buffers.held_bytes() == 0) {
            cv_.wait(lock);
          } else if (cv_.wait_for(lock, options_.idle_buffer_release) == std::cv_status::timeout &&
                     instance_use_[index] == InstanceUse::kIdle) {
            // Idle that long: the gather buffers go. Under mu_, since an inline run, which
            // borrows this scratch, claims the instance under it.
            scratch.buffers.Release();
          }
        } else {
          cv_.wait_for(lock, decision.wake_at - now);
        }
      }
      // Another idle worker may take what this one left.
      if (!former_.empty()) wake = WorkersToWake();
    }
    WakeWorkers(wake);

    if (!decision.rejected.empty()) AnswerRejected(&decision.rejected);
    if (!decision.batch.empty()) Execute(instance, &decision.batch, &scratch);
  }
}

void ModelScheduler::Execute(ModelInstance& instance,
                             std::vector<std::unique_ptr<ScheduledRequest>>* batch,
                             WorkerScratch* scratch) {
  const Clock::time_point start = clock_->Now();
  // Out of the queue: the queued-cancellation callbacks no longer apply. A request cancelled
  // by now is answered without running.
  std::vector<std::unique_ptr<ScheduledRequest>>& members = scratch->members;
  members.clear();
  for (auto& r : *batch) {
    if (r->cancel_callback_id != 0) {
      r->request->cancellation->Unregister(r->cancel_callback_id);
      r->cancel_callback_id = 0;
    }
    if (r->request->cancellation != nullptr && r->request->cancellation->cancelled()) {
      RequestTiming timing;
      timing.queue_ns = Ns(r->enqueued_at, start);
      Complete(std::move(r), Cancelled("the request was cancelled while queued"), timing);
      continue;
    }
    members.push_back(std::move(r));
  }
  batch->clear();
  if (members.empty()) return;  // every member was cancelled: the batch is dropped
  size_t input_bytes = 0;
  for (const auto& r : members) input_bytes += InputBytes(*r);

  BatchTiming batch_timing;
  batch_timing.request_count = members.size();
  std::vector<int64_t>& item_counts = scratch->item_counts;
  item_counts.clear();
  for (const auto& r : members) {
    item_counts.push_back(r->batch_size);
    batch_timing.batch_size += r->batch_size;
  }
  batch_timing.instance = scratch->instance_index;
  if (options_.on_batch_start) options_.on_batch_start(batch_timing);

  // Inputs: a request alone runs on its own tensors; a batch is gathered once.
  std::span<const Tensor> inputs;
  Status status;
  if (members.size() == 1) {
    inputs = members[0]->request->inputs;
  } else {
    scratch->raw.clear();
    for (const auto& r : members) scratch->raw.push_back(r.get());
    status = GatherInputs(scratch->raw, &scratch->buffers, &scratch->gathered);
    inputs = scratch->gathered;
  }
  const Clock::time_point gathered_at = clock_->Now();

  std::vector<Tensor> outputs;
  if (status.ok()) {
    if (members.size() == 1) {
      // Alone: the run is cancelled with the request's own token.
      RunContext context{members[0]->request->cancellation.get()};
      status = instance.Run(inputs, members[0]->outputs_to_compute(), &outputs, context);
    } else {
      BatchCancellation cancellation(members);
      RunContext context{cancellation.token()};
      status = instance.Run(inputs, members[0]->outputs_to_compute(), &outputs, context);
    }
  }
  const Clock::time_point ran_at = clock_->Now();

  // The engine refused an input (an index out of range, ...): in a batch, whose input it was is
  // not known, so each member runs again alone and only the request that caused it gets the
  // error (probe 58: four valid requests got a fifth one's 400; Triton fails the whole batch).
  // At most one run more per member, and only after a batch of several failed that way.
  if (status.code() == StatusCode::kInvalidArgument && members.size() > 1) {
    batch_timing.ok = false;
    batch_timing.compute_input_ns = Ns(start, gathered_at);
    batch_timing.compute_infer_ns = Ns(gathered_at, ran_at);
    if (options_.on_batch_ran) options_.on_batch_ran(batch_timing);
    if (options_.on_batch_answered) options_.on_batch_answered(batch_timing);
    std::vector<std::unique_ptr<ScheduledRequest>> each = std::move(members);
    members.clear();  // Execute's own scratch again, for the runs below
    std::vector<std::unique_ptr<ScheduledRequest>> alone;
    for (auto& r : each) {
      // Its deadline may have passed while the batch ran: answered as a queued request whose
      // deadline passes is, not run (probe 60).
      if (const Clock::time_point now = clock_->Now(); now >= r->deadline) {
        RequestTiming timing;
        timing.queue_ns = Ns(r->enqueued_at, now);
        Complete(std::move(r),
                 DeadlineExceeded("the request's deadline passed before it could run again alone "
                                  "(its batch failed on another request's input)"),
                 timing);
        continue;
      }
      alone.clear();
      alone.push_back(std::move(r));
      Execute(instance, &alone, scratch);
    }
    return;
  }

  std::vector<std::vector<Tensor>>& parts = scratch->parts;
  if (status.ok() && members.size() > 1) {
    status = SplitOutputs(outputs, item_counts, &parts);
  } else if (status.ok() && options_.policy.max_batch_size > 0) {
    status = CheckBatchDim(outputs, members[0]->batch_size);  // as a batch's split checks it
  }
  RequestTiming timing;
  timing.compute_input_ns = Ns(start, gathered_at);
  timing.compute_infer_ns = Ns(gathered_at, ran_at);
  timing.executed_batch_size = batch_timing.batch_size;
  batch_timing.ok = status.ok();
  batch_timing.compute_input_ns = timing.compute_input_ns;
  batch_timing.compute_infer_ns = timing.compute_infer_ns;
  if (options_.on_batch_ran) options_.on_batch_ran(batch_timing);
  timing.batch_start = start;
  timing.infer_start = gathered_at;
  timing.infer_end = ran_at;
  timing.batch_requests = members.size();
  // Tracing: the traced members of a batch learn each other's server spans (the batch span's
  // links), in one vector built only when at least two of them are traced.
  std::shared_ptr<const std::vector<SpanContext>> peers;
  if (members.size() > 1) {
    size_t traced = 0;
    for (const auto& r : members) traced += r->request->trace.valid() ? 1 : 0;
    if (traced >= 2) {
      auto spans = std::make_shared<std::vector<SpanContext>>();
      spans->reserve(traced);
      for (const auto& r : members) {
        if (r->request->trace.valid()) spans->push_back(r->request->trace);
      }
      peers = std::move(spans);
    }
  }
  for (size_t i = 0; i < members.size(); ++i) {
    timing.queue_ns = Ns(members[i]->enqueued_at, start);
    if (peers != nullptr) {
      timing.batch_peers = members[i]->request->trace.valid() ? peers : nullptr;
    }
    if (!status.ok()) {
      Complete(std::move(members[i]), status, timing);
    } else if (members.size() == 1) {
      Complete(std::move(members[i]), std::move(outputs), timing);
    } else {
      Complete(std::move(members[i]), std::move(parts[i]), timing);
    }
  }
  members.clear();
  batch_timing.compute_output_ns = Ns(ran_at, clock_->Now());
  if (options_.on_batch_answered) options_.on_batch_answered(batch_timing);
  if (status.ok()) {
    std::lock_guard lock(mu_);
    former_.RecordExecution(batch_timing.batch_size, ran_at - gathered_at);
    RecordRun(input_bytes / batch_timing.request_count,
              Ns(start, ran_at) + batch_timing.compute_output_ns);
  }
}

}  // namespace harrier
