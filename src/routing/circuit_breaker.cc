#include "routing/circuit_breaker.h"

#include <algorithm>
#include <chrono>

namespace harrier {

CircuitBreaker::CircuitBreaker(const BreakerConfig& config)
    : config_(config),
      slots_(config.window_seconds),
      open_for_(std::chrono::seconds(config.open_seconds)),
      ring_(static_cast<size_t>(slots_.count())) {}

void CircuitBreaker::ClearWindow() {
  for (Slot& slot : ring_) slot = Slot{};
}

void CircuitBreaker::Open(Clock::time_point now) {
  state_ = State::kOpen;
  opened_at_ = now;
  probes_issued_ = 0;
  ++times_opened_;
  ClearWindow();
}

void CircuitBreaker::RefreshState(Clock::time_point now) {
  if (state_ == State::kOpen && now >= opened_at_ + open_for_) {
    state_ = State::kHalfOpen;
    probes_issued_ = 0;
  }
  if (state_ == State::kHalfOpen && probes_issued_ >= config_.half_open_probes &&
      now >= last_probe_at_ + open_for_) {
    probes_issued_ = 0;  // the probes' results were lost: try again
  }
}

void CircuitBreaker::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  state_ = State::kClosed;
  probes_issued_ = 0;
  ClearWindow();
}

bool CircuitBreaker::ShouldTrip(int64_t current_slot) const {
  int64_t requests = 0, failures = 0;
  for (const Slot& slot : ring_) {
    if (!slots_.InWindow(slot.id, current_slot)) continue;
    requests += slot.requests;
    failures += slot.failures;
  }
  if (config_.failure_threshold > 0 && failures >= config_.failure_threshold) return true;
  return config_.failure_rate && requests >= config_.min_requests &&
         static_cast<double>(failures) >= *config_.failure_rate * static_cast<double>(requests);
}

bool CircuitBreaker::Allow(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  RefreshState(now);
  switch (state_) {
    case State::kClosed: return true;
    case State::kOpen: return false;
    case State::kHalfOpen:
      if (probes_issued_ >= config_.half_open_probes) return false;
      ++probes_issued_;
      last_probe_at_ = now;
      return true;
  }
  return false;
}

void CircuitBreaker::Record(Clock::time_point now, bool failure) {
  std::lock_guard<std::mutex> lock(mu_);
  RefreshState(now);
  switch (state_) {
    case State::kOpen: return;
    case State::kHalfOpen:
      if (failure) {
        Open(now);
      } else {
        state_ = State::kClosed;
        ClearWindow();
      }
      return;
    case State::kClosed: {
      const int64_t id = slots_.SlotOf(now);
      Slot& slot = ring_[slots_.Index(id)];
      if (slot.id != id) {
        if (slot.id > id) return;  // older than the window (a late report)
        slot = Slot{id, 0, 0};
      }
      ++slot.requests;
      if (failure) {
        ++slot.failures;
        // Only a failure can trip it (a success never raises the failure count or rate).
        if (ShouldTrip(id)) Open(now);
      }
      return;
    }
  }
}

CircuitBreaker::State CircuitBreaker::state(Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::kOpen && now >= opened_at_ + open_for_) return State::kHalfOpen;
  return state_;
}

Clock::duration CircuitBreaker::RetryAfter(Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::duration zero = Clock::duration::zero();
  if (state_ == State::kOpen) {
    // Past open_seconds it is half-open with every probe free.
    return std::max(zero, opened_at_ + open_for_ - now);
  }
  if (state_ == State::kHalfOpen && probes_issued_ >= config_.half_open_probes) {
    return std::max(zero, last_probe_at_ + open_for_ - now);
  }
  return zero;
}

int64_t CircuitBreaker::times_opened() const {
  std::lock_guard<std::mutex> lock(mu_);
  return times_opened_;
}

const char* BreakerStateName(CircuitBreaker::State state) {
  switch (state) {
    case CircuitBreaker::State::kClosed: return "closed";
    case CircuitBreaker::State::kOpen: return "open";
    case CircuitBreaker::State::kHalfOpen: return "half-open";
  }
  return "unknown";
}

}  // namespace harrier
