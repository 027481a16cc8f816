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

  const auto& preferred = policy_.preferred_batch_sizes;
  auto is_preferred = [&](int64_t n) {
    return std::find(preferred.begin(), preferred.end(), n) != preferred.end();
  };
  std::vector<ScheduledRequest*>& members = members_;
  std::vector<ScheduledRequest*>& cancelled = cancelled_;
  members.assign(1, head);
  cancelled.clear();
  int64_t total = head->batch_size;
  size_t best_preferred_count = is_preferred(total) ? 1 : 0;
  Clock::time_point oldest = head->enqueued_at;
  size_t looked = 0;
  bool done = total >= policy_.max_batch_size;
  // A request queued behind the batch that cannot join it (another shape, or more items than
  // fit): waiting cannot grow the batch past it, and held it back for the whole queue delay,
  // a full batch of another shape behind it included (probe 30). The batch runs now, as
  // Triton's dynamic batcher sends a pending batch when the next request cannot join it.
  bool passed_over = false;
  for (Level& level : levels_) {
    for (auto* queue : {&level.pending, &level.delayed}) {
      for (auto& [seq, owned] : *queue) {
        if (done) break;
        ScheduledRequest* r = owned.get();
        if (r == head) continue;
        if (++looked > policy_.max_lookahead) {
          done = true;
          break;
        }
        if (IsCancelled(*r)) {
          cancelled.push_back(r);
          continue;
        }
        if (total + r->batch_size > policy_.max_batch_size || !BatchCompatible(*head, *r)) {
          passed_over = true;
          if (policy_.preserve_ordering) done = true;
          continue;
        }
        members.push_back(r);
        total += r->batch_size;
        oldest = std::min(oldest, r->enqueued_at);
        if (is_preferred(total)) best_preferred_count = members.size();
        if (total >= policy_.max_batch_size) done = true;
      }
    }
  }
  for (ScheduledRequest* r : cancelled)
    d.rejected.emplace_back(Take(r), Cancelled("the request was cancelled while queued"));

  Clock::time_point run_at = oldest + Us(policy_.max_queue_delay_us);
  if (policy_.target_p99_us > 0) {
    const Clock::time_point adaptive = adaptive_.WaitUntil(now, oldest, total);
    run_at = policy_.max_queue_delay_us > 0 ? std::min(run_at, adaptive) : adaptive;
  }
  size_t take = 0;
  if (flush || passed_over || total >= policy_.max_batch_size || now >= run_at) {
    take = members.size();
  } else if (best_preferred_count > 0) {
    take = best_preferred_count;
  } else if (max_preferred_ > 0 && total >= max_preferred_) {
    take = members.size();  // past the largest preferred size without hitting one exactly
  }
  if (take == 0) {
    d.wake_at = std::min(run_at, next_expiry_);
    return;
  }
  for (size_t i = 0; i < take; ++i) d.batch.push_back(Take(members[i]));
}

std::vector<std::pair<std::unique_ptr<ScheduledRequest>, Status>> BatchFormer::Expire(
    Clock::time_point now) {
  Decision d;
  Sweep(now, &d);
  return std::move(d.rejected);
}

void BatchFormer::RecordExecution(int64_t batch_size, Clock::duration run_time) {
  adaptive_.RecordExecution(batch_size, run_time);
}

}  // namespace harrier
