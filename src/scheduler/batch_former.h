// BatchFormer: a model's queued requests and the decision what to run next — the dynamic
// batcher's logic, separate from threads and clocks so that it is tested deterministically.
//
// Requests wait in one queue per priority level (level 0 = most urgent); inside a level, in
// arrival order, with requests whose DELAY-policy timeout expired moved behind the others of
// that level. NextDecision(now) first answers what may not run (deadline passed, REJECT timeout
// passed, cancelled), then either returns a batch to run now or the time to decide again:
//   - without dynamic batching, the first request alone;
//   - with it, the first request plus the following compatible ones (same input names, dtypes,
//     non-batch dims and outputs; priority order; items summing to at most max_batch_size).
//     The batch runs now when it is full, when flushing (shutdown), when the oldest member has
//     waited the queue delay, when a compatible request queued behind it has more items than
//     fit, or — cut to that size — when a preferred batch size is reached. Otherwise it waits
//     until the queue delay ends (adaptive mode: see adaptive_delay.h), and meanwhile the batch
//     of the first request of another shape runs if it is ready by the same rules.
//
// Thread safety: none; the ModelScheduler calls it under its mutex.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "harrier/clock.h"
#include "harrier/status.h"
#include "scheduler/adaptive_delay.h"
#include "scheduler/batching_policy.h"
#include "scheduler/scheduled_request.h"

namespace harrier {

class BatchFormer {
 public:
  explicit BatchFormer(BatchingPolicy policy);

  // Fills the request's scheduling fields (seq must be set by the caller; level, batch_size,
  // enqueued_at, deadline, policy timeout) and queues it.
  // kResourceExhausted when its level holds max_queue_size requests; the request is then left
  // with the caller (`request` is not moved from).
  Status Enqueue(std::unique_ptr<ScheduledRequest>& request, Clock::time_point now);

  // Takes a queued request out (its token was cancelled); null when it is not queued.
  std::unique_ptr<ScheduledRequest> Remove(uint64_t seq);

  struct Decision {
    // Requests to answer now without running them, with the answer.
    std::vector<std::pair<std::unique_ptr<ScheduledRequest>, Status>> rejected;
    // Requests to run now as one execution; empty = nothing to run now.
    std::vector<std::unique_ptr<ScheduledRequest>> batch;
    // When `batch` is empty and requests are queued: decide again at this time (or on the next
    // arrival). max() = only on the next arrival.
    Clock::time_point wake_at = Clock::time_point::max();
  };
  // `flush`: run whatever is queued without waiting for a batch to fill (shutdown).
  Decision NextDecision(Clock::time_point now, bool flush);
  // The same, into `decision` (cleared first), so that a worker reuses its vectors' capacity.
  void NextDecision(Clock::time_point now, bool flush, Decision* decision);

  // Only the first step of NextDecision(): answers what expired and applies DELAY. For a timer
  // that enforces deadlines while every instance is busy.
  std::vector<std::pair<std::unique_ptr<ScheduledRequest>, Status>> Expire(Clock::time_point now);
  // No queued deadline or timeout ends before this (it may be earlier than the real next one).
  Clock::time_point next_expiry() const { return next_expiry_; }

  // Feeds the adaptive delay's service time estimate.
  void RecordExecution(int64_t batch_size, Clock::duration run_time);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const BatchingPolicy& policy() const { return policy_; }

 private:
  using Queue = std::map<uint64_t, std::unique_ptr<ScheduledRequest>>;
  struct Level {
    QueuePolicy policy;
    Queue pending;  // by seq = arrival order
    Queue delayed;  // DELAY timeout passed
    size_t size() const { return pending.size() + delayed.size(); }
  };

  // Queues `r` under `seq`, in a recycled node when there is one.
  void Insert(Queue* queue, uint64_t seq, std::unique_ptr<ScheduledRequest> r);
  // Takes the request at `it` out of `queue` (which `it` must belong to) and keeps its node.
  std::unique_ptr<ScheduledRequest> Extract(Queue* queue, Queue::iterator it);

  // Answers expired requests, moves DELAY-timed-out ones, recomputes next_expiry_.
  void Sweep(Clock::time_point now, Decision* decision);
  // Moves cancelled requests at the heads of the queues into `decision->rejected`.
  ScheduledRequest* Head(Decision* decision);
  std::unique_ptr<ScheduledRequest> Take(const ScheduledRequest* r);
  bool batching() const { return policy_.dynamic_batching && policy_.max_batch_size > 0; }

  const BatchingPolicy policy_;
  const int64_t max_preferred_;  // largest preferred size; 0 = none
  std::vector<Level> levels_;
  size_t size_ = 0;
  // No queued deadline or policy timeout ends before this; the sweep is skipped until then.
  Clock::time_point next_expiry_ = Clock::time_point::max();
  // The earliest LatestStart of a queued request alone (may be stale: past a request that left,
  // which costs one wake-up); a decision past it looks for the request (DueRequest).
  Clock::time_point next_latest_start_ = Clock::time_point::max();
  AdaptiveDelay adaptive_;
  // Map nodes of requests that left the queue, reused by the next ones: a queued request costs no
  // allocation of its own (issue 10). At most kSpareNodes (reserved at construction).
  static constexpr size_t kSpareNodes = 64;
  std::vector<Queue::node_type> spare_nodes_;
  // A batch formed around a lead request (NextDecision): its members in queue order.
  struct Formed {
    std::vector<ScheduledRequest*> members;
    int64_t total = 0;                // items
    size_t best_preferred_count = 0;  // members up to the last preferred size reached; 0: none
    Clock::time_point oldest;
    // The latest a member with a deadline (or a queue-policy timeout that rejects) can start and
    // still be answered in time; max: none has one.
    Clock::time_point latest_start = Clock::time_point::max();
    bool size_passed_over = false;           // a compatible request had more items than fit
    ScheduledRequest* other_lead = nullptr;  // the first request of another shape passed over
  };
  // The batch `lead` leads: the queued requests compatible with it, in priority then arrival
  // order, up to max_batch_size items and max_lookahead requests looked at (formation stops at
  // the first that does not fit under preserve_ordering). Cancelled ones go to cancelled_ when
  // `collect_cancelled`.
  void Form(ScheduledRequest* lead, bool collect_cancelled, Formed* out);
  // The first queued request (most urgent level first, then arrival) whose LatestStart alone
  // has come, or null; recomputes next_latest_start_ over the others.
  ScheduledRequest* DueRequest(Clock::time_point now);
  // The latest `r` can start and still end by its deadline or queue-policy timeout: that time
  // less the expected run time of a batch of `batch_items` and a sixteenth of the time it had
  // when it was queued (before any measurement: half of that time). max: no deadline.
  Clock::time_point LatestStart(const ScheduledRequest& r, int64_t batch_items) const;
  // When `batch` runs at the latest: its oldest member's queue delay, or the adaptive delay,
  // and no later than its members' deadlines allow (Formed::latest_start).
  Clock::time_point RunAt(const Formed& batch, Clock::time_point now);
  // How many of `batch`'s members run now (0: it waits): all when `run_now`, when full or its
  // delay is over; up to the last preferred size reached; all past the largest preferred size.
  size_t Ready(const Formed& batch, Clock::time_point now, bool run_now);

  // Scratch for NextDecision(), kept to reuse its capacity: the head's batch and another
  // shape's.
  Formed formed_[2];
  std::vector<ScheduledRequest*> cancelled_;
};

}  // namespace harrier
