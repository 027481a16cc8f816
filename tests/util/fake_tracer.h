// FakeTracer: a Tracer for front-end tests. Parent-based like OtlpTracer (a parsed traceparent
// decides by its sampled flag), else `sample` decides; span ids count up from 1 so that tests can
// tell them apart, and new trace ids are all 0xab. Keeps every submitted record.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "harrier/trace.h"

namespace harrier::testing {

class FakeTracer : public Tracer {
 public:
  std::optional<SpanContext> Start(const std::optional<SpanContext>& parent) override {
    std::lock_guard lock(mu_);
    ++starts_;
    SpanContext server;
    if (parent) {
      if (!parent->sampled()) return std::nullopt;
      server.trace_id = parent->trace_id;
    } else {
      if (!sample) return std::nullopt;
      server.trace_id.fill(0xab);
    }
    ++next_span_;
    for (size_t i = 0; i < server.span_id.size(); ++i) {
      server.span_id[7 - i] = static_cast<uint8_t>(next_span_ >> (8 * i));
    }
    server.flags = SpanContext::kSampled;
    return server;
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
  uint64_t next_span_ = 0;
  std::vector<RequestTrace> records_;
};

}  // namespace harrier::testing
