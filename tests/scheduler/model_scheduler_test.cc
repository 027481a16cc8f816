// The threaded part of the scheduler, with real worker threads and a controllable instance.
// Every wait is on a condition (bounded, so a bug fails instead of hanging); no sleeps. Batch
// decisions themselves are covered deterministically in batch_former_test.cc.
#include "scheduler/model_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "util/fake_clock.h"
#include "util/scheduled_request_builder.h"

namespace harrier {
namespace {

using namespace std::chrono_literals;
using testing::BatchItem;
using testing::Floats;

constexpr auto kWaitLimit = 20s;  // only reached when the scheduler is broken

// An identity instance whose runs block until the test releases them (one release per run),
// or until the run's cancellation token fires.
class Probe {
 public:
  class Instance : public ModelInstance {
   public:
    explicit Instance(Probe* probe) : probe_(probe) {}
    Status Run(std::span<const Tensor> inputs, std::span<const std::string> output_names,
               std::vector<Tensor>* outputs, const RunContext& context) override {
      // Instance exclusivity: two runs on one instance at once are recorded.
      if (running_.exchange(true)) probe_->overlapped_ = true;
      Status s = probe_->Run(inputs, output_names, outputs, context);
      running_ = false;
      return s;
    }

   private:
    Probe* probe_;
    std::atomic<bool> running_{false};
  };

  std::vector<std::unique_ptr<ModelInstance>> Instances(int n) {
    std::vector<std::unique_ptr<ModelInstance>> v;
    for (int i = 0; i < n; ++i) v.push_back(std::make_unique<Instance>(this));
    return v;
  }

  void Release(int runs = 1) {
    std::lock_guard l(mu_);
    releases_ += runs;
    cv_.notify_all();
  }
  void ReleaseAll() {
    std::lock_guard l(mu_);
    releases_ = 1 << 30;
    cv_.notify_all();
  }
  // Waits until `n` runs have started.
  void WaitStarted(size_t n) {
    std::unique_lock l(mu_);
    ASSERT_TRUE(cv_.wait_for(l, kWaitLimit, [&] { return batch_sizes_.size() >= n; }));
  }
  std::vector<int64_t> batch_sizes() {
    std::lock_guard l(mu_);
    return batch_sizes_;
  }
  // Only runs whose first input value is `value` block; the others finish at once.
  void HoldOnly(float value) {
    std::lock_guard l(mu_);
    hold_only_ = value;
  }
  CancellationToken* current_cancellation() {
    std::lock_guard l(mu_);
    return current_;
  }
  // Whether an instance ever ran two executions at once.
  bool overlapped() const { return overlapped_; }
  // Every output then has twice the rows of its input (ONNX's Concat(X, X) on axis 0): a
  // model that breaks the batch dim's contract.
  void DoubleTheRows() { double_rows_ = true; }
  // A run whose input holds `value` anywhere fails with kInvalidArgument, as an engine refuses
  // an index out of range.
  void RefuseValue(float value) {
    std::lock_guard l(mu_);
    refused_value_ = value;
  }

 private:
  Status Run(std::span<const Tensor> inputs, std::span<const std::string> output_names,
             std::vector<Tensor>* outputs, const RunContext& context) {
    uint64_t id = 0;
    if (context.cancellation != nullptr) {
      id = context.cancellation->OnCancel([this] {
        std::lock_guard l(mu_);
        cv_.notify_all();
      });
    }
    bool cancelled = false;
    {
      std::unique_lock l(mu_);
      current_ = context.cancellation;
      batch_sizes_.push_back(inputs[0].shape[0]);
      cv_.notify_all();
      float first;
      std::memcpy(&first, inputs[0].data, sizeof first);
      const bool hold = !hold_only_ || *hold_only_ == first;
      cv_.wait_for(l, kWaitLimit, [&] {
        return !hold || releases_ > 0 ||
               (context.cancellation && context.cancellation->cancelled());
      });
      cancelled = context.cancellation && context.cancellation->cancelled();
      if (!cancelled && hold) --releases_;
      current_ = nullptr;
    }
    if (context.cancellation != nullptr) context.cancellation->Unregister(id);
    if (cancelled) return Cancelled("run cancelled");
    if (std::optional<float> refused = RefusedValue(); refused.has_value()) {
      for (float v : Floats(inputs[0])) {
        if (v == *refused)
          return InvalidArgument("index " + std::to_string(v) + " is out of range");
      }
    }
    for (const std::string& name : output_names) {
      const size_t copies = double_rows_ ? 2 : 1;
      auto copy = AllocateTensorBuffer(inputs[0].size_bytes * copies);
      for (size_t c = 0; c < copies; ++c) {
        std::memcpy(copy.get() + c * inputs[0].size_bytes, inputs[0].data, inputs[0].size_bytes);
      }
      Tensor t = inputs[0];
      t.name = name;
      t.shape[0] *= static_cast<int64_t>(copies);
      t.size_bytes *= copies;
      t.data = copy.get();
      t.owner = std::move(copy);
      outputs->push_back(std::move(t));
    }
    return Status::Ok();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  int releases_ = 0;
  std::vector<int64_t> batch_sizes_;
  CancellationToken* current_ = nullptr;
  std::optional<float> hold_only_;
  std::atomic<bool> overlapped_{false};
  std::atomic<bool> double_rows_{false};
  std::optional<float> refused_value_;  // guarded by mu_

  std::optional<float> RefusedValue() {
    std::lock_guard l(mu_);
    return refused_value_;
  }
};

// Collects completions: per request, the value it carried, its status and its output.
class Completions {
 public:
  struct Result {
    StatusCode code = StatusCode::kOk;
    float input_value = 0;
    int64_t items = 0;
    std::vector<float> output;
    int64_t executed_batch_size = 0;
    // Tracing.
    SpanContext trace;
    Clock::time_point batch_start, infer_start, infer_end;
    size_t batch_requests = 0;
    std::shared_ptr<const std::vector<SpanContext>> batch_peers;
    std::thread::id thread;  // the thread that answered it
  };

  ModelScheduler::CompletionFn Fn() {
    return [this](std::unique_ptr<ScheduledRequest> r, StatusOr<std::vector<Tensor>> result,
                  const RequestTiming& timing) {
      Result res;
      res.code = result.status().code();
      res.input_value = Floats(r->request->inputs[0])[0];
      res.items = r->request->inputs[0].shape[0];
      if (result.ok()) res.output = Floats((*result)[0]);
      res.executed_batch_size = timing.executed_batch_size;
      res.trace = r->request->trace;
      res.batch_start = timing.batch_start;
      res.infer_start = timing.infer_start;
      res.infer_end = timing.infer_end;
      res.batch_requests = timing.batch_requests;
      res.batch_peers = timing.batch_peers;
      res.thread = std::this_thread::get_id();
      std::lock_guard l(mu_);
      results_.push_back(std::move(res));
      cv_.notify_all();
    };
  }
  std::vector<Result> WaitFor(size_t n) {
    std::unique_lock l(mu_);
    EXPECT_TRUE(cv_.wait_for(l, kWaitLimit, [&] { return results_.size() >= n; }));
    return results_;
  }
  size_t count() {
    std::lock_guard l(mu_);
    return results_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Result> results_;
};

class ModelSchedulerTest : public ::testing::Test {
 protected:
  std::unique_ptr<ModelScheduler> Make(BatchingPolicy policy, int instances = 1) {
    ModelScheduler::Options options;
    options.name = "m:1";
    options.policy = std::move(policy);
    options.clock = &clock_;
    options.on_complete = completions_.Fn();
    options.inline_execution_max_us = inline_max_us_;
    options.idle_buffer_release = idle_buffer_release_;
    options.on_batch_answered = [this](const BatchTiming& b) {
      std::lock_guard l(batch_mu_);
      batches_.push_back(b);
      if (made_ != nullptr) gather_bytes_after_batch_.push_back(made_->gather_buffer_bytes());
      batch_cv_.notify_all();
    };
    auto s = ModelScheduler::Create(probe_.Instances(instances), options);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    {
      std::lock_guard l(batch_mu_);
      made_ = s.ok() ? s->get() : nullptr;
    }
    return std::move(s).value();
  }
  static BatchingPolicy Batching(int64_t max_batch_size) {
    BatchingPolicy p;
    p.dynamic_batching = true;
    p.max_batch_size = max_batch_size;
    return p;
  }

  // Inline execution: one request run by a worker measures the model (the fake clock stands
  // still, so it measures 0 µs unless the test advances it during the run).
  void MeasureOnce(ModelScheduler& s, float value = 0) {
    const size_t before = completions_.count();
    s.Submit(BatchItem(value));
    ASSERT_EQ(completions_.WaitFor(before + 1).size(), before + 1);
    WaitIdle(s);
  }
  // One instance, no batching, measured short; request 1 runs inline on `*holder` and holds
  // the instance until the test releases it.
  std::unique_ptr<ModelScheduler> MakeHeldInline(std::thread* holder) {
    inline_max_us_ = 100;
    auto s = Make(BatchingPolicy{});
    probe_.Release(1);
    MeasureOnce(*s);
    probe_.HoldOnly(1);
    *holder = std::thread([p = s.get()] { p->Submit(BatchItem(1)); });
    probe_.WaitStarted(2);
    return s;
  }
  // The worker answers before it has recorded the run and released its instance.
  static void WaitIdle(const ModelScheduler& s) {
    const auto limit = std::chrono::steady_clock::now() + kWaitLimit;
    while (s.busy_instances() > 0 && std::chrono::steady_clock::now() < limit) {
      std::this_thread::yield();
    }
    ASSERT_EQ(s.busy_instances(), 0u);
  }

  uint64_t inline_max_us_ = 0;  // Make()'s Options::inline_execution_max_us
  std::chrono::milliseconds idle_buffer_release_{10'000};  // Options::idle_buffer_release
  const ModelScheduler* made_ = nullptr;                   // the last Make()'s, under batch_mu_
  std::vector<size_t> gather_bytes_after_batch_;           // seen by on_batch_answered
  testing::FakeClock clock_;
  Probe probe_;
  Completions completions_;
  std::mutex batch_mu_;
  std::condition_variable batch_cv_;
  std::vector<BatchTiming> batches_;
};

TEST_F(ModelSchedulerTest, CreateNeedsInstancesAndACompletion) {
  ModelScheduler::Options options;
  options.on_complete = completions_.Fn();
  EXPECT_EQ(ModelScheduler::Create({}, options).status().code(), StatusCode::kInvalidArgument);
  options.on_complete = nullptr;
  EXPECT_EQ(ModelScheduler::Create(probe_.Instances(1), options).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(ModelSchedulerTest, QueuedRequestsAreBatchedAndEachGetsItsOwnOutput) {
  auto s = Make(Batching(8));
  s->Submit(BatchItem(100));  // occupies the only instance while the others queue
  probe_.WaitStarted(1);
  const std::vector<std::pair<float, int64_t>> queued{{1, 1}, {2, 2}, {3, 1},
                                                      {4, 1}, {5, 2}, {6, 1}};
  for (auto [value, items] : queued) s->Submit(BatchItem(value, items));
  probe_.ReleaseAll();
  auto results = completions_.WaitFor(7);
  EXPECT_EQ(probe_.batch_sizes(), (std::vector<int64_t>{1, 8}));
  for (const auto& r : results) {
    EXPECT_EQ(r.code, StatusCode::kOk);
    EXPECT_EQ(r.output, std::vector<float>(static_cast<size_t>(r.items) * 4, r.input_value));
    EXPECT_EQ(r.executed_batch_size, r.input_value == 100 ? 1 : 8);
  }
  s->Shutdown();
  std::lock_guard l(batch_mu_);
  ASSERT_EQ(batches_.size(), 2u);
  EXPECT_EQ(batches_[1].batch_size, 8);
  EXPECT_EQ(batches_[1].request_count, 6u);
  EXPECT_TRUE(batches_[1].ok);
}

// A model with a batch dim answers each request with its own number of rows; one that does not
// fails the request whether it ran alone or in a batch (probe 58: alone, it was answered with
// twice its rows; in a batch, 500). A model without a batch dim is not checked.
TEST_F(ModelSchedulerTest, AnOutputWithoutTheRequestsRowsFailsAloneAsInABatch) {
  probe_.DoubleTheRows();
  auto s = Make(Batching(8));
  probe_.HoldOnly(100);        // only request 100's run waits for the test
  s->Submit(BatchItem(1, 2));  // alone: the instance is free
  auto alone = completions_.WaitFor(1);
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_EQ(alone[0].code, StatusCode::kInternal);
  s->Submit(BatchItem(100));  // occupies the instance while two more queue into one batch
  probe_.WaitStarted(2);
  s->Submit(BatchItem(2));
  s->Submit(BatchItem(3, 2));
  probe_.ReleaseAll();
  auto all = completions_.WaitFor(4);
  EXPECT_EQ(probe_.batch_sizes(), (std::vector<int64_t>{2, 1, 3}));
  for (const auto& r : all) EXPECT_EQ(r.code, StatusCode::kInternal) << r.input_value;
  s->Shutdown();

  auto unbatched = Make(BatchingPolicy{});
  unbatched->Submit(BatchItem(4));
  auto answered = completions_.WaitFor(5);
  ASSERT_EQ(answered.size(), 5u);
  EXPECT_EQ(answered[4].code, StatusCode::kOk);
  EXPECT_EQ(answered[4].output.size(), 8u);  // its one row, twice: not a batch dim's rows
}

// The engine refuses one member's input in a batch: each member runs again alone, so that only
// that request fails (probe 58: the whole batch got its 400).
TEST_F(ModelSchedulerTest, AnInputTheEngineRefusesFailsOnlyItsOwnRequestInABatch) {
  probe_.RefuseValue(-1);
  probe_.HoldOnly(100);
  auto s = Make(Batching(8));
  s->Submit(BatchItem(100));  // occupies the instance while three queue into one batch
  probe_.WaitStarted(1);
  s->Submit(BatchItem(2));
  s->Submit(BatchItem(-1, 2));
  s->Submit(BatchItem(3));
  probe_.ReleaseAll();
  auto results = completions_.WaitFor(4);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(probe_.batch_sizes(), (std::vector<int64_t>{1, 4, 1, 2, 1}));
  for (const auto& r : results) {
    EXPECT_EQ(r.code, r.input_value == -1 ? StatusCode::kInvalidArgument : StatusCode::kOk)
        << r.input_value;
    if (r.input_value != -1) {
      EXPECT_EQ(r.output, std::vector<float>(static_cast<size_t>(r.items) * 4, r.input_value));
    }
  }
  s->Shutdown();
  std::lock_guard l(batch_mu_);
  ASSERT_EQ(batches_.size(), 5u);  // the failed batch is reported, then each run alone
  EXPECT_FALSE(batches_[1].ok);
  EXPECT_EQ(batches_[1].request_count, 3u);
  EXPECT_TRUE(batches_[2].ok);
  EXPECT_FALSE(batches_[3].ok);
  EXPECT_TRUE(batches_[4].ok);
}

// A member whose deadline passed while its batch ran is answered 504, not run again alone
// (probe 60).
TEST_F(ModelSchedulerTest, ARerunMemberWhoseDeadlinePassedIsNotRunAgain) {
  probe_.RefuseValue(-1);
  probe_.HoldOnly(100);
  auto s = Make(Batching(8));
  s->Submit(BatchItem(100));  // occupies the instance while the batch queues
  probe_.WaitStarted(1);
  auto late = BatchItem(2);
  late->request->deadline = clock_.Now() + 1ms;
  s->Submit(std::move(late));
  s->Submit(BatchItem(-1));
  probe_.HoldOnly(2);  // the batch [2, -1] waits for the test
  probe_.Release(1);   // request 100's run
  probe_.WaitStarted(2);
  clock_.Advance(2ms);
  probe_.Release(1);
  auto results = completions_.WaitFor(3);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(probe_.batch_sizes(), (std::vector<int64_t>{1, 2, 1}));  // -1 alone; 2 not again
  for (const auto& r : results) {
    const StatusCode want = r.input_value == 100 ? StatusCode::kOk
                            : r.input_value == 2 ? StatusCode::kDeadlineExceeded
                                                 : StatusCode::kInvalidArgument;
    EXPECT_EQ(r.code, want) << r.input_value;
  }
  s->Shutdown();
}

// The buffers a batch was gathered into stay for the next batch, and go once the worker has been
// idle for Options::idle_buffer_release (probe 30: a burst's memory was held for good).
TEST_F(ModelSchedulerTest, AnIdleWorkerFreesTheBuffersItGatheredBatchesInto) {
  idle_buffer_release_ = std::chrono::milliseconds(100);
  auto s = Make(Batching(8));
  s->Submit(BatchItem(100));  // occupies the only instance while the others queue
  probe_.WaitStarted(1);
  s->Submit(BatchItem(1, 2));
  s->Submit(BatchItem(2, 2));
  probe_.ReleaseAll();
  ASSERT_EQ(completions_.WaitFor(3).size(), 3u);
  {
    std::unique_lock l(batch_mu_);
    ASSERT_TRUE(batch_cv_.wait_for(l, kWaitLimit, [&] { return batches_.size() == 2; }));
    EXPECT_EQ(gather_bytes_after_batch_[0], 0u);   // a request alone runs on its own tensors
    EXPECT_GE(gather_bytes_after_batch_[1], 64u);  // the batch of two was gathered
  }
  const auto limit = std::chrono::steady_clock::now() + kWaitLimit;
  while (s->gather_buffer_bytes() > 0 && std::chrono::steady_clock::now() < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(s->gather_buffer_bytes(), 0u);
  s->Shutdown();
}

// A traced request: its server span's ids carry `value` so the test can tell them apart.
std::unique_ptr<ScheduledRequest> TracedItem(float value) {
  auto r = BatchItem(value);
  r->request->trace.trace_id[15] = static_cast<uint8_t>(value);
  r->request->trace.span_id[7] = static_cast<uint8_t>(value);
  r->request->trace.flags = SpanContext::kSampled;
  return r;
}

TEST_F(ModelSchedulerTest, EveryMemberGetsItsBatchTimesAndTracedMembersShareTheirSpans) {
  auto s = Make(Batching(8));
  s->Submit(TracedItem(100));  // occupies the only instance while the others queue; runs alone
  probe_.WaitStarted(1);
  s->Submit(TracedItem(1));
  s->Submit(BatchItem(2));  // untraced
  s->Submit(TracedItem(3));
  s->Submit(TracedItem(4));
  const Clock::time_point second_batch = clock_.Now() + 5ms;
  clock_.Advance(5ms);  // the second batch starts later than the first
  probe_.ReleaseAll();
  auto results = completions_.WaitFor(5);
  s->Shutdown();
  std::shared_ptr<const std::vector<SpanContext>> shared;
  for (const auto& r : results) {
    SCOPED_TRACE(r.input_value);
    ASSERT_EQ(r.code, StatusCode::kOk);
    EXPECT_NE(r.batch_start, Clock::time_point{});
    EXPECT_LE(r.batch_start, r.infer_start);
    EXPECT_LE(r.infer_start, r.infer_end);
    if (r.input_value == 100) {
      EXPECT_EQ(r.batch_requests, 1u);
      EXPECT_EQ(r.batch_peers, nullptr);  // alone: nobody to link to
      EXPECT_LT(r.batch_start, second_batch);
      continue;
    }
    EXPECT_EQ(r.batch_requests, 4u);
    EXPECT_EQ(r.executed_batch_size, 4);
    EXPECT_EQ(r.batch_start, second_batch);
    if (r.input_value == 2) {
      EXPECT_EQ(r.batch_peers, nullptr);  // untraced: pays nothing
      continue;
    }
    ASSERT_NE(r.batch_peers, nullptr);
    if (shared == nullptr) shared = r.batch_peers;
    EXPECT_EQ(r.batch_peers, shared);  // one vector for the whole batch, not one per request
    std::vector<uint8_t> span_tags;
    for (const SpanContext& peer : *r.batch_peers) span_tags.push_back(peer.span_id[7]);
    EXPECT_EQ(span_tags, (std::vector<uint8_t>{1, 3, 4}));  // its own span included
  }
}

TEST_F(ModelSchedulerTest, ALoneTracedMemberOfABatchHasNoPeers) {
  auto s = Make(Batching(8));
  s->Submit(BatchItem(100));
  probe_.WaitStarted(1);
  s->Submit(TracedItem(1));
  s->Submit(BatchItem(2));
  probe_.ReleaseAll();
  auto results = completions_.WaitFor(3);
  s->Shutdown();
  for (const auto& r : results) {
    EXPECT_EQ(r.batch_peers, nullptr);
    EXPECT_EQ(r.batch_requests, r.input_value == 100 ? 1u : 2u);
  }
}

TEST_F(ModelSchedulerTest, ManyConcurrentRequestsOnSeveralInstancesAllCorrect) {
  auto s = Make(Batching(4), /*instances=*/3);
  probe_.ReleaseAll();
  constexpr int kThreads = 4, kPerThread = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i)
        s->Submit(BatchItem(static_cast<float>(t * 1000 + i), 1 + i % 2));
    });
  }
  for (auto& t : threads) t.join();
  auto results = completions_.WaitFor(kThreads * kPerThread);
  ASSERT_EQ(results.size(), static_cast<size_t>(kThreads * kPerThread));
  for (const auto& r : results) {
    ASSERT_EQ(r.code, StatusCode::kOk);
    EXPECT_EQ(r.output, std::vector<float>(static_cast<size_t>(r.items) * 4, r.input_value));
  }
}

TEST_F(ModelSchedulerTest, CancellingAQueuedRequestAnswersItAtOnceWithoutRunning) {
  auto s = Make(Batching(8));
  s->Submit(BatchItem(1));
  probe_.WaitStarted(1);
  auto token = std::make_shared<CancellationToken>();
  auto r = BatchItem(2);
  r->request->cancellation = token;
  s->Submit(std::move(r));
  EXPECT_EQ(s->queue_depth(), 1u);
  token->Cancel();  // runs the scheduler's callback on this thread
  ASSERT_EQ(completions_.count(), 1u);
  EXPECT_EQ(completions_.WaitFor(1)[0].code, StatusCode::kCancelled);
  EXPECT_EQ(s->queue_depth(), 0u);  // the slot is free
  probe_.ReleaseAll();
  completions_.WaitFor(2);
  s->Shutdown();
  EXPECT_EQ(probe_.batch_sizes(), std::vector<int64_t>{1});  // only the first ran

  // Already cancelled before Submit: answered there.
  auto s2 = Make(Batching(8));
  auto r2 = BatchItem(3);
  r2->request->cancellation = token;
  s2->Submit(std::move(r2));
  EXPECT_EQ(completions_.count(), 3u);
}

TEST_F(ModelSchedulerTest, ARunningBatchIsCancelledOnlyWhenAllItsRequestsAre) {
  auto s = Make(Batching(8));
  s->Submit(BatchItem(1));  // no token: runs until released
  probe_.WaitStarted(1);
  auto ta = std::make_shared<CancellationToken>();
  auto tb = std::make_shared<CancellationToken>();
  auto a = BatchItem(2);
  a->request->cancellation = ta;
  auto b = BatchItem(3);
  b->request->cancellation = tb;
  s->Submit(std::move(a));
  s->Submit(std::move(b));
  probe_.Release(1);  // the first run ends; a and b run as one batch and block
  probe_.WaitStarted(2);
  EXPECT_EQ(probe_.batch_sizes(), (std::vector<int64_t>{1, 2}));
  CancellationToken* batch_token = probe_.current_cancellation();
  ASSERT_NE(batch_token, nullptr);
  ta->Cancel();
  EXPECT_FALSE(batch_token->cancelled());  // b still waits for its answer
  tb->Cancel();
  auto results = completions_.WaitFor(3);
  EXPECT_EQ(results[1].code, StatusCode::kCancelled);
  EXPECT_EQ(results[2].code, StatusCode::kCancelled);
  s->Shutdown();
}

TEST_F(ModelSchedulerTest, ARunningRequestAloneIsCancelledWithItsToken) {
  auto s = Make(BatchingPolicy{});
  auto token = std::make_shared<CancellationToken>();
  auto r = BatchItem(1);
  r->request->cancellation = token;
  s->Submit(std::move(r));
  probe_.WaitStarted(1);
  token->Cancel();
  EXPECT_EQ(completions_.WaitFor(1)[0].code, StatusCode::kCancelled);
  // The instance is free for the next request.
  s->Submit(BatchItem(2));
  probe_.WaitStarted(2);
  probe_.ReleaseAll();
  EXPECT_EQ(completions_.WaitFor(2)[1].code, StatusCode::kOk);
}

TEST_F(ModelSchedulerTest, FullQueueIsRefusedOnTheSubmittingThread) {
  BatchingPolicy p;
  p.default_queue_policy.max_queue_size = 1;
  auto s = Make(p);
  s->Submit(BatchItem(1));
  probe_.WaitStarted(1);
  s->Submit(BatchItem(2));  // queued
  s->Submit(BatchItem(3));  // refused
  ASSERT_EQ(completions_.count(), 1u);
  EXPECT_EQ(completions_.WaitFor(1)[0].code, StatusCode::kUnavailable);
  EXPECT_EQ(completions_.WaitFor(1)[0].input_value, 3);
  probe_.ReleaseAll();
  completions_.WaitFor(3);
}

TEST_F(ModelSchedulerTest, TimedOutQueuedRequestNeverReachesTheModel) {
  BatchingPolicy p = Batching(8);
  p.default_queue_policy.default_timeout_us = 100;
  auto s = Make(p);
  s->Submit(BatchItem(1));
  probe_.WaitStarted(1);
  s->Submit(BatchItem(2));
  clock_.Advance(200us);  // request 2 waits past its timeout while the instance is busy
  // The expiry timer answers it while the first request still runs.
  auto results = completions_.WaitFor(1);
  EXPECT_EQ(results[0].code, StatusCode::kDeadlineExceeded);
  EXPECT_EQ(results[0].input_value, 2);
  probe_.ReleaseAll();
  results = completions_.WaitFor(2);
  EXPECT_EQ(results[1].code, StatusCode::kOk);
  s->Shutdown();
  EXPECT_EQ(probe_.batch_sizes(), std::vector<int64_t>{1});
}

TEST_F(ModelSchedulerTest, PreserveOrderingAnswersInArrivalOrderAcrossInstances) {
  BatchingPolicy p = Batching(1);
  p.preserve_ordering = true;
  auto s = Make(p, /*instances=*/2);
  probe_.HoldOnly(1);
  s->Submit(BatchItem(1));  // held on one instance
  probe_.WaitStarted(1);
  s->Submit(BatchItem(2));  // runs at once on the other
  {
    // on_batch_answered follows the batch's completions: request 2 has been answered by the
    // scheduler.
    std::unique_lock l(batch_mu_);
    ASSERT_TRUE(batch_cv_.wait_for(l, kWaitLimit, [&] { return !batches_.empty(); }));
  }
  EXPECT_EQ(completions_.count(), 0u);  // ...but it waits for request 1's answer
  probe_.ReleaseAll();
  auto results = completions_.WaitFor(2);
  EXPECT_EQ(results[0].input_value, 1);
  EXPECT_EQ(results[1].input_value, 2);
  s->Shutdown();
}

TEST_F(ModelSchedulerTest, ShutdownRunsEverythingQueuedAndRefusesNewWork) {
  BatchingPolicy p = Batching(8);
  p.max_queue_delay_us = 60'000'000;  // a batch would wait a minute; shutdown does not
  auto s = Make(p);
  for (int i = 1; i <= 5; ++i) s->Submit(BatchItem(static_cast<float>(i)));
  EXPECT_EQ(s->queue_depth(), 5u);  // waiting for the batch to fill
  std::thread stopper([&] { s->Shutdown(); });
  // Submissions are accepted until Shutdown() begins, then answered kUnavailable.
  size_t submitted = 5;
  for (;;) {
    const size_t before = completions_.count();
    s->Submit(BatchItem(99));
    ++submitted;
    if (completions_.count() > before) break;  // refused synchronously
  }
  probe_.ReleaseAll();
  stopper.join();
  auto results = completions_.WaitFor(submitted);
  ASSERT_EQ(results.size(), submitted);
  size_t ok = 0, unavailable = 0;
  for (const auto& r : results) {
    if (r.code == StatusCode::kOk) ++ok;
    if (r.code == StatusCode::kUnavailable) ++unavailable;
  }
  EXPECT_EQ(unavailable, 1u);
  EXPECT_EQ(ok, submitted - 1);  // every accepted request ran
}

// ---- Inline execution (Options::inline_execution_max_us) ----------------------------------

TEST_F(ModelSchedulerTest, InlineRunsOnTheSubmittingThreadWhenIdleQueueEmptyAndFast) {
  for (BatchingPolicy policy : {BatchingPolicy{}, Batching(8)}) {  // delay 0: nothing to gain
    SCOPED_TRACE(policy.dynamic_batching ? "batching" : "no batching");
    inline_max_us_ = 100;
    auto s = Make(policy);
    probe_.ReleaseAll();
    const size_t before = completions_.count();
    s->Submit(BatchItem(1));  // nothing measured yet: a worker runs it
    auto results = completions_.WaitFor(before + 1);
    EXPECT_NE(results.back().thread, std::this_thread::get_id());
    WaitIdle(*s);
    s->Submit(BatchItem(2));  // answered before Submit() returns, on this thread
    ASSERT_EQ(completions_.count(), before + 2);
    results = completions_.WaitFor(before + 2);
    EXPECT_EQ(results.back().code, StatusCode::kOk);
    EXPECT_EQ(results.back().output, std::vector<float>(4, 2.0f));
    EXPECT_EQ(results.back().thread, std::this_thread::get_id());
    EXPECT_EQ(results.back().executed_batch_size, 1);
    {
      std::lock_guard l(batch_mu_);  // the execution's statistics callbacks ran too
      EXPECT_EQ(batches_.size(), 2 * (1 + (policy.dynamic_batching ? 1u : 0u)));
    }
    s->Shutdown();
  }
}

TEST_F(ModelSchedulerTest, InlineIsOffWithZero) {
  auto s = Make(BatchingPolicy{});  // inline_max_us_ = 0
  probe_.ReleaseAll();
  MeasureOnce(*s, 1);
  MeasureOnce(*s, 2);
  for (const auto& r : completions_.WaitFor(2)) EXPECT_NE(r.thread, std::this_thread::get_id());
}

TEST_F(ModelSchedulerTest, NeverInlineWhenTheFrontEndDoesNotAllowIt) {
  inline_max_us_ = 100;
  auto s = Make(BatchingPolicy{});
  probe_.ReleaseAll();
  MeasureOnce(*s, 1);
  auto item = BatchItem(2);
  item->request->allow_inline = InlineAllowance::kNever;  // as a front end whose policy says no
  s->Submit(std::move(item));
  auto results = completions_.WaitFor(2);
  EXPECT_EQ(results.back().output, std::vector<float>(4, 2.0f));
  EXPECT_NE(results.back().thread, std::this_thread::get_id());
  WaitIdle(*s);
  s->Submit(BatchItem(3));  // allowed, and everything else holds: inline
  ASSERT_EQ(completions_.count(), 3u);
  EXPECT_EQ(completions_.WaitFor(3).back().thread, std::this_thread::get_id());
}

TEST_F(ModelSchedulerTest, WhatQueuesBehindAnInlineRunIsRunByTheThreadThatReleasesIt) {
  std::thread holder;
  auto s = MakeHeldInline(&holder);
  s->Submit(BatchItem(2));  // the only instance is held inline: queued, not run by its worker
  s->Submit(BatchItem(3));  // the queue is not empty: queued
  EXPECT_EQ(s->queue_depth(), 2u);
  EXPECT_EQ(probe_.batch_sizes().size(), 2u);
  EXPECT_EQ(completions_.count(), 1u);
  probe_.ReleaseAll();
  const std::thread::id holder_id = holder.get_id();
  holder.join();
  // The holder ran them before it let the instance go: no worker was woken (the fake clock
  // stands still, so the inline budget is never spent).
  ASSERT_EQ(completions_.count(), 4u);
  auto results = completions_.WaitFor(4);
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(results[i].code, StatusCode::kOk);
    EXPECT_EQ(results[i].input_value, static_cast<float>(i));  // in order
    EXPECT_EQ(results[i].thread, holder_id);
  }
  EXPECT_FALSE(probe_.overlapped());
  s->Shutdown();
}

TEST_F(ModelSchedulerTest, AnInlineRunPastItsBudgetLeavesTheQueueToTheWorker) {
  std::thread holder;
  auto s = MakeHeldInline(&holder);
  s->Submit(BatchItem(2));
  s->Submit(BatchItem(3));
  // The held run takes 200 µs: the holder has used its 100 µs, and the model's estimate (an
  // average, 40 µs now) still calls it short.
  clock_.Advance(200us);
  probe_.ReleaseAll();
  const std::thread::id holder_id = holder.get_id();
  holder.join();
  auto results = completions_.WaitFor(4);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[1].thread, holder_id);
  for (size_t i = 2; i < 4; ++i) {
    EXPECT_EQ(results[i].input_value, static_cast<float>(i));  // the worker runs them in order
    EXPECT_NE(results[i].thread, holder_id);
    EXPECT_NE(results[i].thread, std::this_thread::get_id());
  }
  EXPECT_FALSE(probe_.overlapped());
  s->Shutdown();
}

// InlineAllowance::kUncontended (REST and gRPC requests that are not their I/O thread's sole
// requester): inline only once no other thread has submitted to the version for 1 ms.
TEST_F(ModelSchedulerTest, UncontendedRequestsRunInlineOnlyWhileTheirThreadSubmitsAlone) {
  inline_max_us_ = 100;
  auto s = Make(BatchingPolicy{});
  probe_.ReleaseAll();
  MeasureOnce(*s, 0);  // this thread's first submission
  const auto uncontended = [](float value) {
    auto r = BatchItem(value);
    r->request->allow_inline = InlineAllowance::kUncontended;
    return r;
  };
  const auto answered_here = [&](size_t n) {
    auto results = completions_.WaitFor(n);
    return results.size() == n && results[n - 1].thread == std::this_thread::get_id();
  };
  s->Submit(uncontended(1));  // this thread has not submitted alone for 1 ms yet
  EXPECT_FALSE(answered_here(2));
  WaitIdle(*s);
  clock_.Advance(999us);
  s->Submit(uncontended(2));
  EXPECT_FALSE(answered_here(3));
  WaitIdle(*s);
  clock_.Advance(1us);
  s->Submit(uncontended(3));  // alone for 1 ms: inline
  EXPECT_TRUE(answered_here(4));
  // Another thread submits (its own request may run inline): contended again.
  std::thread other([&] { s->Submit(BatchItem(4)); });
  other.join();
  completions_.WaitFor(5);
  WaitIdle(*s);
  clock_.Advance(2ms);
  s->Submit(uncontended(5));  // the other thread submitted last: a thread change, now
  EXPECT_FALSE(answered_here(6));
  WaitIdle(*s);
  clock_.Advance(1ms);
  s->Submit(uncontended(6));
  EXPECT_TRUE(answered_here(7));
  s->Shutdown();
}

TEST_F(ModelSchedulerTest, NeverInlineWhenABatchingDelayIsWorthWaitingFor) {
  inline_max_us_ = 100;
  BatchingPolicy p = Batching(8);
  p.max_queue_delay_us = 1000;
  auto s = Make(p);
  probe_.ReleaseAll();
  s->Submit(BatchItem(1));
  clock_.Advance(1ms);  // the first request's delay ends; a worker runs it (and measures)
  completions_.WaitFor(1);
  WaitIdle(*s);
  s->Submit(BatchItem(2));
  EXPECT_EQ(s->queue_depth(), 1u);  // waits for a batch, not run inline
  EXPECT_EQ(completions_.count(), 1u);
  clock_.Advance(1ms);
  auto results = completions_.WaitFor(2);
  EXPECT_NE(results[1].thread, std::this_thread::get_id());
  s->Shutdown();
}

TEST_F(ModelSchedulerTest, NeverInlineForASlowModelOrAnUnusuallyLargeRequest) {
  inline_max_us_ = 100;
  auto s = Make(BatchingPolicy{});
  s->Submit(BatchItem(1));
  probe_.WaitStarted(1);
  clock_.Advance(500us);  // the measured execution takes 500 µs > 100 µs
  probe_.Release(1);
  completions_.WaitFor(1);
  WaitIdle(*s);
  s->Submit(BatchItem(2));  // inline, it would block this thread in the held run
  EXPECT_EQ(completions_.count(), 1u) << "a slow model ran inline";
  probe_.ReleaseAll();
  auto results = completions_.WaitFor(2);
  EXPECT_NE(results[1].thread, std::this_thread::get_id());
  s->Shutdown();

  // Fast model, but a request with 16 times the bytes of the measured ones.
  auto fast = Make(BatchingPolicy{});
  MeasureOnce(*fast, 3);
  fast->Submit(BatchItem(4, /*items=*/1, /*width=*/64));
  results = completions_.WaitFor(4);
  EXPECT_EQ(results[3].input_value, 4);
  EXPECT_NE(results[3].thread, std::this_thread::get_id());
  WaitIdle(*fast);
  fast->Submit(BatchItem(5));  // a usual one runs inline again
  ASSERT_EQ(completions_.count(), 5u);
  EXPECT_EQ(completions_.WaitFor(5)[4].thread, std::this_thread::get_id());
}

// Batched executions feed the estimate too: under load a model runs in batches, and an
// estimate fed by one-request runs alone would keep one slow run's figure for as long as the
// load lasted.
TEST_F(ModelSchedulerTest, BatchedExecutionsKeepTheEstimateCurrent) {
  inline_max_us_ = 100;
  auto s = Make(Batching(4));
  probe_.HoldOnly(1);
  const auto handed_off = [](float value) {
    auto r = BatchItem(value);
    r->request->allow_inline = InlineAllowance::kNever;
    return r;
  };
  size_t runs = 0, answered = 0;
  // Each round: one slow request alone (500 µs), then three batches of four at 0 µs. Counting
  // only the one-request runs, the estimate would stay at 500 µs; counting every execution it
  // falls below 100 µs in the fourth round.
  for (int round = 0; round < 5; ++round) {
    s->Submit(handed_off(1));
    probe_.WaitStarted(++runs);
    for (int i = 0; i < 12; ++i) s->Submit(handed_off(2));
    clock_.Advance(500us);
    probe_.Release(1);
    runs += 3;
    answered += 13;
    ASSERT_EQ(completions_.WaitFor(answered).size(), answered);
    WaitIdle(*s);
  }
  EXPECT_EQ(probe_.batch_sizes().size(), runs);
  s->Submit(BatchItem(3));
  ASSERT_EQ(completions_.count(), answered + 1) << "not run inline";
  EXPECT_EQ(completions_.WaitFor(answered + 1).back().thread, std::this_thread::get_id());
  s->Shutdown();
}

TEST_F(ModelSchedulerTest, InlineRunsHonourCancellationAndDeadlines) {
  inline_max_us_ = 100;
  auto s = Make(BatchingPolicy{});
  probe_.Release(1);
  MeasureOnce(*s);
  // Cancelled while running inline: the run is stopped through the request's token.
  auto token = std::make_shared<CancellationToken>();
  std::thread submitter([&] {
    auto r = BatchItem(1);
    r->request->cancellation = token;
    s->Submit(std::move(r));
  });
  probe_.WaitStarted(2);
  token->Cancel();
  const std::thread::id submitter_id = submitter.get_id();
  submitter.join();
  auto results = completions_.WaitFor(2);
  EXPECT_EQ(results[1].code, StatusCode::kCancelled);
  EXPECT_EQ(results[1].thread, submitter_id);
  // Its deadline already passed: answered without running.
  auto late = BatchItem(2);
  late->request->deadline = clock_.Now() - 1us;
  s->Submit(std::move(late));
  ASSERT_EQ(completions_.count(), 3u);
  EXPECT_EQ(completions_.WaitFor(3)[2].code, StatusCode::kDeadlineExceeded);
  // Cancelled before it was submitted: answered without running.
  auto gone = BatchItem(3);
  gone->request->cancellation = token;
  s->Submit(std::move(gone));
  EXPECT_EQ(completions_.WaitFor(4)[3].code, StatusCode::kCancelled);
  EXPECT_EQ(probe_.batch_sizes().size(), 2u);
  // The instance is free again and a fast request runs inline.
  probe_.ReleaseAll();
  s->Submit(BatchItem(4));
  ASSERT_EQ(completions_.count(), 5u);
  EXPECT_EQ(completions_.WaitFor(5)[4].code, StatusCode::kOk);
  s->Shutdown();
}

TEST_F(ModelSchedulerTest, InlinePreservesOrderingAcrossInstances) {
  inline_max_us_ = 100;
  BatchingPolicy p = Batching(1);
  p.preserve_ordering = true;
  auto s = Make(p, /*instances=*/2);
  probe_.Release(1);
  MeasureOnce(*s);
  probe_.HoldOnly(1);
  std::thread holder([&] { s->Submit(BatchItem(1)); });  // inline, held
  probe_.WaitStarted(2);
  s->Submit(BatchItem(2));  // inline on the other instance, answer waits for request 1's
  EXPECT_EQ(completions_.count(), 1u);
  probe_.ReleaseAll();
  const std::thread::id holder_id = holder.get_id();
  holder.join();
  auto results = completions_.WaitFor(3);
  EXPECT_EQ(results[1].input_value, 1);
  EXPECT_EQ(results[2].input_value, 2);
  EXPECT_EQ(results[2].thread, holder_id);  // delivered behind request 1
  s->Shutdown();
}

TEST_F(ModelSchedulerTest, ConcurrentSubmitsNeverShareAnInstance) {
  inline_max_us_ = 100;
  auto s = Make(Batching(4), /*instances=*/2);
  probe_.ReleaseAll();
  MeasureOnce(*s, -1);
  constexpr int kThreads = 4, kPerThread = 300;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) s->Submit(BatchItem(static_cast<float>(t * 1000 + i)));
    });
  }
  std::vector<std::thread::id> submitters;
  for (auto& t : threads) submitters.push_back(t.get_id());
  for (auto& t : threads) t.join();
  auto results = completions_.WaitFor(kThreads * kPerThread + 1);
  ASSERT_EQ(results.size(), static_cast<size_t>(kThreads * kPerThread + 1));
  results.erase(results.begin());  // MeasureOnce's
  size_t inline_answers = 0;
  for (const auto& r : results) {
    ASSERT_EQ(r.code, StatusCode::kOk);
    EXPECT_EQ(r.output, std::vector<float>(4, r.input_value));
    inline_answers += std::count(submitters.begin(), submitters.end(), r.thread);
  }
  EXPECT_GT(inline_answers, 0u);
  EXPECT_FALSE(probe_.overlapped());
  s->Shutdown();
}

TEST_F(ModelSchedulerTest, ShutdownWaitsForAnInlineRunAndRunsWhatWasQueued) {
  std::thread holder;
  auto s = MakeHeldInline(&holder);
  s->Submit(BatchItem(2));  // queued behind the held instance
  size_t answered_when_stopped = 0;
  std::thread stopper([&] {
    s->Shutdown();
    answered_when_stopped = completions_.count();
  });
  // Until Shutdown() begins requests queue; then one is refused at once. Shutdown wakes the
  // workers: the held instance's worker must still leave it alone.
  size_t submitted = 3;
  for (;;) {
    const size_t before = completions_.count();
    s->Submit(BatchItem(99));
    ++submitted;
    if (completions_.count() > before) break;
  }
  probe_.ReleaseAll();
  holder.join();
  stopper.join();
  EXPECT_EQ(answered_when_stopped, submitted);  // the inline run and every queued request
  EXPECT_FALSE(probe_.overlapped());
  const auto results = completions_.WaitFor(submitted);
  for (const auto& r : results) {
    if (r.code != StatusCode::kUnavailable) {
      EXPECT_EQ(r.code, StatusCode::kOk) << r.input_value;
    }
  }
  EXPECT_EQ(std::count_if(results.begin(), results.end(),
                          [](const auto& r) { return r.code == StatusCode::kUnavailable; }),
            1);
}

}  // namespace
}  // namespace harrier

namespace harrier {
namespace {

// --cpu-affinity: each worker runs only on its CPU.
class CpuRecordingInstance : public ModelInstance {
 public:
  Status Run(std::span<const Tensor>, std::span<const std::string>, std::vector<Tensor>*,
             const RunContext&) override {
    cpu_set_t set;
    CPU_ZERO(&set);
    pthread_getaffinity_np(pthread_self(), sizeof(set), &set);
    allowed = CPU_COUNT(&set);
    pinned_to_0 = CPU_ISSET(0, &set);
    return Status::Ok();
  }
  int allowed = -1;
  bool pinned_to_0 = false;
};

TEST(ModelSchedulerPinningTest, WorkersRunOnlyOnTheirCpu) {
  std::vector<std::unique_ptr<ModelInstance>> instances;
  instances.push_back(std::make_unique<CpuRecordingInstance>());
  auto* probe = static_cast<CpuRecordingInstance*>(instances.back().get());
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  ModelScheduler::Options options;
  options.name = "pinned";
  options.worker_cpus = {0};
  options.on_complete = [&](std::unique_ptr<ScheduledRequest>, StatusOr<std::vector<Tensor>>,
                            const RequestTiming&) {
    std::lock_guard l(mu);
    done = true;
    cv.notify_all();
  };
  auto s = ModelScheduler::Create(std::move(instances), options);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  (*s)->Submit(testing::BatchItem(1));
  std::unique_lock l(mu);
  cv.wait(l, [&] { return done; });
  EXPECT_EQ(probe->allowed, 1);
  EXPECT_TRUE(probe->pinned_to_0);
}

TEST(ModelSchedulerPinningTest, AnImpossibleCpuFailsCreation) {
  std::vector<std::unique_ptr<ModelInstance>> instances;
  instances.push_back(std::make_unique<CpuRecordingInstance>());
  ModelScheduler::Options options;
  options.name = "pinned";
  options.worker_cpus = {CPU_SETSIZE + 5};
  options.on_complete = [](std::unique_ptr<ScheduledRequest>, StatusOr<std::vector<Tensor>>,
                           const RequestTiming&) {};
  EXPECT_EQ(ModelScheduler::Create(std::move(instances), options).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace harrier
