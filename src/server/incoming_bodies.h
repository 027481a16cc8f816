// IncomingBodies: one server-wide budget for request bodies still arriving -- the bytes the
// transports hold for requests whose body is not complete yet, on every connection of every port
// that shares it (REST and gRPC). A body is charged as its bytes arrive and released when the
// request is handed on (the in-flight limit counts it from there), refused, or its connection
// ends. The bytes that would take the total past the limit are refused instead: the request
// they belong to is answered 503 with Retry-After (docs/server.md, "Request bodies server-wide").
//
// Without it, per-connection bounds (--max-body-bytes, the HTTP/2 held-body bound) multiplied by
// the connections a client may open were the only bound (probe 64: 40 connections held 321 MiB of
// nearly complete bodies at --max-inflight 2; a client with many addresses could take the
// machine's memory and have the server killed, losing every accepted request).
//
// Thread safety: every method may be called from any thread; two atomics (a charge is one
// compare-and-swap, so two racing charges near the limit never both fail when one fits).
#pragma once

#include <atomic>
#include <cstdint>

namespace harrier {

class IncomingBodies {
 public:
  // `limit` bytes in all; 0 for none (everything is charged, nothing refused).
  explicit IncomingBodies(uint64_t limit) : limit_(limit) {}
  IncomingBodies(const IncomingBodies&) = delete;
  IncomingBodies& operator=(const IncomingBodies&) = delete;

  // Takes `bytes` more; false, with nothing taken and the refusal counted, when that would pass
  // the limit.
  bool TryCharge(uint64_t bytes) {
    uint64_t held = held_.load(std::memory_order_relaxed);
    do {
      if (limit_ != 0 && (bytes > limit_ || held > limit_ - bytes)) {
        refused_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
    } while (!held_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
    return true;
  }
  void Release(uint64_t bytes) { held_.fetch_sub(bytes, std::memory_order_relaxed); }

  uint64_t limit() const { return limit_; }
  uint64_t held() const { return held_.load(std::memory_order_relaxed); }
  // Requests refused for it so far.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> held_{0};
  std::atomic<uint64_t> refused_{0};
};

// One request's share of an IncomingBodies (or of none: a null budget takes everything): grows
// with its body, and gives back all it holds when cleared or destroyed. Not thread-safe: it
// belongs to the connection's thread.
class IncomingBodyCharge {
 public:
  IncomingBodyCharge() = default;
  explicit IncomingBodyCharge(IncomingBodies* budget) : budget_(budget) {}
  IncomingBodyCharge(const IncomingBodyCharge&) = delete;
  IncomingBodyCharge& operator=(const IncomingBodyCharge&) = delete;
  ~IncomingBodyCharge() { Clear(); }

  // Holds `total` bytes in all (more than now: the difference is charged). False, holding what
  // it held before, when the budget refuses the difference.
  bool GrowTo(uint64_t total) {
    if (budget_ == nullptr || total <= held_) return true;
    if (!budget_->TryCharge(total - held_)) return false;
    held_ = total;
    return true;
  }
  // Holds `total` bytes in all, more or fewer than now. False, holding what it held before,
  // when the budget refuses the growth.
  bool Set(uint64_t total) {
    if (total <= held_) {
      if (budget_ != nullptr) budget_->Release(held_ - total);
      held_ = total;
      return true;
    }
    return GrowTo(total);
  }
  void Clear() {
    if (budget_ != nullptr && held_ > 0) budget_->Release(held_);
    held_ = 0;
  }
  uint64_t held() const { return held_; }

 private:
  IncomingBodies* budget_ = nullptr;
  uint64_t held_ = 0;
};

}  // namespace harrier
