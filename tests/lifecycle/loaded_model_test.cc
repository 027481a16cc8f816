#include "lifecycle/loaded_model.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "util/fake_backend.h"
#include "util/fake_clock.h"
#include "util/fake_generative_model.h"
#include "util/scheduled_request_builder.h"

namespace harrier {
namespace {

using testing::Floats;
using testing::Fp32InferenceRequest;

class LoadedModelTest : public ::testing::Test {
 protected:
  std::shared_ptr<LoadedModel> Make(BatchingPolicy policy, int instances = 1) {
    LoadedModel::Options options;
    options.name = "m";
    options.version = 1;
    options.io.max_batch_size = 8;
    options.io.inputs.push_back({"INPUT0", DataType::kFp32, {4}, std::nullopt, false});
    options.io.outputs.push_back({"OUTPUT0", DataType::kFp32, {4}, std::nullopt, false});
    options.policy = std::move(policy);
    options.inline_execution_max_us = inline_max_us_;
    std::vector<std::unique_ptr<ModelInstance>> created;
    for (int i = 0; i < instances; ++i)
      created.push_back(std::make_unique<testing::FakeInstance>(&runs_));
    auto m = LoadedModel::Create(std::move(options), std::move(created));
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return std::move(m).value();
  }

  // Sends requests from several threads; returns how many came back with their own values.
  int InferConcurrently(LoadedModel& m, int threads, int per_thread) {
    std::mutex mu;
    std::condition_variable cv;
    int done = 0, correct = 0;
    std::vector<std::thread> senders;
    for (int t = 0; t < threads; ++t) {
      senders.emplace_back([&, t] {
        for (int i = 0; i < per_thread; ++i) {
          const float v = static_cast<float>(t * 10000 + i);
          const int64_t items = 1 + i % 3;
          m.Infer(Fp32InferenceRequest(std::vector<float>(items * 4, v), {items, 4}),
                  [&, v, items](StatusOr<InferenceResponse> r) {
                    bool good = r.ok() && r->outputs.size() == 1 &&
                                r->outputs[0].shape == Shape{items, 4} &&
                                Floats(r->outputs[0]) == std::vector<float>(items * 4, v);
                    std::lock_guard l(mu);
                    ++done;
                    correct += good;
                    cv.notify_all();
                  });
        }
      });
    }
    for (auto& s : senders) s.join();
    std::unique_lock l(mu);
    cv.wait_for(l, std::chrono::seconds(20), [&] { return done == threads * per_thread; });
    return correct;
  }

  std::atomic<int> runs_{0};
  uint64_t inline_max_us_ = 0;  // Make()'s Options::inline_execution_max_us
};

TEST_F(LoadedModelTest, InlineExecutionAnswersOnTheCallingThreadAndCountsAsUsual) {
  inline_max_us_ = 1'000'000;  // any measured run qualifies, however loaded the machine
  std::optional<std::thread::id> answered_on;  // outlives the model, whose thread may write it
  auto m = Make(BatchingPolicy{});
  EXPECT_EQ(InferConcurrently(*m, 1, 1), 1);  // the worker runs it and measures the model
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (m->scheduler().busy_instances() > 0 && std::chrono::steady_clock::now() < limit) {
    std::this_thread::yield();
  }
  m->Infer(Fp32InferenceRequest(std::vector<float>(4, 7.0f), {1, 4}),
           [&](StatusOr<InferenceResponse> r) {
             EXPECT_TRUE(r.ok());
             answered_on = std::this_thread::get_id();
           });
  ASSERT_TRUE(answered_on.has_value());  // answered before Infer() returned
  EXPECT_EQ(*answered_on, std::this_thread::get_id());
  EXPECT_EQ(InferConcurrently(*m, 2, 200), 2 * 200);  // inline and queued, mixed
  m->Shutdown();
  ModelVersionStats st;
  m->SnapshotStats(&st);
  EXPECT_EQ(st.success.count, 402u);
  EXPECT_EQ(st.execution_count, static_cast<uint64_t>(runs_.load()));
  const ModelMetrics& metrics = m->metrics();
  EXPECT_EQ(metrics.request_duration.Snapshot().count(), st.success.count);
  EXPECT_EQ(metrics.compute_infer_duration.Snapshot().count(), st.success.count);
  EXPECT_EQ(metrics.batch_size.Snapshot().count(), st.execution_count);
  EXPECT_EQ(metrics.in_flight.load(), 0);
}

TEST_F(LoadedModelTest, BatchedRequestsGetTheirOwnOutputsAndStatisticsCountBatches) {
  BatchingPolicy p;
  p.dynamic_batching = true;
  p.max_batch_size = 8;
  auto m = Make(p, /*instances=*/2);
  EXPECT_EQ(InferConcurrently(*m, 4, 300), 4 * 300);
  m->Shutdown();
  ModelVersionStats st;
  m->SnapshotStats(&st);
  EXPECT_EQ(st.success.count, 1200u);
  uint64_t items = 0;  // 1, 2, 3 items in turn: 300 requests per thread = 100 of each
  items = 4 * 100 * (1 + 2 + 3);
  EXPECT_EQ(st.inference_count, items);
  EXPECT_EQ(st.execution_count, static_cast<uint64_t>(runs_.load()));
  uint64_t batch_executions = 0, batch_items = 0;
  for (const BatchStat& b : st.batch_stats) {
    EXPECT_GE(b.batch_size, 1u);
    EXPECT_LE(b.batch_size, 8u);
    EXPECT_EQ(b.compute_infer.count, b.compute_input.count);
    batch_executions += b.compute_infer.count;
    batch_items += b.compute_infer.count * b.batch_size;
  }
  EXPECT_EQ(batch_executions, st.execution_count);
  EXPECT_EQ(batch_items, st.inference_count);
}

TEST_F(LoadedModelTest, ASuccessfulResponseCarriesItsBatchTimesForTracing) {
  BatchingPolicy p;
  p.dynamic_batching = true;
  p.max_batch_size = 8;
  auto m = Make(p);
  auto request = Fp32InferenceRequest(std::vector<float>(8, 1.5f), {2, 4});
  request->trace.trace_id[0] = 1;
  request->trace.span_id[0] = 1;
  request->trace.flags = SpanContext::kSampled;
  const auto before = std::chrono::steady_clock::now();
  std::promise<StatusOr<InferenceResponse>> answered;
  m->Infer(std::move(request),
           [&answered](StatusOr<InferenceResponse> r) { answered.set_value(std::move(r)); });
  StatusOr<InferenceResponse> r = answered.get_future().get();
  m->Shutdown();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const InferenceTiming& t = r->timing;
  EXPECT_GE(t.batch_start, before);
  EXPECT_LE(t.batch_start, t.infer_start);
  EXPECT_LE(t.infer_start, t.infer_end);
  EXPECT_LE(t.infer_end, std::chrono::steady_clock::now());
  EXPECT_EQ(t.batch_size, 2);
  EXPECT_EQ(t.batch_requests, 1u);
  EXPECT_EQ(t.batch_peers, nullptr);  // alone: nobody to link to
}

TEST_F(LoadedModelTest, ExpiredDeadlineIsAGatewayTimeoutWithTheModelNamed) {
  auto m = Make(BatchingPolicy{});
  auto r = Fp32InferenceRequest({1, 2, 3, 4}, {1, 4});
  r->deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  std::promise<StatusOr<InferenceResponse>> p;
  m->Infer(std::move(r), [&](StatusOr<InferenceResponse> resp) { p.set_value(std::move(resp)); });
  auto resp = p.get_future().get();
  EXPECT_EQ(resp.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(resp.status().message().find("model 'm' version 1"), std::string::npos);
  m->Shutdown();
  ModelVersionStats st;
  m->SnapshotStats(&st);
  EXPECT_EQ(st.fail.count, 1u);
  EXPECT_EQ(st.execution_count, 0u);
  EXPECT_EQ(runs_.load(), 0);
}

// The Prometheus metrics are recorded at the same points as Triton's statistics.
TEST_F(LoadedModelTest, MetricsAgreeWithTheStatistics) {
  BatchingPolicy p;
  p.dynamic_batching = true;
  p.max_batch_size = 8;
  auto m = Make(p, /*instances=*/2);
  EXPECT_EQ(InferConcurrently(*m, 2, 200), 2 * 200);
  m->Shutdown();
  ModelVersionStats st;
  m->SnapshotStats(&st);
  const ModelMetrics& metrics = m->metrics();
  EXPECT_EQ(metrics.request_duration.Snapshot().count(), st.success.count);
  EXPECT_EQ(metrics.queue_duration.Snapshot().count(), st.success.count);
  EXPECT_EQ(metrics.compute_input_duration.Snapshot().count(), st.success.count);
  EXPECT_EQ(metrics.compute_infer_duration.Snapshot().count(), st.success.count);
  EXPECT_EQ(metrics.compute_output_duration.Snapshot().count(), st.success.count);
  EXPECT_EQ(metrics.queue_duration.Snapshot().sum, st.queue.ns);
  EXPECT_EQ(metrics.compute_infer_duration.Snapshot().sum, st.compute_infer.ns);
  // Triton's success time includes the output time: the histogram's end-to-end sum is the same.
  EXPECT_EQ(metrics.request_duration.Snapshot().sum, st.success.ns);
  HistogramSnapshot batches = metrics.batch_size.Snapshot();
  EXPECT_EQ(batches.count(), st.execution_count);
  EXPECT_EQ(batches.sum, st.inference_count);
  EXPECT_EQ(metrics.in_flight.load(), 0);
}

TEST_F(LoadedModelTest, FailuresAreCountedByReasonAndCancellationsByStage) {
  auto m = Make(BatchingPolicy{});
  auto call = [&](std::unique_ptr<InferenceRequest> r) {
    std::promise<StatusOr<InferenceResponse>> done;
    m->Infer(std::move(r),
             [&](StatusOr<InferenceResponse> resp) { done.set_value(std::move(resp)); });
    return done.get_future().get().status().code();
  };
  auto expired = Fp32InferenceRequest({1, 2, 3, 4}, {1, 4});
  expired->deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  EXPECT_EQ(call(std::move(expired)), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(call(Fp32InferenceRequest({1, 2, 3}, {1, 3})), StatusCode::kInvalidArgument);
  auto cancelled = Fp32InferenceRequest({1, 2, 3, 4}, {1, 4});
  cancelled->cancellation = std::make_shared<CancellationToken>();
  cancelled->cancellation->Cancel();
  EXPECT_EQ(call(std::move(cancelled)), StatusCode::kCancelled);
  // Found by the transport before Infer().
  m->RecordFailure(StatusCode::kInvalidArgument, std::chrono::steady_clock::now());
  m->Shutdown();

  const ModelMetrics& metrics = m->metrics();
  EXPECT_EQ(metrics.failures.Read(FailureReason::kTimeout), 1u);
  EXPECT_EQ(metrics.failures.Read(FailureReason::kBadRequest), 2u);
  EXPECT_EQ(metrics.failures.Read(FailureReason::kCancelled), 1u);
  EXPECT_EQ(metrics.failures.Read(FailureReason::kInternal), 0u);
  EXPECT_EQ(metrics.cancellations[static_cast<size_t>(CancellationStage::kQueued)].load(), 1u);
  EXPECT_EQ(metrics.cancellations[static_cast<size_t>(CancellationStage::kRunning)].load(), 0u);
  EXPECT_EQ(metrics.request_duration.Snapshot().count(), 0u);
  EXPECT_EQ(metrics.in_flight.load(), 0);
  ModelVersionStats st;
  m->SnapshotStats(&st);
  EXPECT_EQ(st.fail.count, 4u);  // Triton's failure count: the same four
}

// A gRPC client cancels the call at its own deadline, racing the server's clock, which started
// later: a cancellation just before the deadline is the deadline's (probe 41), one well before
// it the client's; an HTTP client that closes is always a client gone (probe 42).
TEST_F(LoadedModelTest, ACancellationAtTheDeadlineIsATimeout) {
  auto m = Make(BatchingPolicy{});
  auto call = [&](Clock::duration before, Clock::duration after, bool grpc = true) {
    auto r = Fp32InferenceRequest({1, 2, 3, 4}, {1, 4});
    const auto now = std::chrono::steady_clock::now();
    r->received_at = now - before;
    r->deadline = now + after;
    r->client_cancels_at_deadline = grpc;
    r->cancellation = std::make_shared<CancellationToken>();
    r->cancellation->Cancel();
    std::promise<StatusOr<InferenceResponse>> done;
    m->Infer(std::move(r),
             [&](StatusOr<InferenceResponse> resp) { done.set_value(std::move(resp)); });
    return done.get_future().get().status().code();
  };
  using std::chrono::milliseconds;
  // A 1 s timeout: 20 ms of slack. Cancelled 2 ms before its deadline: the deadline's.
  EXPECT_EQ(call(milliseconds(998), milliseconds(2)), StatusCode::kDeadlineExceeded);
  // Cancelled with 900 ms left: the client's.
  EXPECT_EQ(call(milliseconds(100), milliseconds(900)), StatusCode::kCancelled);
  // An HTTP client that closes at its deadline has gone away (499), as nginx logs it (probe 42).
  EXPECT_EQ(call(milliseconds(998), milliseconds(2), /*grpc=*/false), StatusCode::kCancelled);
  m->Shutdown();
  const ModelMetrics& metrics = m->metrics();
  EXPECT_EQ(metrics.failures.Read(FailureReason::kTimeout), 1u);
  EXPECT_EQ(metrics.failures.Read(FailureReason::kCancelled), 2u);
  EXPECT_EQ(metrics.cancellations[static_cast<size_t>(CancellationStage::kQueued)].load(), 2u);
}

}  // namespace
}  // namespace harrier

namespace harrier {
namespace {

// A version that generates text: Infer() points at the generation endpoints, and generative()
// times every generation into the version's statistics and metrics.
TEST(GenerativeLoadedModelTest, InferIsRefusedAndGenerationsAreTimedAndCounted) {
  auto engine = std::make_shared<testing::FakeGenerativeModel>();
  LoadedModel::Options options;
  options.name = "llm";
  options.version = 2;
  options.generator = engine;
  auto created = LoadedModel::Create(std::move(options), {});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::shared_ptr<LoadedModel> model = *created;

  std::optional<Status> refused;
  auto request = std::make_unique<InferenceRequest>();
  model->Infer(std::move(request), [&](StatusOr<InferenceResponse> r) { refused = r.status(); });
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused->message().find("/v1/chat/completions"), std::string::npos);

  struct Sink : GenerationSink {
    int tokens = 0;
    std::optional<FinishReason> reason;
    void OnStart(int, int) override {}
    void OnToken(std::string_view, float) override { ++tokens; }
    void OnEnd(FinishReason r, const GenerationUsage&, const Status&) override { reason = r; }
  };
  ASSERT_NE(model->generative(), nullptr);
  auto sink = std::make_shared<Sink>();
  GenerationRequest g;
  g.prompt = "x";
  ASSERT_TRUE(model->generative()->Generate(std::move(g), sink).ok());
  EXPECT_EQ(sink->tokens, 4);  // the fake's script, passed on untouched
  EXPECT_EQ(sink->reason, FinishReason::kStop);

  auto cancelled = std::make_shared<Sink>();
  GenerationRequest c;
  c.cancellation = std::make_shared<CancellationToken>();
  c.cancellation->Cancel();
  ASSERT_TRUE(model->generative()->Generate(std::move(c), cancelled).ok());
  EXPECT_EQ(cancelled->reason, FinishReason::kCancelled);

  engine->refuse = ResourceExhausted("queue full");
  GenerationRequest refused_at_once;
  EXPECT_FALSE(model->generative()->Generate(std::move(refused_at_once), sink).ok());

  const ModelMetrics& m = model->metrics();
  EXPECT_EQ(m.time_to_first_token.Snapshot().count(), 1u);  // the cancelled one had no token
  EXPECT_EQ(m.time_per_output_token.Snapshot().count(), 1u);
  EXPECT_EQ(m.request_duration.Snapshot().count(), 1u);
  EXPECT_EQ(m.failures.Read(FailureReason::kCancelled), 1u);
  EXPECT_EQ(m.failures.Read(FailureReason::kRejected), 1u);
  EXPECT_EQ(m.in_flight.load(), 0);
  ModelVersionStats stats;
  model->SnapshotStats(&stats);
  EXPECT_EQ(stats.success.count, 1u);
  EXPECT_EQ(model->queue_depth(), 0u);
}

// A generative version "llm" 1 on `engine`, timed by `clock`.
LoadedModel::Options HeldGenerator(std::shared_ptr<testing::FakeGenerativeModel> engine,
                                   const Clock* clock) {
  LoadedModel::Options options;
  options.name = "llm";
  options.version = 1;
  options.generator = std::move(engine);
  options.clock = clock;
  return options;
}

// The choices of one request (OpenAI's n) count as that one request: once in flight, once
// as a success or a failure, one time to first token; its queueing lasts until its first choice
// got a sequence (probe 32). A refused choice ends those never submitted; a client that left
// counts as a cancellation at the stage it reached.
TEST(GenerativeLoadedModelTest, TheChoicesOfOneRequestCountAsOneWithItsQueueTime) {
  using std::chrono::milliseconds;
  testing::FakeClock clock;
  auto engine = std::make_shared<testing::FakeGenerativeModel>();
  engine->hold = true;
  auto created = LoadedModel::Create(HeldGenerator(engine, &clock), {});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::shared_ptr<LoadedModel> model = *created;
  const ModelMetrics& m = model->metrics();
  struct Sink : GenerationSink {
    void OnStart(int, int) override {}
    void OnToken(std::string_view, float) override {}
    void OnEnd(FinishReason, const GenerationUsage&, const Status&) override {}
  };
  auto submit = [&](const std::shared_ptr<RequestTally>& tally) {
    GenerationRequest g;
    g.prompt = "x";
    g.received_at = clock.Now();
    g.tally = tally;
    return model->generative()->Generate(std::move(g), std::make_shared<Sink>());
  };

  auto two = std::make_shared<RequestTally>(2);
  ASSERT_TRUE(submit(two).ok());
  ASSERT_TRUE(submit(two).ok());
  EXPECT_EQ(m.in_flight.load(), 1);
  auto held = engine->TakeHeld();
  ASSERT_EQ(held.size(), 2u);
  clock.Advance(milliseconds(5));
  held[0].sink->OnStart(1, 0);
  clock.Advance(milliseconds(1));
  held[1].sink->OnStart(1, 0);
  held[1].sink->OnToken("a", 0);
  held[0].sink->OnToken("b", 0);
  clock.Advance(milliseconds(10));
  held[0].sink->OnEnd(FinishReason::kStop, {1, 1, 0}, Status::Ok());
  EXPECT_EQ(m.request_duration.Snapshot().count(), 0u);  // one choice is still generating
  EXPECT_EQ(m.in_flight.load(), 1);
  held[1].sink->OnEnd(FinishReason::kStop, {1, 1, 0}, Status::Ok());
  EXPECT_EQ(m.in_flight.load(), 0);
  EXPECT_EQ(m.request_duration.Snapshot().count(), 1u);
  EXPECT_EQ(m.request_duration.Snapshot().sum, 16'000'000u);
  EXPECT_EQ(m.time_to_first_token.Snapshot().count(), 1u);
  EXPECT_EQ(m.time_to_first_token.Snapshot().sum, 6'000'000u);
  EXPECT_EQ(m.queue_duration.Snapshot().sum, 5'000'000u);
  EXPECT_EQ(m.compute_infer_duration.Snapshot().sum, 11'000'000u);
  EXPECT_EQ(m.time_per_output_token.Snapshot().count(), 0u);  // per choice, one token each

  // Three choices; the engine takes the first and refuses the second: the third is never
  // submitted. One failure, counted when the first choice ends.
  engine->refuse = ResourceExhausted("queue full");
  engine->refuse_after_calls = 3;  // the calls so far: two above, and this request's first
  auto three = std::make_shared<RequestTally>(3);
  ASSERT_TRUE(submit(three).ok());
  EXPECT_FALSE(submit(three).ok());
  EXPECT_EQ(m.failures.Read(FailureReason::kRejected), 0u);
  held = engine->TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  held[0].sink->OnEnd(FinishReason::kStop, {1, 0, 0}, Status::Ok());
  EXPECT_EQ(m.failures.Read(FailureReason::kRejected), 1u);
  EXPECT_EQ(m.request_duration.Snapshot().count(), 1u);
  EXPECT_EQ(m.in_flight.load(), 0);

  // Clients that leave: one waiting for a sequence, one generating.
  engine->refuse = Status::Ok();
  ASSERT_TRUE(submit(nullptr).ok());
  ASSERT_TRUE(submit(nullptr).ok());
  held = engine->TakeHeld();
  ASSERT_EQ(held.size(), 2u);
  held[0].sink->OnEnd(FinishReason::kCancelled, {1, 0, 0}, Status::Ok());
  held[1].sink->OnStart(1, 0);
  held[1].sink->OnEnd(FinishReason::kCancelled, {1, 0, 0}, Status::Ok());
  EXPECT_EQ(m.failures.Read(FailureReason::kCancelled), 2u);
  EXPECT_EQ(m.cancellations[static_cast<size_t>(CancellationStage::kQueued)].load(), 1u);
  EXPECT_EQ(m.cancellations[static_cast<size_t>(CancellationStage::kRunning)].load(), 1u);
  EXPECT_EQ(m.in_flight.load(), 0);
  model->Shutdown();
}

// Generations go through admission control like any request (a ticket held until OnEnd, the
// per-client rate limit keyed by GenerationRequest::client_id) and reach the engine with their
// priority level resolved from the config's levels.
TEST(GenerativeLoadedModelTest, GenerationsAreAdmittedAndGivenTheirPriorityLevel) {
  testing::FakeClock clock;
  AdmissionController::Options server;
  server.clock = &clock;
  server.max_inflight = 2;
  server.per_client = RateLimit{1, 1};  // one generation per client, then 1 s to refill
  auto controller = AdmissionController::Create(server);
  ASSERT_TRUE(controller.ok()) << controller.status().ToString();
  AdmissionController::ModelSpec spec;
  spec.name = "llm";
  auto admission = (*controller)->ForModel(spec);
  ASSERT_TRUE(admission.ok()) << admission.status().ToString();

  auto engine = std::make_shared<testing::FakeGenerativeModel>();
  engine->hold = true;
  LoadedModel::Options options = HeldGenerator(engine, &clock);
  options.admission = std::move(admission).value();
  options.policy.priority_levels = 3;
  options.policy.default_priority_level = 2;
  auto created = LoadedModel::Create(std::move(options), {});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::shared_ptr<LoadedModel> model = *created;

  struct Sink : GenerationSink {
    std::optional<FinishReason> reason;
    void OnStart(int, int) override {}
    void OnToken(std::string_view, float) override {}
    void OnEnd(FinishReason r, const GenerationUsage&, const Status&) override { reason = r; }
  };
  auto generate = [&](std::string client, uint64_t priority) {
    GenerationRequest g;
    g.prompt = "x";
    g.client_id = std::move(client);
    g.priority = priority;
    return model->generative()->Generate(std::move(g), std::make_shared<Sink>());
  };
  EXPECT_TRUE(generate("a", 1).ok());
  EXPECT_TRUE(generate("b", 0).ok());
  // Two in flight, the server's limit; a third client is refused until one ends.
  Status full = generate("c", 9);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted) << full.ToString();
  EXPECT_NE(full.message().find("in-flight"), std::string::npos) << full.message();
  EXPECT_EQ((*controller)->in_flight(), 2);

  std::vector<testing::FakeGenerativeModel::Held> first = engine->TakeHeld();
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].request.priority, 1u);  // as asked
  EXPECT_EQ(first[1].request.priority, 2u);  // 0: the default level
  first[0].sink->OnEnd(FinishReason::kStop, {}, Status::Ok());
  EXPECT_EQ((*controller)->in_flight(), 1);  // the ticket went back with the end

  // Client "a" spent its one token; "c" has its own, and a level past the three is the default.
  Status limited = generate("a", 0);
  EXPECT_EQ(limited.code(), StatusCode::kResourceExhausted) << limited.ToString();
  EXPECT_NE(limited.message().find("rate limit"), std::string::npos) << limited.message();
  EXPECT_TRUE(generate("c", 9).ok());
  std::vector<testing::FakeGenerativeModel::Held> second = engine->TakeHeld();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].request.priority, 2u);
  EXPECT_EQ(model->metrics().failures.Read(FailureReason::kRejected), 2u);

  // The engine refusing at once gives the ticket back too.
  first[1].sink->OnEnd(FinishReason::kCancelled, {}, Status::Ok());
  EXPECT_EQ((*controller)->in_flight(), 1);
  engine->refuse = ResourceExhausted("queue full");
  EXPECT_FALSE(generate("d", 0).ok());
  EXPECT_EQ((*controller)->in_flight(), 1);  // "c" only
  second[0].sink->OnEnd(FinishReason::kStop, {}, Status::Ok());
  EXPECT_EQ((*controller)->in_flight(), 0);
}

}  // namespace
}  // namespace harrier
