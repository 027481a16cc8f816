#include "routing/rollout.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

namespace harrier {
namespace {

constexpr int64_t kWhole = 10'000;  // percent resolution 0.01

}  // namespace

VersionWeights RolloutWeights(const VersionWeights& baseline, int64_t candidate, double percent) {
  const int64_t c = std::clamp<int64_t>(std::llround(percent * 100), 0, kWhole);
  int64_t sum = 0;
  for (const auto& [version, weight] : baseline) {
    if (version != candidate) sum += weight;
  }
  VersionWeights out;
  for (const auto& [version, weight] : baseline) {
    if (version != candidate) out[version] = weight * (kWhole - c);
  }
  out[candidate] = c * sum;
  return out;
}

Rollout::Rollout(RolloutConfig config, VersionWeights baseline, Clock::time_point start)
    : config_(std::move(config)), baseline_(std::move(baseline)), step_started_at_(start) {
  if (config_.steps_percent.size() == 1) state_ = State::kCompleted;  // a plain cut-over
}

Clock::time_point Rollout::dwell_ends_at() const {
  return step_started_at_ + std::chrono::seconds(config_.dwell_seconds);
}

double Rollout::candidate_percent() const {
  if (state_ == State::kRolledBack) return 0;
  return config_.steps_percent[step_];
}

VersionWeights Rollout::weights() const {
  return RolloutWeights(baseline_, config_.candidate, candidate_percent());
}

bool Rollout::Advance(Clock::time_point now, const GuardVerdict& verdict) {
  if (state_ != State::kRunning) return false;
  using Outcome = GuardVerdict::Outcome;
  if (verdict.outcome == Outcome::kBreached) {
    last_rollback_ = RollbackRecord{now,
                                    step_,
                                    config_.steps_percent[step_],
                                    verdict.reason,
                                    verdict.candidate,
                                    verdict.baseline};
    state_ = State::kRolledBack;
    waiting_for_data_ = false;
    return true;
  }
  if (now < dwell_ends_at()) return false;
  if (verdict.outcome == Outcome::kInsufficientData) {
    waiting_for_data_ = true;
    return false;
  }
  waiting_for_data_ = false;
  ++step_;
  step_started_at_ = now;
  if (step_ + 1 == config_.steps_percent.size()) state_ = State::kCompleted;
  return true;
}

const char* RolloutStateName(Rollout::State state) {
  switch (state) {
    case Rollout::State::kRunning: return "running";
    case Rollout::State::kCompleted: return "completed";
    case Rollout::State::kRolledBack: return "rolled back";
  }
  return "unknown";
}

}  // namespace harrier
