// BatchingPolicy: what a ModelScheduler does with queued requests, in Triton's terms
// (`dynamic_batching` and its queue policies), free of protobuf. Built from the completed model
// config by the model loader (src/lifecycle/); documented for users in docs/scheduling.md.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace harrier {

struct QueuePolicy {
  enum class TimeoutAction { kReject, kDelay };
  // What happens when a request waited longer than its timeout: kReject answers it
  // kDeadlineExceeded; kDelay keeps it but serves it after the requests of its level that have
  // not timed out.
  TimeoutAction timeout_action = TimeoutAction::kReject;
  // Queue timeout counted from the request's receipt; 0 = none.
  uint64_t default_timeout_us = 0;
  // Whether a request's own `timeout` parameter replaces default_timeout_us (when it is shorter,
  // or when there is no default); timeout_action applies to it as to the default.
  bool allow_timeout_override = false;
  // Requests queued at this level at most; one more is refused with kResourceExhausted.
  // 0 = unbounded.
  uint32_t max_queue_size = 0;
};

struct BatchingPolicy {
  // Merge compatible queued requests into one execution. False: one request per execution
  // (priorities, queue policies, deadlines and cancellation still apply).
  bool dynamic_batching = false;
  // The model's max_batch_size: 0 = requests have no batch dim (never merged).
  int64_t max_batch_size = 0;
  // Batch sizes to send as soon as they can be formed; empty = only max_batch_size.
  std::vector<int64_t> preferred_batch_sizes;
  // How long the oldest request may wait for a batch to fill; 0 = never wait.
  uint64_t max_queue_delay_us = 0;
  // Answer requests in arrival order (batches are formed strictly in order, and a response
  // waits for every earlier request's answer).
  bool preserve_ordering = false;
  // Number of priority levels (1 = most urgent); 0 = one level.
  uint64_t priority_levels = 0;
  // The level of a request with priority 0 or one beyond priority_levels; 0 = the lowest level.
  uint64_t default_priority_level = 0;
  QueuePolicy default_queue_policy;
  std::map<uint64_t, QueuePolicy> priority_queue_policy;  // by level (1-based)
  // Adaptive mode (parameter harrier.batching.target_p99_us): when > 0 the queue delay is derived
  // from the observed service time and arrival rate, bounded by this latency target (and by
  // max_queue_delay_us when that is > 0). 0 = off.
  uint64_t target_p99_us = 0;
  // How many queued requests batch formation looks at beyond the first (bounds the work per
  // decision when many incompatible requests are queued).
  size_t max_lookahead = 1024;
};

}  // namespace harrier
