#include "scheduler/batch_former.h"

#include <gtest/gtest.h>

#include "util/fake_clock.h"
#include "util/scheduled_request_builder.h"

namespace harrier {
namespace {

using namespace std::chrono_literals;
using testing::BatchItem;
using testing::FakeClock;

class BatchFormerTest : public ::testing::Test {
 protected:
  // Queues a request with a fresh seq; returns the seq.
  uint64_t Add(BatchFormer& f, std::unique_ptr<ScheduledRequest> r) {
    r->seq = next_seq_++;
    if (r->request->received_at == Clock::time_point{}) r->request->received_at = clock_.Now();
    const uint64_t seq = r->seq;
    Status s = f.Enqueue(r, clock_.Now());
    EXPECT_TRUE(s.ok()) << s.ToString();
    return seq;
  }
  static std::vector<uint64_t> Seqs(const BatchFormer::Decision& d) {
    std::vector<uint64_t> v;
    for (const auto& r : d.batch) v.push_back(r->seq);
    return v;
  }
  static BatchingPolicy Batching(int64_t max_batch_size, uint64_t delay_us = 0) {
    BatchingPolicy p;
    p.dynamic_batching = true;
    p.max_batch_size = max_batch_size;
    p.max_queue_delay_us = delay_us;
    return p;
  }

  FakeClock clock_;
  uint64_t next_seq_ = 1;
};

TEST_F(BatchFormerTest, WithoutDynamicBatchingRunsOneRequestAtATimeInOrder) {
  BatchingPolicy p;
  p.max_batch_size = 8;  // batchable model, but no dynamic_batching: never merged
  BatchFormer f(p);
  uint64_t a = Add(f, BatchItem(1));
  uint64_t b = Add(f, BatchItem(2));
  auto d = f.NextDecision(clock_.Now(), false);
  EXPECT_EQ(Seqs(d), std::vector<uint64_t>{a});
  d = f.NextDecision(clock_.Now(), false);
  EXPECT_EQ(Seqs(d), std::vector<uint64_t>{b});
  d = f.NextDecision(clock_.Now(), false);
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(d.wake_at, Clock::time_point::max());
  EXPECT_TRUE(f.empty());
}

TEST_F(BatchFormerTest, ZeroDelayBatchesWhatIsQueuedUpToMaxBatchSize) {
  BatchFormer f(Batching(4));
  for (int i = 0; i < 3; ++i) Add(f, BatchItem(i));
  Add(f, BatchItem(9, /*items=*/2));  // 3 + 2 > 4: left for the next batch
  auto d = f.NextDecision(clock_.Now(), false);
  EXPECT_EQ(Seqs(d), (std::vector<uint64_t>{1, 2, 3}));
  d = f.NextDecision(clock_.Now(), false);
  EXPECT_EQ(Seqs(d), std::vector<uint64_t>{4});
}

TEST_F(BatchFormerTest, MultiItemRequestsFillABatchExactly) {
  BatchFormer f(Batching(8, /*delay_us=*/1000));
  Add(f, BatchItem(1, 3));
  Add(f, BatchItem(2, 5));
  auto d = f.NextDecision(clock_.Now(), false);  // 3 + 5 = max: no waiting
  EXPECT_EQ(Seqs(d), (std::vector<uint64_t>{1, 2}));
}

TEST_F(BatchFormerTest, PartialBatchWaitsForTheQueueDelayThenRuns) {
  BatchFormer f(Batching(8, /*delay_us=*/100));
  const Clock::time_point t0 = clock_.Now();
  Add(f, BatchItem(1));
  clock_.Advance(30us);
  Add(f, BatchItem(2));
  auto d = f.NextDecision(clock_.Now(), false);
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(d.wake_at, t0 + 100us);  // the oldest request's delay
  clock_.Advance(69us);
  EXPECT_TRUE(f.NextDecision(clock_.Now(), false).batch.empty());
  clock_.Advance(1us);
  d = f.NextDecision(clock_.Now(), false);
  EXPECT_EQ(Seqs(d), (std::vector<uint64_t>{1, 2}));
}

// A config may set the delay (a uint64 of microseconds) to anything: the largest waits, as a
// long delay does, instead of wrapping past the clock's range into the past.
TEST_F(BatchFormerTest, TheLargestQueueDelayWaitsInsteadOfOverflowing) {
  BatchFormer f(Batching(8, /*delay_us=*/UINT64_MAX));
  Add(f, BatchItem(1));
  clock_.Advance(1h);
  auto d = f.NextDecision(clock_.Now(), false);
  EXPECT_TRUE(d.batch.empty());
  EXPECT_GT(d.wake_at, clock_.Now() + 24h * 100);
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), /*flush=*/true)), (std::vector<uint64_t>{1}));
}

TEST_F(BatchFormerTest, FlushRunsAPartialBatchWithoutWaiting) {
  BatchFormer f(Batching(8, /*delay_us=*/100000));
  Add(f, BatchItem(1));
  EXPECT_TRUE(f.NextDecision(clock_.Now(), false).batch.empty());
  EXPECT_EQ(f.NextDecision(clock_.Now(), /*flush=*/true).batch.size(), 1u);
}

TEST_F(BatchFormerTest, PreferredBatchSizeRunsAtOnce) {
  BatchingPolicy p = Batching(8, /*delay_us=*/100000);
  p.preferred_batch_sizes = {2, 4};
  BatchFormer f(p);
  Add(f, BatchItem(1));
  EXPECT_TRUE(f.NextDecision(clock_.Now(), false).batch.empty());  // 1: not preferred, wait
  Add(f, BatchItem(2));
  Add(f, BatchItem(3));
  // 3 queued: the largest preferred size that can be formed (2) goes now; 1 stays.
  auto d = f.NextDecision(clock_.Now(), false);
  EXPECT_EQ(Seqs(d), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(f.size(), 1u);
  for (int i = 0; i < 3; ++i) Add(f, BatchItem(4 + i));
  d = f.NextDecision(clock_.Now(), false);  // 4 queued: the largest preferred size
  EXPECT_EQ(Seqs(d), (std::vector<uint64_t>{3, 4, 5, 6}));
}

TEST_F(BatchFormerTest, OnlyRequestsWithMatchingNonBatchDimsAreBatchedTogether) {
  BatchFormer f(Batching(8));
  Add(f, BatchItem(1, 1, /*width=*/4));
  Add(f, BatchItem(2, 1, /*width=*/5));
  Add(f, BatchItem(3, 2, /*width=*/4));
  auto d = f.NextDecision(clock_.Now(), false);
  EXPECT_EQ(Seqs(d), (std::vector<uint64_t>{1, 3}));  // width 5 skipped
  d = f.NextDecision(clock_.Now(), false);
  EXPECT_EQ(Seqs(d), std::vector<uint64_t>{2});
}

// A full batch of another shape queued behind a waiting partial batch runs at once: it waited
// the whole queue delay behind one request of another shape on an idle instance (probe 30).
// The head's batch goes on waiting for company.
TEST_F(BatchFormerTest, AReadyBatchOfAnotherShapeRunsWhileTheHeadsWaits) {
  BatchFormer f(Batching(8, /*delay_us=*/300000));
  const Clock::time_point t0 = clock_.Now();
  const uint64_t lone = Add(f, BatchItem(1, 1, /*width=*/3));
  EXPECT_TRUE(f.NextDecision(clock_.Now(), false).batch.empty());  // alone: it waits
  for (int i = 0; i < 8; ++i) Add(f, BatchItem(10 + i, 1, /*width=*/4));
  EXPECT_EQ(f.NextDecision(clock_.Now(), false).batch.size(), 8u);  // full: at once
  auto d = f.NextDecision(clock_.Now(), false);
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(d.wake_at, t0 + 300ms);  // the lone one still waits its delay
  clock_.Advance(300ms);
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), std::vector<uint64_t>{lone});
}

// A compatible request with more items than fit: waiting cannot grow the batch past it, so it
// runs at once, as Triton's batcher sends its pending batch.
TEST_F(BatchFormerTest, ABatchThatTheNextRequestOverflowsRunsWithoutWaiting) {
  BatchFormer f(Batching(8, /*delay_us=*/300000));
  Add(f, BatchItem(20, /*items=*/7));
  EXPECT_TRUE(f.NextDecision(clock_.Now(), false).batch.empty());
  const uint64_t two = Add(f, BatchItem(21, /*items=*/2));  // 7 + 2 > 8
  EXPECT_EQ(f.NextDecision(clock_.Now(), false).batch.size(), 1u);
  EXPECT_TRUE(f.NextDecision(clock_.Now(), false).batch.empty());  // the two wait for company
  clock_.Advance(300ms);
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), std::vector<uint64_t>{two});
}

// Two shapes interleaved still batch by shape: a request of another shape does not send the
// head's batch early (probe 33: batches of 1.4 requests where they were 3.9).
TEST_F(BatchFormerTest, InterleavedShapesStillBatchByShape) {
  BatchingPolicy p = Batching(8, /*delay_us=*/100000);
  p.preferred_batch_sizes = {4};
  BatchFormer f(p);
  for (int i = 0; i < 8; ++i) Add(f, BatchItem(i, 1, /*width=*/i % 2 == 0 ? 3 : 4));
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), (std::vector<uint64_t>{1, 3, 5, 7}));
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), (std::vector<uint64_t>{2, 4, 6, 8}));
}

TEST_F(BatchFormerTest, DifferentDtypesOrOutputsAreNotBatchedTogether) {
  BatchFormer f(Batching(8));
  Add(f, BatchItem(1));
  auto other = BatchItem(2);
  other->request->inputs[0].dtype = DataType::kInt32;
  Add(f, std::move(other));
  auto fewer_outputs = BatchItem(3);
  fewer_outputs->output_names = {"OUTPUT1"};
  Add(f, std::move(fewer_outputs));
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), std::vector<uint64_t>{1});
}

TEST_F(BatchFormerTest, PreserveOrderingStopsAtTheFirstIncompatibleRequest) {
  BatchingPolicy p = Batching(8);
  p.preserve_ordering = true;
  BatchFormer f(p);
  Add(f, BatchItem(1, 1, 4));
  Add(f, BatchItem(2, 1, 5));
  Add(f, BatchItem(3, 1, 4));
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), std::vector<uint64_t>{1});
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), std::vector<uint64_t>{2});
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), std::vector<uint64_t>{3});
}

TEST_F(BatchFormerTest, HigherPriorityRunsFirstAndFillsTheBatchFirst) {
  BatchingPolicy p = Batching(2);
  p.priority_levels = 3;
  p.default_priority_level = 2;
  BatchFormer f(p);
  auto low = BatchItem(1);
  low->request->priority = 3;
  uint64_t l = Add(f, std::move(low));
  uint64_t def = Add(f, BatchItem(2));  // priority 0: the default level 2
  auto high = BatchItem(3);
  high->request->priority = 1;
  uint64_t h = Add(f, std::move(high));
  auto beyond = BatchItem(4);
  beyond->request->priority = 99;  // beyond the levels: the default level
  uint64_t b = Add(f, std::move(beyond));
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), (std::vector<uint64_t>{h, def}));
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), (std::vector<uint64_t>{b, l}));
}

TEST_F(BatchFormerTest, MaxQueueSizeRefusesPerLevel) {
  BatchingPolicy p = Batching(8);
  p.priority_levels = 2;
  p.default_queue_policy.max_queue_size = 2;
  p.priority_queue_policy[1].max_queue_size = 1;
  BatchFormer f(p);
  Add(f, BatchItem(1));
  Add(f, BatchItem(2));
  auto third = BatchItem(3);
  third->seq = 100;
  Status s = f.Enqueue(third, clock_.Now());
  // Triton's answer, which its clients match on: 503 / UNAVAILABLE, "Exceeds maximum queue size".
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message().rfind("Exceeds maximum queue size", 0), 0u) << s.ToString();
  ASSERT_NE(third, nullptr);  // left with the caller, to be answered
  auto urgent = BatchItem(4);
  urgent->request->priority = 1;
  Add(f, std::move(urgent));  // level 1 has its own bound
  auto urgent2 = BatchItem(5);
  urgent2->request->priority = 1;
  urgent2->seq = 101;
  EXPECT_EQ(f.Enqueue(urgent2, clock_.Now()).code(), StatusCode::kUnavailable);
  EXPECT_EQ(f.size(), 3u);
}

TEST_F(BatchFormerTest, RejectTimeoutAnswersDeadlineExceededWithoutRunning) {
  BatchingPolicy p = Batching(8, /*delay_us=*/1000000);
  p.default_queue_policy.default_timeout_us = 100;
  BatchFormer f(p);
  Add(f, BatchItem(1));
  // No instance free before the timeout (no decision asked): it times out in the queue.
  clock_.Advance(100us);
  auto d = f.NextDecision(clock_.Now(), false);
  EXPECT_TRUE(d.batch.empty());
  ASSERT_EQ(d.rejected.size(), 1u);
  EXPECT_EQ(d.rejected[0].second.code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(f.empty());
}

// Probe 49: a request whose deadline was shorter than the queue delay waited it out on an idle
// model and got 504. Waiting for company never costs a member its deadline or its rejecting
// timeout: the batch runs by then, less the expected run time.
TEST_F(BatchFormerTest, ABatchRunsInTimeForItsMembersDeadlines) {
  BatchFormer f(Batching(8, /*delay_us=*/200000));
  const Clock::time_point t0 = clock_.Now();
  auto r = BatchItem(1);
  r->request->deadline = t0 + 100000us;
  const uint64_t a = Add(f, std::move(r));
  auto d = f.NextDecision(clock_.Now(), false);
  EXPECT_TRUE(d.batch.empty());
  // No run time measured yet: half of what it had when queued.
  EXPECT_EQ(d.wake_at, t0 + 50000us);
  clock_.Advance(20000us);
  const uint64_t b = Add(f, BatchItem(2));  // company, without a deadline: runs with it
  clock_.Advance(30000us);
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), (std::vector<uint64_t>{a, b}));

  // Measured: the deadline less the run time of a batch of that size and a sixteenth of the
  // budget for the way back (6.25 ms of 100).
  BatchFormer g(Batching(8, /*delay_us=*/200000));
  g.RecordExecution(1, 2000us);
  const Clock::time_point t1 = clock_.Now();
  auto c = BatchItem(3);
  c->request->deadline = t1 + 100000us;
  const uint64_t sc = Add(g, std::move(c));
  d = g.NextDecision(clock_.Now(), false);
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(d.wake_at, t1 + 91750us);
  clock_.Advance(91000us);
  EXPECT_TRUE(g.NextDecision(clock_.Now(), false).batch.empty());
  clock_.Advance(750us);
  EXPECT_EQ(Seqs(g.NextDecision(clock_.Now(), false)), std::vector<uint64_t>{sc});
}

// Probe 50: the lead's latest start was reckoned with its own size, so a batch of seven ran
// late for the lead's deadline. Each member's is reckoned with the batch's final size.
TEST_F(BatchFormerTest, ADeadlineIsReckonedWithTheRunTimeOfTheWholeBatch) {
  BatchFormer f(Batching(8, /*delay_us=*/200000));
  f.RecordExecution(1, 1000us);
  f.RecordExecution(4, 40000us);
  const Clock::time_point t0 = clock_.Now();
  auto lead = BatchItem(1);
  lead->request->deadline = t0 + 160000us;  // a sixteenth: 10 ms
  Add(f, std::move(lead));
  for (int i = 0; i < 3; ++i) Add(f, BatchItem(2 + i));  // no deadlines: company
  auto d = f.NextDecision(clock_.Now(), false);
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(d.wake_at, t0 + 110000us);  // 160 - 40 (a batch of 4) - 10, not 160 - 1 - 10
  clock_.Advance(110000us);
  EXPECT_EQ(f.NextDecision(clock_.Now(), false).batch.size(), 4u);
}

// Probe 50: a request of another shape than the head's, with a deadline, waited it out on an
// idle instance and got 504. It runs, with its own batch, when its deadline allows no more.
TEST_F(BatchFormerTest, ADueRequestOfAnotherShapeRunsWithItsOwnBatch) {
  BatchFormer f(Batching(8, /*delay_us=*/1000000));
  const Clock::time_point t0 = clock_.Now();
  Add(f, BatchItem(1, 1, /*width=*/4));  // the head: waits for company
  auto other = BatchItem(2, 1, /*width=*/3);
  other->request->deadline = t0 + 300000us;
  const uint64_t b = Add(f, std::move(other));
  const uint64_t c = Add(f, BatchItem(3, 1, /*width=*/3));  // its shape's company
  auto d = f.NextDecision(clock_.Now(), false);
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(d.wake_at, t0 + 150000us);  // nothing measured: half its budget
  clock_.Advance(150000us);
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), (std::vector<uint64_t>{b, c}));
  EXPECT_EQ(f.size(), 1u);  // the head goes on waiting, for its queue delay
  EXPECT_TRUE(f.NextDecision(clock_.Now(), false).batch.empty());
  clock_.Advance(850000us);
  EXPECT_EQ(f.NextDecision(clock_.Now(), false).batch.size(), 1u);
}

// Probe 51: a run measured after a request was queued left the wake-up at the older, later
// latest start, and the request missed its deadline.
TEST_F(BatchFormerTest, AMeasurementAfterQueueingBringsADueRequestsStartForward) {
  BatchFormer f(Batching(8, /*delay_us=*/1000000));
  const Clock::time_point t0 = clock_.Now();
  Add(f, BatchItem(1, 1, /*width=*/4));  // the head: waits for company
  auto other = BatchItem(2, 1, /*width=*/3);
  other->request->deadline = t0 + 1000000us;
  const uint64_t b = Add(f, std::move(other));
  EXPECT_EQ(f.NextDecision(clock_.Now(), false).wake_at, t0 + 500000us);  // half its budget
  clock_.Advance(10000us);
  f.RecordExecution(1, 600000us);  // runs are slow: it must start by 1000 - 600 - 62.5 ms
  auto d = f.NextDecision(clock_.Now(), false);
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(d.wake_at, t0 + 337500us);
  clock_.Advance(327500us);
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), std::vector<uint64_t>{b});
}

// Under preserve_ordering a due request of another shape does not run ahead: its answer would
// wait for the head's anyway (probe 51), and batches are formed strictly in order.
TEST_F(BatchFormerTest, UnderPreserveOrderingADueRequestDoesNotRunAhead) {
  BatchingPolicy p = Batching(8, /*delay_us=*/1000000);
  p.preserve_ordering = true;
  BatchFormer f(p);
  const Clock::time_point t0 = clock_.Now();
  const uint64_t a = Add(f, BatchItem(1, 1, /*width=*/4));
  auto other = BatchItem(2, 1, /*width=*/3);
  other->request->deadline = t0 + 300000us;
  Add(f, std::move(other));
  clock_.Advance(150000us);
  EXPECT_TRUE(f.NextDecision(clock_.Now(), false).batch.empty());
  clock_.Advance(850000us);
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), std::vector<uint64_t>{a});
}

TEST_F(BatchFormerTest, ABatchRunsInTimeForARejectingQueueTimeout) {
  BatchingPolicy p = Batching(8, /*delay_us=*/1000000);
  p.default_queue_policy.default_timeout_us = 100;
  BatchFormer f(p);
  const Clock::time_point t0 = clock_.Now();
  const uint64_t a = Add(f, BatchItem(1));
  auto d = f.NextDecision(clock_.Now(), false);
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(d.wake_at, t0 + 50us);  // not the 1 s delay, nor the timeout itself
  clock_.Advance(50us);
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), std::vector<uint64_t>{a});
}

TEST_F(BatchFormerTest, DelayTimeoutMovesARequestBehindItsLevel) {
  BatchingPolicy p;  // one request per execution
  p.default_queue_policy.default_timeout_us = 100;
  p.default_queue_policy.timeout_action = QueuePolicy::TimeoutAction::kDelay;
  BatchFormer f(p);
  uint64_t a = Add(f, BatchItem(1));
  clock_.Advance(60us);
  uint64_t b = Add(f, BatchItem(2));
  clock_.Advance(60us);  // a waited 120 us (timed out), b 60 us
  uint64_t c = Add(f, BatchItem(3));
  auto d = f.NextDecision(clock_.Now(), false);
  EXPECT_TRUE(d.rejected.empty());
  EXPECT_EQ(Seqs(d), std::vector<uint64_t>{b});
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), std::vector<uint64_t>{c});
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), std::vector<uint64_t>{a});
}

TEST_F(BatchFormerTest, RequestTimeoutOverridesOnlyWhenAllowed) {
  for (bool allow : {false, true}) {
    BatchingPolicy p = Batching(8, /*delay_us=*/1000000);
    p.default_queue_policy.default_timeout_us = 1000;
    p.default_queue_policy.allow_timeout_override = allow;
    BatchFormer f(p);
    auto r = BatchItem(1);
    r->request->timeout_us = 50;  // counted from receipt
    r->request->received_at = clock_.Now() - 20us;
    Add(f, std::move(r));
    clock_.Advance(30us);
    auto d = f.NextDecision(clock_.Now(), false);
    EXPECT_EQ(d.rejected.size(), allow ? 1u : 0u) << "allow_timeout_override " << allow;
    if (allow) {
      EXPECT_EQ(d.rejected[0].second.code(), StatusCode::kDeadlineExceeded);
    }
  }
}

TEST_F(BatchFormerTest, DeadlinePassedIsAnsweredEvenWithDelayAction) {
  BatchingPolicy p = Batching(8, /*delay_us=*/1000);
  p.default_queue_policy.timeout_action = QueuePolicy::TimeoutAction::kDelay;
  BatchFormer f(p);
  auto r = BatchItem(1);
  r->request->deadline = clock_.Now() + 10us;
  Add(f, std::move(r));
  uint64_t keep = Add(f, BatchItem(2));
  clock_.Advance(10us);
  auto d = f.NextDecision(clock_.Now(), false);
  ASSERT_EQ(d.rejected.size(), 1u);
  EXPECT_EQ(d.rejected[0].second.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(d.rejected[0].first->seq, 1u);
  clock_.Advance(1000us);
  EXPECT_EQ(Seqs(f.NextDecision(clock_.Now(), false)), std::vector<uint64_t>{keep});
}

TEST_F(BatchFormerTest, CancelledRequestsAreRemovedOrSkipped) {
  BatchFormer f(Batching(8));
  auto token1 = std::make_shared<CancellationToken>();
  auto token2 = std::make_shared<CancellationToken>();
  auto a = BatchItem(1);
  a->request->cancellation = token1;
  uint64_t sa = Add(f, std::move(a));
  auto b = BatchItem(2);
  b->request->cancellation = token2;
  Add(f, std::move(b));
  uint64_t sc = Add(f, BatchItem(3));
  // Removal by seq (what the OnCancel callback does) frees the slot at once.
  auto removed = f.Remove(sa);
  ASSERT_NE(removed, nullptr);
  EXPECT_EQ(f.Remove(sa), nullptr);
  EXPECT_EQ(f.size(), 2u);
  // A cancelled token still queued is found lazily and answered kCancelled.
  token2->Cancel();
  auto d = f.NextDecision(clock_.Now(), false);
  ASSERT_EQ(d.rejected.size(), 1u);
  EXPECT_EQ(d.rejected[0].second.code(), StatusCode::kCancelled);
  EXPECT_EQ(Seqs(d), std::vector<uint64_t>{sc});
}

TEST_F(BatchFormerTest, AdaptiveModeRunsAtOnceUnderLightLoad) {
  BatchingPolicy p = Batching(8);
  p.target_p99_us = 5000;
  BatchFormer f(p);
  Add(f, BatchItem(1));  // no arrival history: run now
  EXPECT_EQ(f.NextDecision(clock_.Now(), false).batch.size(), 1u);
  clock_.Advance(20ms);  // one arrival every 20 ms, far beyond the 5 ms target
  Add(f, BatchItem(2));
  EXPECT_EQ(f.NextDecision(clock_.Now(), false).batch.size(), 1u);
}

TEST_F(BatchFormerTest, AdaptiveModeWaitsUnderHeavyLoadWithinTheTarget) {
  BatchingPolicy p = Batching(4);
  p.target_p99_us = 5000;
  BatchFormer f(p);
  f.RecordExecution(2, 1000us);
  // Arrivals every 100 us.
  for (int i = 0; i < 3; ++i) {
    Add(f, BatchItem(i));
    auto d = f.NextDecision(clock_.Now(), false);
    if (i == 0) {
      // Only one arrival seen: no rate yet, so the first one ran alone.
      EXPECT_EQ(d.batch.size(), 1u);
    } else {
      EXPECT_TRUE(d.batch.empty()) << i;  // another arrival is due well within the slack
      EXPECT_LE(d.wake_at, clock_.Now() + 100us);
    }
    clock_.Advance(100us);
  }
  Add(f, BatchItem(3));
  Add(f, BatchItem(4));  // 4 = max_batch_size: full, runs now
  EXPECT_EQ(f.NextDecision(clock_.Now(), false).batch.size(), 4u);
}

TEST_F(BatchFormerTest, AdaptiveModeWaitsOneExpectedGapThenRuns) {
  BatchingPolicy p = Batching(8);
  p.target_p99_us = 1000;
  BatchFormer f(p);
  f.RecordExecution(1, 300us);  // arrivals every 100 us outpace 300 us runs: heavy load
  Add(f, BatchItem(0));
  f.NextDecision(clock_.Now(), false);  // runs alone (no rate yet)
  clock_.Advance(100us);
  const Clock::time_point t1 = clock_.Now();
  Add(f, BatchItem(1));
  auto d = f.NextDecision(clock_.Now(), false);
  ASSERT_TRUE(d.batch.empty());
  EXPECT_EQ(d.wake_at, t1 + 100us);  // the next arrival is expected then
  clock_.Advance(100us);             // it did not come: waiting longer is a guess; run
  EXPECT_EQ(f.NextDecision(clock_.Now(), false).batch.size(), 1u);
}

TEST_F(BatchFormerTest, AdaptiveModeRunsWhenTheSlackIsSpent) {
  BatchingPolicy p = Batching(8);
  p.target_p99_us = 1000;
  BatchFormer f(p);
  f.RecordExecution(1, 300us);  // service(3) extrapolated: 900 us
  Add(f, BatchItem(0));
  f.NextDecision(clock_.Now(), false);
  clock_.Advance(100us);  // t1
  Add(f, BatchItem(1));
  ASSERT_TRUE(f.NextDecision(clock_.Now(), false).batch.empty());
  clock_.Advance(100us);
  Add(f, BatchItem(2));
  // A third request would make the batch take 900 us: it must start by t1 + 1000 - 900 = now.
  EXPECT_EQ(f.NextDecision(clock_.Now(), false).batch.size(), 2u);
}

TEST_F(BatchFormerTest, AdaptiveModeNeverWaitsWhenTheInstanceKeepsUp) {
  BatchingPolicy p = Batching(8);
  p.target_p99_us = 100000;
  BatchFormer f(p);
  f.RecordExecution(1, 50us);
  // A closed loop of one client: each request arrives after the previous answer (gap > run).
  for (int i = 0; i < 5; ++i) {
    Add(f, BatchItem(i));
    EXPECT_EQ(f.NextDecision(clock_.Now(), false).batch.size(), 1u) << i;
    clock_.Advance(80us);
  }
}

TEST_F(BatchFormerTest, AdaptiveDelayIsBoundedByMaxQueueDelay) {
  BatchingPolicy p = Batching(8, /*delay_us=*/50);
  p.target_p99_us = 100000;
  BatchFormer f(p);
  f.RecordExecution(1, 40us);  // arrivals every 10 us: heavy load
  Add(f, BatchItem(0));
  f.NextDecision(clock_.Now(), false);
  clock_.Advance(10us);
  const Clock::time_point t1 = clock_.Now();
  Add(f, BatchItem(1));
  auto d = f.NextDecision(clock_.Now(), false);
  ASSERT_TRUE(d.batch.empty());
  EXPECT_EQ(d.wake_at, t1 + 10us);  // the expected gap
  clock_.Advance(40us);
  Add(f, BatchItem(2));
  clock_.Advance(10us);
  EXPECT_EQ(f.NextDecision(clock_.Now(), false).batch.size(), 2u);  // t1 + 50 us
}

TEST(AdaptiveDelayTest, ServiceTimeIsMeasuredOrExtrapolated) {
  AdaptiveDelay a(std::chrono::milliseconds(5), 8);
  EXPECT_EQ(a.ServiceTime(3), Clock::duration::zero());
  a.RecordExecution(2, std::chrono::microseconds(200));
  EXPECT_EQ(a.ServiceTime(2), std::chrono::microseconds(200));
  EXPECT_EQ(a.ServiceTime(4), std::chrono::microseconds(400));  // linear from size 2
  EXPECT_EQ(a.ServiceTime(1), std::chrono::microseconds(200));  // from the next larger size
  a.RecordExecution(2, std::chrono::microseconds(300));         // EWMA, alpha 0.2
  EXPECT_EQ(a.ServiceTime(2), std::chrono::microseconds(220));
}

TEST(AdaptiveDelayTest, ExpectedGapGrowsWithSilence) {
  AdaptiveDelay a(std::chrono::milliseconds(5), 8);
  const Clock::time_point t0{std::chrono::hours(1)};
  EXPECT_FALSE(a.ExpectedGap(t0).has_value());
  a.RecordArrival(t0);
  a.RecordArrival(t0 + std::chrono::microseconds(100));
  EXPECT_EQ(*a.ExpectedGap(t0 + std::chrono::microseconds(150)), std::chrono::microseconds(100));
  EXPECT_EQ(*a.ExpectedGap(t0 + std::chrono::microseconds(400)), std::chrono::microseconds(300));
}

}  // namespace
}  // namespace harrier
