#include "routing/traffic_controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "core/json_writer.h"
#include "routing/guard.h"
#include "routing/weighted_split.h"

namespace harrier {
namespace {

constexpr auto kEvaluationPeriod = std::chrono::milliseconds(100);
// After a candidate's failure: a candidate failing at a high rate is rolled back within a few
// milliseconds of the data being enough, not up to 100 ms (and as many failed requests) later.
constexpr auto kFailureEvaluationPeriod = std::chrono::milliseconds(5);

// A per-thread generator for the split's and the shadow's draws: no lock, no allocation.
uint64_t RandomDraw() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return generator();
}

void AppendSnapshot(std::string* out, const WindowSnapshot& w) {
  out->append("{\"requests\":");
  AppendJsonNumber(out, w.requests);
  out->append(",\"errors\":");
  AppendJsonNumber(out, w.errors);
  out->append(",\"error_rate\":");
  AppendJsonNumber(out, w.error_rate);
  out->append(",\"p99_us\":");
  AppendJsonNumber(out, w.p99_us);
  out->push_back('}');
}

void AppendWeights(std::string* out, const VersionWeights& weights) {
  out->push_back('{');
  bool first = true;
  for (const auto& [version, weight] : weights) {
    if (!first) out->push_back(',');
    first = false;
    AppendJsonKey(out, std::to_string(version));
    AppendJsonNumber(out, weight);
  }
  out->push_back('}');
}

// Seconds since `at` (steady clock) as a JSON number, for "how long ago".
double SecondsSince(Clock::time_point at, Clock::time_point now) {
  return std::chrono::duration<double>(now - at).count();
}

}  // namespace

TrafficController::TrafficController(std::string model, const Clock& clock)
    : model_(std::move(model)), clock_(clock) {}

Status TrafficController::SetPolicy(const TrafficPolicy& policy, std::vector<int64_t> available) {
  ASSIGN_OR_RETURN(std::unique_ptr<TrafficRouter> router,
                   TrafficRouter::Create(policy, std::move(available)));
  std::lock_guard lock(mu_);
  const Clock::time_point now = clock_.Now();
  policy_ = policy;
  router_ = std::move(router);
  rollout_.reset();
  candidate_.reset();
  baseline_.reset();
  last_verdict_.reset();
  last_evaluation_ = now;
  if (policy.rollout) {
    rollout_ = std::make_unique<Rollout>(*policy.rollout, policy.weights, now);
    (void)router_->SetWeights(rollout_->weights());
  }
  if (policy.guard) {
    candidate_ = std::make_unique<SlidingWindow>(clock_, policy.guard->window_seconds);
    baseline_ = std::make_unique<SlidingWindow>(clock_, policy.guard->window_seconds);
  }
  active_.store(true, std::memory_order_relaxed);
  had_policy_.store(true, std::memory_order_relaxed);
  spdlog::info("model '{}': traffic policy set: {}", model_, TrafficPolicyToJson(policy));
  return Status::Ok();
}

void TrafficController::ClearPolicy() {
  std::lock_guard lock(mu_);
  active_.store(false, std::memory_order_relaxed);
  policy_.reset();
  router_.reset();
  rollout_.reset();
  candidate_.reset();
  baseline_.reset();
  last_verdict_.reset();
}

std::optional<std::string> TrafficController::OnVersionsChanged(std::vector<int64_t> available) {
  std::optional<TrafficPolicy> policy;
  {
    std::lock_guard lock(mu_);
    if (!policy_ || router_->available() == available) return std::nullopt;
    policy = policy_;
  }
  // Same policy over the new set: a fresh router (breakers for the new versions), the rollout
  // and windows kept. Create() checks the policy against the versions first.
  auto router = TrafficRouter::Create(*policy, std::move(available));
  if (!router.ok()) {
    ClearPolicy();
    return "the traffic policy was dropped: " + std::string(router.status().message());
  }
  std::lock_guard lock(mu_);
  if (!policy_ || !(*policy_ == *policy)) return std::nullopt;  // replaced meanwhile
  const VersionWeights weights = router_->weights();
  router_ = std::move(router).value();
  (void)router_->SetWeights(weights);
  return std::nullopt;
}

void TrafficController::OnVersionReplaced(int64_t version) {
  std::lock_guard lock(mu_);
  if (router_) router_->ResetBreaker(version);
}

StatusOr<RouteDecision> TrafficController::Route(std::optional<int64_t> forced,
                                                 const Headers& headers) {
  RouteRequest request;
  request.forced_version = forced;
  request.random = RandomDraw();
  std::lock_guard lock(mu_);
  if (!router_) return Internal("model '" + model_ + "' has no traffic policy");
  if (!policy_->sticky_header.empty()) {
    for (const auto& [name, value] : headers) {
      if (name == policy_->sticky_header) {
        request.sticky_key = HashKey(value);
        break;
      }
    }
  }
  const Clock::time_point now = clock_.Now();
  MaybeEvaluate(now, kEvaluationPeriod);
  StatusOr<RouteDecision> decision = router_->Route(request, now);
  if (decision.ok() && decision->panic) breaker_panics_.fetch_add(1, std::memory_order_relaxed);
  return decision;
}

void TrafficController::Record(int64_t version, const RequestOutcome& outcome) {
  if (!active()) return;
  std::lock_guard lock(mu_);
  if (!router_) return;
  const Clock::time_point now = clock_.Now();
  router_->RecordResult(version, now, outcome.server_failure);
  bool candidate_failed = false;
  if (rollout_ && candidate_ && outcome.routed_by_split) {
    if (version == rollout_->config().candidate) {
      candidate_->Record(outcome.latency, outcome.server_failure);
      candidate_failed = outcome.server_failure;
    } else if (policy_->weights.contains(version)) {
      baseline_->Record(outcome.latency, outcome.server_failure);
    }
  }
  MaybeEvaluate(now, candidate_failed ? kFailureEvaluationPeriod : kEvaluationPeriod);
}

void TrafficController::RecordShadow(int64_t version, const ShadowComparison& comparison) {
  std::lock_guard lock(mu_);
  ShadowFigures& f = shadow_[version];
  if (comparison.failed) {
    ++f.errors;
    return;
  }
  if (comparison.mismatched) {
    ++f.mismatched;
    return;
  }
  ++f.compared;
  f.last_max_abs_difference = comparison.max_abs_difference;
  if (comparison.top1_agrees) {
    ++f.top1_compared;
    if (*comparison.top1_agrees) ++f.top1_agreed;
  }
}

void TrafficController::RecordShadowShed(int64_t version) {
  std::lock_guard lock(mu_);
  ++shadow_[version].shed;
}

void TrafficController::MaybeEvaluate(Clock::time_point now, Clock::duration period) {
  if (!rollout_ || rollout_->state() != Rollout::State::kRunning) return;
  if (now - last_evaluation_ < period) return;
  last_evaluation_ = now;
  GuardVerdict verdict;
  if (policy_->guard) {
    verdict = EvaluateGuard(*policy_->guard, candidate_->Snapshot(), baseline_->Snapshot());
  } else {
    verdict.outcome = GuardVerdict::Outcome::kHolds;  // no guard: each dwell passes
  }
  last_verdict_ = verdict;
  const size_t step = rollout_->step_index();
  if (!rollout_->Advance(now, verdict)) return;
  (void)router_->SetWeights(rollout_->weights());
  if (rollout_->state() == Rollout::State::kRolledBack) {
    rollbacks_.fetch_add(1, std::memory_order_relaxed);
    last_rollback_ = rollout_->last_rollback();
    spdlog::warn(
        "model '{}': rollout of version {} rolled back at step {} ({}%): {}; candidate {} "
        "requests, p99 {} us, error rate {:.4f}; baseline {} requests, p99 {} us, error rate "
        "{:.4f}",
        model_, rollout_->config().candidate, step, rollout_->config().steps_percent[step],
        verdict.reason, verdict.candidate.requests, verdict.candidate.p99_us,
        verdict.candidate.error_rate, verdict.baseline.requests, verdict.baseline.p99_us,
        verdict.baseline.error_rate);
  } else {
    spdlog::info("model '{}': rollout of version {} now at {}% ({})", model_,
                 rollout_->config().candidate, rollout_->candidate_percent(),
                 RolloutStateName(rollout_->state()));
  }
}

std::string TrafficController::StateJson() {
  std::lock_guard lock(mu_);
  const Clock::time_point now = clock_.Now();
  std::string out = "{\"model\":";
  AppendJsonString(&out, model_);
  out.append(",\"policy\":");
  if (!policy_) {
    out.append("null,\"state\":null");
  } else {
    MaybeEvaluate(now, kEvaluationPeriod);
    out.append(TrafficPolicyToJson(*policy_));
    out.append(",\"state\":{\"weights\":");
    AppendWeights(&out, router_->weights());
    out.append(",\"rollout\":");
    if (!rollout_) {
      out.append("null");
    } else {
      out.append("{\"state\":\"");
      out.append(RolloutStateName(rollout_->state()));
      out.append("\",\"step\":");
      AppendJsonNumber(&out, static_cast<int64_t>(rollout_->step_index()));
      out.append(",\"candidate_percent\":");
      AppendJsonNumber(&out, rollout_->candidate_percent());
      out.append(",\"waiting_for_data\":");
      AppendJsonBool(&out, rollout_->waiting_for_data());
      out.push_back('}');
    }
    out.append(",\"guard\":");
    if (!last_verdict_) {
      out.append("null");
    } else {
      out.append("{\"outcome\":\"");
      out.append(GuardOutcomeName(last_verdict_->outcome));
      out.append("\",\"reason\":");
      AppendJsonString(&out, last_verdict_->reason);
      out.append(",\"candidate\":");
      AppendSnapshot(&out, last_verdict_->candidate);
      out.append(",\"baseline\":");
      AppendSnapshot(&out, last_verdict_->baseline);
      out.push_back('}');
    }
    out.append(",\"breakers\":{");
    bool first = true;
    for (const auto& [v, state] : BreakerStatesLocked(now)) {
      if (!first) out.push_back(',');
      first = false;
      AppendJsonKey(&out, std::to_string(v));
      AppendJsonString(&out, BreakerStateName(state));
    }
    out.append("},\"breaker_panics\":");
    AppendJsonNumber(&out, breaker_panics());
    out.push_back('}');
  }
  out.append(",\"rollbacks\":");
  AppendJsonNumber(&out, rollbacks());
  out.append(",\"last_rollback\":");
  if (!last_rollback_) {
    out.append("null");
  } else {
    out.append("{\"seconds_ago\":");
    AppendJsonNumber(&out, SecondsSince(last_rollback_->at, now));
    out.append(",\"step\":");
    AppendJsonNumber(&out, static_cast<int64_t>(last_rollback_->step_index));
    out.append(",\"percent\":");
    AppendJsonNumber(&out, last_rollback_->percent);
    out.append(",\"reason\":");
    AppendJsonString(&out, last_rollback_->reason);
    out.append(",\"candidate\":");
    AppendSnapshot(&out, last_rollback_->candidate);
    out.append(",\"baseline\":");
    AppendSnapshot(&out, last_rollback_->baseline);
    out.push_back('}');
  }
  out.append(",\"shadow\":{");
  bool first = true;
  for (const auto& [v, f] : shadow_) {
    if (!first) out.push_back(',');
    first = false;
    AppendJsonKey(&out, std::to_string(v));
    out.append("{\"compared\":");
    AppendJsonNumber(&out, f.compared);
    out.append(",\"errors\":");
    AppendJsonNumber(&out, f.errors);
    out.append(",\"shed\":");
    AppendJsonNumber(&out, f.shed);
    out.append(",\"mismatched\":");
    AppendJsonNumber(&out, f.mismatched);
    out.append(",\"top1_agreement\":");
    if (f.top1_compared == 0) {
      out.append("null");
    } else {
      AppendJsonNumber(&out, static_cast<double>(f.top1_agreed) / f.top1_compared);
    }
    out.append(",\"last_max_abs_difference\":");
    AppendJsonNumber(&out, f.last_max_abs_difference);
    out.push_back('}');
  }
  out.append("}}");
  return out;
}

VersionWeights TrafficController::weights() const {
  std::lock_guard lock(mu_);
  return router_ ? router_->weights() : VersionWeights{};
}

std::map<int64_t, std::string> TrafficController::VersionNotes() const {
  std::lock_guard lock(mu_);
  std::map<int64_t, std::string> notes;
  if (!router_) return notes;
  for (const auto& [version, weight] : router_->weights())
    notes[version] = "weight " + std::to_string(weight);
  if (rollout_) {
    std::string& note = notes[rollout_->config().candidate];
    if (note.empty()) note = "weight 0";
    if (rollout_->state() == Rollout::State::kRolledBack && last_rollback_) {
      note += " \u00b7 rolled back: " + last_rollback_->reason;
    } else {
      char percent[32];
      std::snprintf(percent, sizeof percent, "%g%%", rollout_->candidate_percent());
      note +=
          std::string(" \u00b7 rollout ") + RolloutStateName(rollout_->state()) + " at " + percent;
    }
  }
  if (policy_->shadow) {
    std::string& note = notes[policy_->shadow->version];
    if (note.empty()) note = "weight 0";
    note += " \u00b7 shadow";
  }
  return notes;
}

std::map<int64_t, TrafficController::ShadowFigures> TrafficController::shadow_figures() const {
  std::lock_guard lock(mu_);
  return shadow_;
}

std::map<int64_t, CircuitBreaker::State> TrafficController::breaker_states() const {
  std::lock_guard lock(mu_);
  return BreakerStatesLocked(clock_.Now());
}

std::map<int64_t, CircuitBreaker::State> TrafficController::BreakerStatesLocked(
    Clock::time_point now) const {
  std::map<int64_t, CircuitBreaker::State> states;
  if (!router_) return states;
  for (int64_t v : router_->available()) {
    if (const CircuitBreaker* b = router_->breaker(v)) states[v] = b->state(now);
  }
  return states;
}

ShadowComparison CompareOutputs(const std::vector<Tensor>& answered,
                                const std::vector<Tensor>& shadow) {
  ShadowComparison c;
  for (const Tensor& a : answered) {
    const auto it = std::find_if(shadow.begin(), shadow.end(),
                                 [&](const Tensor& t) { return t.name == a.name; });
    // (A BYTES output's size is its strings': it may differ with the same type and shape.)
    if (it == shadow.end() || it->dtype != a.dtype || it->shape != a.shape ||
        (a.dtype != DataType::kBytes && it->size_bytes != a.size_bytes)) {
      c.mismatched = true;
      return c;
    }
    if (a.dtype != DataType::kFp32) continue;
    const size_t n = a.size_bytes / sizeof(float);
    const auto* x = reinterpret_cast<const float*>(a.data);
    const auto* y = reinterpret_cast<const float*>(it->data);
    size_t argmax_x = 0, argmax_y = 0;
    for (size_t i = 0; i < n; ++i) {
      c.max_abs_difference = std::max(c.max_abs_difference, std::fabs(double(x[i]) - y[i]));
      if (x[i] > x[argmax_x]) argmax_x = i;
      if (y[i] > y[argmax_y]) argmax_y = i;
    }
    const bool classifier =
        n > 1 && (a.shape.size() == 1 || (a.shape.size() == 2 && a.shape[0] == 1));
    if (classifier && !c.top1_agrees) c.top1_agrees = argmax_x == argmax_y;
  }
  return c;
}

}  // namespace harrier
