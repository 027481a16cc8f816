// TrafficController: one model's traffic policy, live — the router (split, stickiness, shadow,
// breakers), the rollout with its guard over two sliding windows (candidate, baseline), the
// shadow comparison figures, and the state GET /v2/models/{m}/traffic reports
// (docs/routing.md). The model repository manager keeps one per model, for the model's
// lifetime; the model's versions report every finished request to it.
//
// Without a policy it is inactive: Route() is not asked and Record() returns at once (one
// relaxed atomic load), so a model without a policy pays nothing for it.
//
// The guard and the rollout are evaluated lazily, at most every 100 ms, by the calls that
// route or record requests and by State(): no thread of its own. A breach sets the
// candidate's weight to 0 at the evaluation that sees it, so within one window plus 100 ms of
// the requests that caused it.
//
// Thread safety: every method from any thread (one mutex; the router has its own).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harrier/clock.h"
#include "harrier/status.h"
#include "harrier/tensor.h"
#include "routing/rollout.h"
#include "routing/sliding_window.h"
#include "routing/traffic_policy.h"
#include "routing/traffic_router.h"

namespace harrier {

// What a shadow comparison found for one request (outputs compared by name).
struct ShadowComparison {
  bool failed = false;              // the shadow version answered an error
  // An output of the real answer that the shadow's lacks, or holds with another type or shape:
  // not comparable, and not an agreement (probe 40: a [4] against a [2,2] read as equal).
  bool mismatched = false;
  double max_abs_difference = 0;    // over every FP32 output element both answers hold
  std::optional<bool> top1_agrees;  // a classifier-shaped FP32 output: same arg-max
};

// A finished request, as the version that ran it reports it (TrafficController::Record).
struct RequestOutcome {
  // From receipt to the model's answer (for a generation: to its first token).
  Clock::duration latency{};
  // A server-side failure: an engine failure or a timeout, which says the version is sick. Not a
  // client's bad request (kInvalidArgument, even from the engine), a cancellation or a refusal.
  // The breaker and the guard count these and nothing else as errors.
  bool server_failure = false;
  // The policy's split picked the version. False for a version the client named (the URL's or
  // X-Harrier-Model-Version) and for a shadow copy: they feed the version's breaker, but not
  // the rollout's guard windows, which judge the traffic the rollout sends.
  bool routed_by_split = true;
};

class TrafficController {
 public:
  // `clock` must outlive the controller.
  explicit TrafficController(std::string model, const Clock& clock = SteadyClock());

  // Installs `policy` for the model's READY `available` versions, replacing any policy and
  // starting its rollout (if any) now. kInvalidArgument (nothing changes) when the policy names
  // a version that does not serve.
  Status SetPolicy(const TrafficPolicy& policy, std::vector<int64_t> available);
  // Back to no policy: requests without a version go to the highest READY version.
  void ClearPolicy();
  bool active() const { return active_.load(std::memory_order_relaxed); }
  // Whether the model has had a policy since the controller was made: its counters are then
  // reported for good, through DELETE and unloads (docs/routing.md).
  bool had_policy() const { return had_policy_.load(std::memory_order_relaxed); }

  // The served versions changed (a load, reload or unload). The policy stays when every version
  // it names still serves; otherwise it is dropped, and the reason returned (to log).
  std::optional<std::string> OnVersionsChanged(std::vector<int64_t> available);

  // `version`'s instance was replaced by a new one (a reload that kept the version number and
  // swapped in a new instance). Closes that version's circuit breaker with an empty window: what
  // it knew was about the instance that no longer serves, and a fixed version should not wait
  // out open_seconds. The policy, the weights, the rollout and the guard windows are kept (the
  // rollout is not restarted by a reload; its windows age out within window_seconds). No-op
  // without a policy, without breakers or for a version the policy's router does not serve.
  // Call it once the new instance takes requests; results of the old instance's requests that
  // finish later still count.
  void OnVersionReplaced(int64_t version);

  // A request's header fields: names lower-cased (HttpRequest::headers).
  using Headers = std::vector<std::pair<std::string, std::string>>;

  // Which version answers (and which also gets a shadow copy); see TrafficRouter::Route().
  // `forced`: X-Harrier-Model-Version. The policy's sticky header is looked up in `headers`.
  // kInternal when inactive (the caller asks only while active()).
  StatusOr<RouteDecision> Route(std::optional<int64_t> forced, const Headers& headers);

  // A finished request to `version` (shadow copies included). The version's breaker counts
  // every one; the rollout's guard windows only those the split routed (see RequestOutcome).
  void Record(int64_t version, const RequestOutcome& outcome);
  void RecordShadow(int64_t version, const ShadowComparison& comparison);
  // A shadow copy not sent because the shadow version was busy.
  void RecordShadowShed(int64_t version);

  // The policy and its live state as JSON (GET .../traffic): {"policy": {...} | null,
  // "state": {...}}.
  std::string StateJson();

  // For the metrics: weights now, rollbacks so far, shadow counts (per shadow version).
  struct ShadowFigures {
    uint64_t compared = 0, errors = 0, shed = 0, mismatched = 0, top1_agreed = 0, top1_compared = 0;
    double last_max_abs_difference = 0;
  };
  VersionWeights weights() const;
  // One line per version with traffic for the status page: "weight 90", and for a rollout's
  // candidate its step or its rollback ("weight 0 · rolled back: candidate p99 ...").
  std::map<int64_t, std::string> VersionNotes() const;
  uint64_t rollbacks() const { return rollbacks_.load(std::memory_order_relaxed); }
  // Requests routed in a breaker panic so far (every version with traffic refusing; see
  // traffic_router.h).
  uint64_t breaker_panics() const { return breaker_panics_.load(std::memory_order_relaxed); }
  std::map<int64_t, ShadowFigures> shadow_figures() const;
  // Each served version's circuit breaker state now (none without a policy).
  std::map<int64_t, CircuitBreaker::State> breaker_states() const;
  const std::string& model() const { return model_; }

 private:
  // REQUIRES: mu_ held.
  // Evaluates the guard and advances the rollout when `period` has passed since the last time.
  void MaybeEvaluate(Clock::time_point now, Clock::duration period);
  // breaker_states() at `now`, for it and StateJson(). REQUIRES: mu_ held.
  std::map<int64_t, CircuitBreaker::State> BreakerStatesLocked(Clock::time_point now) const;

  const std::string model_;
  const Clock& clock_;
  std::atomic<bool> active_{false};
  std::atomic<bool> had_policy_{false};
  std::atomic<uint64_t> rollbacks_{0};
  std::atomic<uint64_t> breaker_panics_{0};

  mutable std::mutex mu_;
  std::optional<TrafficPolicy> policy_;                   // guarded by mu_
  std::unique_ptr<TrafficRouter> router_;                 // guarded by mu_ (set with policy_)
  std::unique_ptr<Rollout> rollout_;                      // guarded by mu_; with a policy's rollout
  std::unique_ptr<SlidingWindow> candidate_;              // guarded by mu_; with a guard
  std::unique_ptr<SlidingWindow> baseline_;               // guarded by mu_; with a guard
  std::optional<GuardVerdict> last_verdict_;              // guarded by mu_
  Clock::time_point last_evaluation_{};                   // guarded by mu_
  std::optional<Rollout::RollbackRecord> last_rollback_;  // guarded by mu_; survives a new policy
  std::map<int64_t, ShadowFigures> shadow_;               // guarded by mu_
};

// Compares a shadow answer's outputs with the answering version's (by name; FP32 outputs
// only): the largest absolute element difference, and for an output shaped like a classifier's
// scores ([N] or [1, N], N > 1) whether both pick the same arg-max.
ShadowComparison CompareOutputs(const std::vector<Tensor>& answered,
                                const std::vector<Tensor>& shadow);

}  // namespace harrier
