#include "scheduler/batch_former.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "scheduler/batch_tensors.h"

namespace harrier {
namespace {

bool IsCancelled(const ScheduledRequest& r) {
  return r.request->cancellation != nullptr && r.request->cancellation->cancelled();
}

// A config's microseconds (max_queue_delay, default_timeout, target p99: uint64 fields a config
// may set to anything) as a duration that a time point can take without overflowing: at most
// kLongestUs, about 116 days, which waits as long as "forever" does.
constexpr uint64_t kLongestUs = uint64_t{10'000'000'000'000};

Clock::duration Us(uint64_t us) {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::microseconds(static_cast<int64_t>(std::min(us, kLongestUs))));
}

}  // namespace

BatchFormer::BatchFormer(BatchingPolicy policy)
    : policy_(std::move(policy)),
      max_preferred_(policy_.preferred_batch_sizes.empty()
                         ? 0
                         : *std::max_element(policy_.preferred_batch_sizes.begin(),
                                             policy_.preferred_batch_sizes.end())),
      adaptive_(Us(policy_.target_p99_us), std::max<int64_t>(1, policy_.max_batch_size)) {
  spare_nodes_.reserve(kSpareNodes);
  const uint64_t levels = std::max<uint64_t>(1, policy_.priority_levels);
  levels_.resize(levels);
  for (uint64_t i = 0; i < levels; ++i) {
    auto it = policy_.priority_queue_policy.find(i + 1);
    levels_[i].policy =
        it != policy_.priority_queue_policy.end() ? it->second : policy_.default_queue_policy;
  }
}

Status BatchFormer::Enqueue(std::unique_ptr<ScheduledRequest>& request, Clock::time_point now) {
  ScheduledRequest& r = *request;
  const InferenceRequest& req = *r.request;
  const uint64_t level_count = levels_.size();
  uint64_t default_level = policy_.default_priority_level;
  if (default_level == 0 || default_level > level_count) default_level = level_count;
  uint64_t priority = req.priority;
  if (priority == 0 || priority > level_count) priority = default_level;
  r.level = static_cast<size_t>(priority - 1);
  Level& level = levels_[r.level];
  if (level.policy.max_queue_size > 0 && level.size() >= level.policy.max_queue_size) {
    // Triton's answer and wording (503 / UNAVAILABLE), which its clients match on.
    return Unavailable("Exceeds maximum queue size: the queue of priority level " +
                       std::to_string(priority) + " is full (max_queue_size " +
                       std::to_string(level.policy.max_queue_size) + ")");
  }
  r.batch_size = 1;
  if (policy_.max_batch_size > 0 && !req.inputs.empty() && !req.inputs[0].shape.empty())
    r.batch_size = std::max<int64_t>(1, req.inputs[0].shape[0]);
  r.enqueued_at = now;
  const Clock::time_point received = req.received_at == Clock::time_point{} ? now : req.received_at;
  r.deadline = req.deadline;
  uint64_t timeout_us = level.policy.default_timeout_us;
  if (level.policy.allow_timeout_override && req.timeout_us > 0 &&
      (timeout_us == 0 || req.timeout_us < timeout_us)) {
    timeout_us = req.timeout_us;
  }
  r.policy_timeout = timeout_us > 0 ? received + Us(timeout_us) : Clock::time_point::max();
  r.delay_on_timeout = level.policy.timeout_action == QueuePolicy::TimeoutAction::kDelay;
  next_expiry_ = std::min({next_expiry_, r.deadline, r.policy_timeout});
  if (batching() && !policy_.preserve_ordering)
    next_latest_start_ = std::min(next_latest_start_, LatestStart(r, r.batch_size));
  adaptive_.RecordArrival(now);
  const uint64_t seq = r.seq;
  Insert(&level.pending, seq, std::move(request));
  ++size_;
  return Status::Ok();
}

void BatchFormer::Insert(Queue* queue, uint64_t seq, std::unique_ptr<ScheduledRequest> r) {
  if (spare_nodes_.empty()) {
    queue->emplace(seq, std::move(r));
    return;
  }
  Queue::node_type node = std::move(spare_nodes_.back());
  spare_nodes_.pop_back();
  node.key() = seq;
  node.mapped() = std::move(r);
  queue->insert(std::move(node));
}

std::unique_ptr<ScheduledRequest> BatchFormer::Extract(Queue* queue, Queue::iterator it) {
  Queue::node_type node = queue->extract(it);
  std::unique_ptr<ScheduledRequest> r = std::move(node.mapped());
  if (spare_nodes_.size() < kSpareNodes) spare_nodes_.push_back(std::move(node));
  return r;
}

std::unique_ptr<ScheduledRequest> BatchFormer::Remove(uint64_t seq) {
  for (Level& level : levels_) {
    for (auto* queue : {&level.pending, &level.delayed}) {
      auto it = queue->find(seq);
      if (it == queue->end()) continue;
      std::unique_ptr<ScheduledRequest> r = Extract(queue, it);
      --size_;
      return r;
    }
  }
  return nullptr;
}

std::unique_ptr<ScheduledRequest> BatchFormer::Take(const ScheduledRequest* r) {
  Level& level = levels_[r->level];
  for (auto* queue : {&level.pending, &level.delayed}) {
    auto it = queue->find(r->seq);
    if (it == queue->end() || it->second.get() != r) continue;
    std::unique_ptr<ScheduledRequest> taken = Extract(queue, it);
    --size_;
    return taken;
  }
  return nullptr;
}

void BatchFormer::Sweep(Clock::time_point now, Decision* decision) {
  if (now < next_expiry_) return;
  next_expiry_ = Clock::time_point::max();
  for (Level& level : levels_) {
    for (auto it = level.pending.begin(); it != level.pending.end();) {
      ScheduledRequest& r = *it->second;
      if (r.deadline <= now || (r.policy_timeout <= now && !r.delay_on_timeout)) {
        const bool deadline = r.deadline <= now;
        const auto next = std::next(it);
        decision->rejected.emplace_back(
            Extract(&level.pending, it),
            DeadlineExceeded(deadline ? "the request's deadline passed while it was queued"
                                      : "the request timed out in the queue"));
        it = next;
        --size_;
      } else if (r.policy_timeout <= now) {
        r.policy_timeout = Clock::time_point::max();
        next_expiry_ = std::min(next_expiry_, r.deadline);
        const auto next = std::next(it);
        level.delayed.insert(level.pending.extract(it));  // the same node, moved
        it = next;
      } else {
        next_expiry_ = std::min({next_expiry_, r.deadline, r.policy_timeout});
        ++it;
      }
    }
    for (auto it = level.delayed.begin(); it != level.delayed.end();) {
      if (it->second->deadline <= now) {
        const auto next = std::next(it);
        decision->rejected.emplace_back(
            Extract(&level.delayed, it),
            DeadlineExceeded("the request's deadline passed while it was queued"));
        it = next;
        --size_;
      } else {
        next_expiry_ = std::min(next_expiry_, it->second->deadline);
        ++it;
      }
    }
  }
}

ScheduledRequest* BatchFormer::Head(Decision* decision) {
  for (Level& level : levels_) {
    for (auto* queue : {&level.pending, &level.delayed}) {
      while (!queue->empty()) {
        auto it = queue->begin();
        if (!IsCancelled(*it->second)) return it->second.get();
        decision->rejected.emplace_back(Extract(queue, it),
                                        Cancelled("the request was cancelled while queued"));
        --size_;
      }
    }
  }
  return nullptr;
}

BatchFormer::Decision BatchFormer::NextDecision(Clock::time_point now, bool flush) {
  Decision d;
  NextDecision(now, flush, &d);
  return d;
}

void BatchFormer::NextDecision(Clock::time_point now, bool flush, Decision* decision) {
  Decision& d = *decision;
  d.rejected.clear();
  d.batch.clear();
  d.wake_at = Clock::time_point::max();
  Sweep(now, &d);
  ScheduledRequest* head = Head(&d);
  if (head == nullptr) return;
  if (!batching()) {
    d.batch.push_back(Take(head));
    return;
  }

  cancelled_.clear();
  Formed& batch = formed_[0];
  Form(head, /*collect_cancelled=*/true, &batch);
  for (ScheduledRequest* r : cancelled_)
    d.rejected.emplace_back(Take(r), Cancelled("the request was cancelled while queued"));

  // A request queued behind the batch with more items than fit: waiting cannot grow the batch
  // past it, so it runs now, as Triton's batcher sends its pending batch then.
  size_t take = flush ? batch.members.size() : Ready(batch, now, batch.size_passed_over);
  if (take == 0 && !flush && batch.other_lead != nullptr) {
    // The head's batch waits; another shape's may not. A full batch of [1,4] requests waited the
    // whole queue delay behind one [1,3] request on an idle instance (probe 30). The batch the
    // first request of another shape leads runs now when it is ready by the same rules (full, a
    // preferred size); the head's goes on waiting for company. Only the first other shape is
    // looked at: a decision stays one pass or two over the look-ahead.
    Formed& other = formed_[1];
    Form(batch.other_lead, /*collect_cancelled=*/false, &other);
    // Under preserve_ordering a deadline does not send it ahead: its answers would wait for the
    // head's anyway (the due-request path below is off too).
    if (policy_.preserve_ordering) other.latest_start = Clock::time_point::max();
    const size_t other_take = Ready(other, now, /*size_passed_over=*/false);
    if (other_take > 0) {
      for (size_t i = 0; i < other_take; ++i) d.batch.push_back(Take(other.members[i]));
      return;
    }
  }
  // Not under preserve_ordering: its answer would wait for the head's anyway (probe 51).
  if (take == 0 && !flush && !policy_.preserve_ordering && now >= next_latest_start_) {
    // A request outside the head's batch whose deadline allows no more waiting runs now, with
    // the requests its batch takes (probe 50: one of another shape waited out its deadline on
    // an idle instance and got 504).
    if (ScheduledRequest* due = DueRequest(now)) {
      Formed& other = formed_[1];
      Form(due, /*collect_cancelled=*/false, &other);
      for (ScheduledRequest* m : other.members) d.batch.push_back(Take(m));
      return;
    }
  }
  if (take == 0) {
    d.wake_at = std::min({RunAt(batch, now), next_expiry_, next_latest_start_});
    return;
  }
  for (size_t i = 0; i < take; ++i) d.batch.push_back(Take(batch.members[i]));
}

ScheduledRequest* BatchFormer::DueRequest(Clock::time_point now) {
  ScheduledRequest* due = nullptr;
  next_latest_start_ = Clock::time_point::max();
  for (Level& level : levels_) {
    for (auto* queue : {&level.pending, &level.delayed}) {
      for (auto& [seq, owned] : *queue) {
        ScheduledRequest* r = owned.get();
        if (IsCancelled(*r)) continue;
        const Clock::time_point latest = LatestStart(*r, r->batch_size);
        if (due == nullptr && latest <= now) {
          due = r;  // the most urgent level's oldest first
        } else {
          next_latest_start_ = std::min(next_latest_start_, latest);
        }
      }
    }
  }
  return due;
}

void BatchFormer::Form(ScheduledRequest* lead, bool collect_cancelled, Formed* out) {
  const auto& preferred = policy_.preferred_batch_sizes;
  auto is_preferred = [&](int64_t n) {
    return std::find(preferred.begin(), preferred.end(), n) != preferred.end();
  };
  out->members.assign(1, lead);
  out->total = lead->batch_size;
  out->best_preferred_count = is_preferred(out->total) ? 1 : 0;
  out->oldest = lead->enqueued_at;
  out->size_passed_over = false;
  out->other_lead = nullptr;
  size_t looked = 0;
  bool done = out->total >= policy_.max_batch_size;
  for (Level& level : levels_) {
    for (auto* queue : {&level.pending, &level.delayed}) {
      for (auto& [seq, owned] : *queue) {
        if (done) break;
        ScheduledRequest* r = owned.get();
        if (r == lead) continue;
        if (++looked > policy_.max_lookahead) {
          done = true;
          break;
        }
        if (IsCancelled(*r)) {
          if (collect_cancelled) cancelled_.push_back(r);
          continue;
        }
        const bool compatible = BatchCompatible(*lead, *r);
        if (!compatible || out->total + r->batch_size > policy_.max_batch_size) {
          if (compatible) {
            out->size_passed_over = true;
          } else if (out->other_lead == nullptr) {
            out->other_lead = r;
          }
          if (policy_.preserve_ordering) done = true;
          continue;
        }
        out->members.push_back(r);
        out->total += r->batch_size;
        out->oldest = std::min(out->oldest, r->enqueued_at);
        if (is_preferred(out->total)) out->best_preferred_count = out->members.size();
        if (out->total >= policy_.max_batch_size) done = true;
      }
    }
  }
  // Each member's latest start for the batch's run time at its final size (probe 50: the
  // lead's own size understated a batch of seven's run time 4x, and its deadline was missed).
  out->latest_start = Clock::time_point::max();
  for (const ScheduledRequest* m : out->members)
    out->latest_start = std::min(out->latest_start, LatestStart(*m, out->total));
}

Clock::time_point BatchFormer::RunAt(const Formed& batch, Clock::time_point now) {
  Clock::time_point run_at = batch.oldest + Us(policy_.max_queue_delay_us);
  if (policy_.target_p99_us > 0) {
    const Clock::time_point adaptive = adaptive_.WaitUntil(now, batch.oldest, batch.total);
    run_at = policy_.max_queue_delay_us > 0 ? std::min(run_at, adaptive) : adaptive;
  }
  // Waiting for company never costs a member its deadline: a request whose deadline was
  // shorter than the queue delay waited it out on an idle model and got 504 (probe 49).
  return std::min(run_at, batch.latest_start);
}

Clock::time_point BatchFormer::LatestStart(const ScheduledRequest& r, int64_t batch_items) const {
  Clock::time_point due = r.deadline;
  if (!r.delay_on_timeout) due = std::min(due, r.policy_timeout);
  if (due == Clock::time_point::max()) return due;
  const Clock::duration budget = due - r.enqueued_at;
  Clock::duration run = adaptive_.ServiceTime(batch_items);
  if (run <= Clock::duration::zero()) return r.enqueued_at + budget / 2;
  // And a sixteenth of its budget for the answer's way back: a client's deadline started before
  // the request reached the server (the same share as the gRPC deadline's, docs/grpc.md).
  return due - run - budget / 16;
}

size_t BatchFormer::Ready(const Formed& batch, Clock::time_point now, bool run_now) {
  if (run_now || batch.total >= policy_.max_batch_size || now >= RunAt(batch, now)) {
    return batch.members.size();
  }
  if (batch.best_preferred_count > 0) return batch.best_preferred_count;
  // Past the largest preferred size without hitting one exactly.
  if (max_preferred_ > 0 && batch.total >= max_preferred_) return batch.members.size();
  return 0;
}

std::vector<std::pair<std::unique_ptr<ScheduledRequest>, Status>> BatchFormer::Expire(
    Clock::time_point now) {
  Decision d;
  Sweep(now, &d);
  return std::move(d.rejected);
}

void BatchFormer::RecordExecution(int64_t batch_size, Clock::duration run_time) {
  adaptive_.RecordExecution(batch_size, run_time);
  // The estimate moved, and with it the queued requests' latest starts: the next decision
  // looks again (probe 51: a slower run measured after a request was queued left the wake-up
  // at its older, later time). Only while some request with a deadline may be queued.
  if (next_latest_start_ != Clock::time_point::max()) next_latest_start_ = Clock::time_point();
}

}  // namespace harrier
