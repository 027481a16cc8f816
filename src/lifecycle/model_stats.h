// ModelStats: a model version's counters for Triton's statistics extension.
//
// Lock-free: every field is a relaxed atomic, so recording costs a few atomic adds on the
// request path and a reader (GET .../stats) sees each counter consistently but not a snapshot
// across counters, which is what Triton's statistics promise too.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "harrier/model_manager.h"

namespace harrier {

class ModelStats {
 public:
  struct Durations {
    uint64_t queue_ns = 0;
    uint64_t compute_input_ns = 0;
    uint64_t compute_infer_ns = 0;
    uint64_t compute_output_ns = 0;
    uint64_t total_ns = 0;  // from receipt to the response being handed back
  };

  void RecordSuccess(const Durations& d, int64_t batch_size);
  void RecordFailure(uint64_t total_ns);

  // Fills the counter fields of `out` (name and version are left to the caller).
  void Snapshot(ModelVersionStats* out) const;

 private:
  struct Counter {
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> ns{0};
    void Add(uint64_t n) {
      count.fetch_add(1, std::memory_order_relaxed);
      ns.fetch_add(n, std::memory_order_relaxed);
    }
    DurationStat Read() const {
      return {count.load(std::memory_order_relaxed), ns.load(std::memory_order_relaxed)};
    }
  };

  Counter success_, fail_, queue_, compute_input_, compute_infer_, compute_output_;
  std::atomic<uint64_t> inference_count_{0};
  std::atomic<uint64_t> execution_count_{0};
  std::atomic<uint64_t> last_inference_ms_{0};
};

}  // namespace harrier
