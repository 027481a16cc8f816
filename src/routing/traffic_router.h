// TrafficRouter: for one model, which version answers a request and which (if any) also gets a
// shadow copy — the traffic policy's split, stickiness, shadow and circuit breakers composed.
//
//   1. A forced version (the URL's version or an X-Harrier-Model-Version header, parsed by the
//      caller) bypasses the split and the shadow: kNotFound when the model does not serve it,
//      kUnavailable when its breaker refuses while another version with traffic would take a
//      request (in a panic, below, it is sent anyway).
//   2. Otherwise the split (weighted_split.h) picks with the sticky key when the request has
//      one, else with the per-request random. A version whose breaker refuses is skipped and
//      the key's next preference taken, which is the split renormalised over the remaining
//      versions. When every version with traffic refuses, the split routes as if none did: a
//      panic (RouteDecision::panic), as Envoy routes to every host below its panic threshold.
//      Breakers move traffic between versions; they never take the model out of service,
//      since one client's inputs that fail on every version could open them all (probe 38).
//   3. The shadow version is added when the sampler (shadow_sampler.h, fed the per-request
//      random) says so, it is not the version already chosen, and its breaker allows it.
// kUnavailable comes with the time after which a retry may succeed (`*retry_after`): when the
// forced version's breaker lets a request through, also at the end of the message as
// "; retry after N s" (whole seconds, rounded up), the wording admission control uses.
//
// The rollout (rollout.h), the windows and the guard are driven by the caller, which hands the
// rollout's weights to SetWeights(); the breakers survive a weight change. Nothing here reads a
// clock, spawns a thread or does I/O.
//
// Thread safety: every method from any thread. The split is swapped whole under a mutex (a
// Route() holds it only to copy a pointer); each breaker has its own mutex.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "harrier/clock.h"
#include "harrier/status.h"
#include "routing/circuit_breaker.h"
#include "routing/shadow_sampler.h"
#include "routing/traffic_policy.h"
#include "routing/weighted_split.h"

namespace harrier {

struct RouteRequest {
  std::optional<int64_t> forced_version;
  // HashKey(the sticky header's value), when the policy is sticky and the request has it.
  std::optional<uint64_t> sticky_key;
  // A fresh random 64-bit value per request (the split's key when not sticky; the shadow draw).
  uint64_t random = 0;
};

struct RouteDecision {
  int64_t version = 0;
  std::optional<int64_t> shadow_version;
  bool forced = false;  // the caller's version, not the split's
  // Every version with traffic had its breaker refusing, and the request went regardless.
  bool panic = false;
};

class TrafficRouter {
 public:
  // The policy checked against the served versions (ValidateAgainstVersions); routes with the
  // policy's weights, or with its rollout's first step when it has a rollout. One breaker per
  // served version when the policy has a breaker.
  static StatusOr<std::unique_ptr<TrafficRouter>> Create(const TrafficPolicy& policy,
                                                         std::vector<int64_t> available);

  TrafficRouter(const TrafficRouter&) = delete;
  TrafficRouter& operator=(const TrafficRouter&) = delete;

  // The version to answer with (see above). Takes a half-open breaker's probe for the version
  // it returns (and for the shadow version): record those requests' results.
  StatusOr<RouteDecision> Route(const RouteRequest& request, Clock::time_point now,
                                Clock::duration* retry_after = nullptr);

  // A finished request's result for the version's breaker (shadow requests included). No-op
  // without breakers or for a version the model does not serve.
  void RecordResult(int64_t version, Clock::time_point now, bool failure);
  // Closes the version's breaker with an empty window (CircuitBreaker::Reset): its instance was
  // replaced. No-op without breakers or for a version the model does not serve.
  void ResetBreaker(int64_t version);

  // Routes with these weights from now on (a rollout step, a rollback). kInvalidArgument, and
  // nothing changes, when no weight is above 0 or a version with weight > 0 is not served.
  Status SetWeights(const VersionWeights& weights);

  VersionWeights weights() const;
  // Null without breakers or for a version not served.
  const CircuitBreaker* breaker(int64_t version) const;
  const TrafficPolicy& policy() const { return policy_; }
  const std::vector<int64_t>& available() const { return available_; }

 private:
  TrafficRouter(TrafficPolicy policy, std::vector<int64_t> available);

  bool Served(int64_t version) const;
  // True when the version has no breaker or its breaker allows a request now.
  bool Admit(int64_t version, Clock::time_point now);
  Clock::duration BreakerWait(int64_t version, Clock::time_point now) const;

  // Constant after construction.
  const TrafficPolicy policy_;
  const std::vector<int64_t> available_;  // ascending
  const std::optional<ShadowSampler> shadow_;
  // Every served version's breaker (empty without a breaker policy); the map itself is constant.
  std::map<int64_t, std::unique_ptr<CircuitBreaker>> breakers_;

  mutable std::mutex mu_;
  std::shared_ptr<const WeightedSplit> split_;  // guarded by mu_; never null
};

}  // namespace harrier
