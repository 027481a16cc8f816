// Rollout: the staged rollout of a candidate version, as a state machine driven by the caller
// with the time and the guard's verdict (guard.h). No clock or thread of its own, so its test
// steps through a table with a fake clock.
//
//   kRunning, step i: the candidate gets steps_percent[i] of the traffic, the baseline (the
//     policy's other weighted versions, in their proportions) the rest.
//     Advance(now, verdict):
//       - verdict kBreached, at any time        -> kRolledBack (candidate weight 0; the reason,
//                                                  the figures, the step and the time kept)
//       - before dwell_seconds on this step      -> stays
//       - dwell over, verdict kInsufficientData  -> stays: the dwell is extended until the
//                                                  guard can judge (waiting_for_data() says so);
//                                                  a step is never passed unjudged
//       - dwell over, verdict kHolds             -> step i + 1, whose dwell starts now; reaching
//                                                  the last step (100%) is kCompleted
//   kCompleted: the candidate has all the traffic. The 100% step has no dwell: with no traffic
//     left to the baseline there is nothing to compare the candidate with.
//   kRolledBack: the baseline has all the traffic again.
// kCompleted and kRolledBack are final; Advance() then does nothing. A rollout without a guard
// is driven with kHolds verdicts (it advances on time alone).
//
// Weights (weights()): integers in which the candidate's share is exactly its percent. With
// c = round(percent * 100) (of 10,000) and S the sum of the baseline's weights, the candidate
// weighs c * S and each baseline version w * (10,000 - c). Moving to a higher step therefore
// only moves keys to the candidate (weighted_split.h), and a rollback only moves them back.
//
// Thread safety: none; its owner serialises calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "harrier/clock.h"
#include "routing/guard.h"
#include "routing/traffic_policy.h"

namespace harrier {

// The weights that give `candidate` `percent` of the traffic and the versions of `baseline`
// (other than the candidate) the rest in their proportions (see above). Versions of the
// baseline keep their entry even at weight 0. REQUIRES: some baseline weight > 0.
VersionWeights RolloutWeights(const VersionWeights& baseline, int64_t candidate, double percent);

class Rollout {
 public:
  enum class State { kRunning, kCompleted, kRolledBack };

  struct RollbackRecord {
    Clock::time_point at;
    size_t step_index = 0;
    double percent = 0;  // the candidate's share when it was rolled back
    std::string reason;  // the guard's
    WindowSnapshot candidate;
    WindowSnapshot baseline;
  };

  // Starts at step 0 at `start` (kCompleted at once when the only step is 100).
  // REQUIRES: `config` and `baseline` from a parsed TrafficPolicy (its rollout and weights).
  Rollout(RolloutConfig config, VersionWeights baseline, Clock::time_point start);

  // Feeds the guard's latest verdict; returns true when the state or the step changed.
  bool Advance(Clock::time_point now, const GuardVerdict& verdict);

  State state() const { return state_; }
  size_t step_index() const { return step_; }
  // The candidate's share now: the step's percent; 0 once rolled back.
  double candidate_percent() const;
  // The weights to route with now.
  VersionWeights weights() const;
  // When the current step began, and when its dwell ends (the earliest the next step can come).
  Clock::time_point step_started_at() const { return step_started_at_; }
  Clock::time_point dwell_ends_at() const;
  // The dwell has ended but the guard's last verdict was kInsufficientData.
  bool waiting_for_data() const { return waiting_for_data_; }
  const std::optional<RollbackRecord>& last_rollback() const { return last_rollback_; }
  const RolloutConfig& config() const { return config_; }

 private:
  // Constant after construction.
  const RolloutConfig config_;
  const VersionWeights baseline_;

  State state_ = State::kRunning;
  size_t step_ = 0;
  Clock::time_point step_started_at_;
  bool waiting_for_data_ = false;
  std::optional<RollbackRecord> last_rollback_;
};

// "running", "completed", "rolled back".
const char* RolloutStateName(Rollout::State state);

}  // namespace harrier
