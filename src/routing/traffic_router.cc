#include "routing/traffic_router.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "routing/rollout.h"

namespace harrier {
namespace {

// "; retry after N s": the ending admission control's refusals have, which
// RetryAfterSeconds() (core/status_mapping.h) reads back for a Retry-After header.
std::string RetryText(Clock::duration wait) {
  const auto s = std::chrono::ceil<std::chrono::seconds>(wait).count();
  return "; retry after " + std::to_string(std::max<int64_t>(1, s)) + " s";
}

}  // namespace

StatusOr<std::unique_ptr<TrafficRouter>> TrafficRouter::Create(const TrafficPolicy& policy,
                                                               std::vector<int64_t> available) {
  RETURN_IF_ERROR(ValidateAgainstVersions(policy, available));
  std::sort(available.begin(), available.end());
  available.erase(std::unique(available.begin(), available.end()), available.end());
  std::unique_ptr<TrafficRouter> router(new TrafficRouter(policy, std::move(available)));
  const VersionWeights initial = policy.rollout
                                     ? RolloutWeights(policy.weights, policy.rollout->candidate,
                                                      policy.rollout->steps_percent.front())
                                     : policy.weights;
  RETURN_IF_ERROR(router->SetWeights(initial));
  return router;
}

TrafficRouter::TrafficRouter(TrafficPolicy policy, std::vector<int64_t> available)
    : policy_(std::move(policy)),
      available_(std::move(available)),
      shadow_(policy_.shadow ? std::optional<ShadowSampler>(policy_.shadow->percent)
                             : std::nullopt) {
  if (policy_.breaker) {
    for (int64_t v : available_)
      breakers_.emplace(v, std::make_unique<CircuitBreaker>(*policy_.breaker));
  }
}

bool TrafficRouter::Served(int64_t version) const {
  return std::binary_search(available_.begin(), available_.end(), version);
}

bool TrafficRouter::Admit(int64_t version, Clock::time_point now) {
  auto it = breakers_.find(version);
  return it == breakers_.end() || it->second->Allow(now);
}

Clock::duration TrafficRouter::BreakerWait(int64_t version, Clock::time_point now) const {
  auto it = breakers_.find(version);
  return it == breakers_.end() ? Clock::duration::zero() : it->second->RetryAfter(now);
}

StatusOr<RouteDecision> TrafficRouter::Route(const RouteRequest& request, Clock::time_point now,
                                             Clock::duration* retry_after) {
  RouteDecision decision;
  if (request.forced_version) {
    const int64_t v = *request.forced_version;
    if (!Served(v)) return NotFound("version " + std::to_string(v) + " of the model is not served");
    decision.version = v;
    decision.forced = true;
    if (Admit(v, now)) return decision;
    // Refused while another version with traffic would take a request: the forced version is
    // out of rotation. Otherwise every version is refusing, and this is a panic.
    for (const auto& [other, weight] : weights()) {
      if (weight > 0 && BreakerWait(other, now) == Clock::duration::zero()) {
        const Clock::duration wait = BreakerWait(v, now);
        if (retry_after != nullptr) *retry_after = wait;
        return Unavailable("version " + std::to_string(v) +
                           " is failing and its circuit breaker is open" + RetryText(wait));
      }
    }
    decision.panic = true;
    return decision;
  }

  std::shared_ptr<const WeightedSplit> split;
  {
    std::lock_guard<std::mutex> lock(mu_);
    split = split_;
  }
  const uint64_t key = request.sticky_key.value_or(request.random);
  // The first preference is almost always admitted: only then rank (which allocates).
  const int64_t first = split->Pick(key);
  bool chosen = Admit(first, now);
  if (chosen) {
    decision.version = first;
  } else {
    std::vector<int64_t> ranked;
    split->Rank(key, &ranked);
    for (int64_t v : ranked) {
      if (v == first) continue;
      if (Admit(v, now)) {
        decision.version = v;
        chosen = true;
        break;
      }
    }
    if (!chosen) {  // every version with traffic refuses: the split's own choice (a panic)
      decision.version = first;
      decision.panic = true;
    }
  }

  if (shadow_ && shadow_->Sample(request.random) && policy_.shadow->version != decision.version &&
      Admit(policy_.shadow->version, now)) {
    decision.shadow_version = policy_.shadow->version;
  }
  return decision;
}

void TrafficRouter::RecordResult(int64_t version, Clock::time_point now, bool failure) {
  auto it = breakers_.find(version);
  if (it != breakers_.end()) it->second->Record(now, failure);
}

void TrafficRouter::ResetBreaker(int64_t version) {
  auto it = breakers_.find(version);
  if (it != breakers_.end()) it->second->Reset();
}

Status TrafficRouter::SetWeights(const VersionWeights& weights) {
  bool any = false;
  for (const auto& [version, weight] : weights) {
    if (weight <= 0) continue;
    any = true;
    if (!Served(version)) {
      return InvalidArgument("traffic weights: version " + std::to_string(version) +
                             " is not served by the model");
    }
  }
  if (!any) return InvalidArgument("traffic weights: at least one version needs a weight above 0");
  auto split = std::make_shared<const WeightedSplit>(weights);
  std::lock_guard<std::mutex> lock(mu_);
  split_ = std::move(split);
  return Status::Ok();
}

VersionWeights TrafficRouter::weights() const {
  std::lock_guard<std::mutex> lock(mu_);
  return split_->weights();
}

const CircuitBreaker* TrafficRouter::breaker(int64_t version) const {
  auto it = breakers_.find(version);
  return it == breakers_.end() ? nullptr : it->second.get();
}

}  // namespace harrier
