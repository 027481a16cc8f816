// FakeTracer: a Tracer for front-end tests. Whom it traces is decided by the server's own rule,
// TraceSampler (parent-based, else a ratio: here 1 or 0, by `sample`), so that the front ends'
// tests of "an unsampled parent is not traced" check the product, not a copy of its rule. Ids
// come from a counter (1, 2, 3, ...) so that tests can tell them apart. Keeps every submitted
// record.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "harrier/trace.h"
#include "observability/trace_sampler.h"

namespace harrier::testing {

class FakeTracer : public Tracer {
 public:
  std::optional<SpanContext> Start(const std::optional<SpanContext>& parent) override {
    std::lock_guard lock(mu_);
    ++starts_;
    const TraceSampler sampler(sample ? 1.0 : 0.0);
    return sampler.Start(parent, [this] { return ++next_id_; });
  }

  void Submit(RequestTrace trace) override {
    std::lock_guard lock(mu_);
    records_.push_back(std::move(trace));
    cv_.notify_all();
  }

  // Waits (bounded) until at least `n` records are in; returns them. For transports that submit
  // from their own threads after the client has its answer.
  std::vector<RequestTrace> WaitForRecords(size_t n,
                                           std::chrono::seconds limit = std::chrono::seconds(20)) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, limit, [&] { return records_.size() >= n; });
    return records_;
  }

  std::vector<RequestTrace> records() const {
    std::lock_guard lock(mu_);
    return records_;
  }
  int starts() const {
    std::lock_guard lock(mu_);
    return starts_;
  }

  bool sample = true;  // for requests without a valid traceparent; set before use

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int starts_ = 0;
  uint64_t next_id_ = 0;
  std::vector<RequestTrace> records_;
};

}  // namespace harrier::testing
