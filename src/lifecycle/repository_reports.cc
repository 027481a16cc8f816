#include "lifecycle/repository_reports.h"

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "routing/circuit_breaker.h"

namespace harrier {

void AppendRepositoryMetrics(const RepositorySnapshot& snapshot, const FailureCounters& unrouted,
                             TextExposition* out) {
  DeclareModelMetricFamilies(out);
  for (const PinnedVersion& v : snapshot.versions) {
    if (v.model == nullptr) continue;
    ModelVersionStats stats;
    v.model->SnapshotStats(&stats);
    ModelVersionSample sample;
    sample.stats = &stats;
    sample.metrics = &v.model->metrics();
    sample.queue_depth = v.model->queue_depth();
    if (const ModelAdmission* admission = v.model->admission()) {
      if (auto wait = admission->PredictedQueueWait())
        sample.predicted_queue_wait_seconds = std::chrono::duration<double>(*wait).count();
    }
    GenerationStats generation;
    if (GenerativeModel* g = v.model->generative()) {
      generation = g->Stats();
      sample.generation = &generation;
    }
    AppendModelVersionMetrics(sample, out);
  }
  AppendUnroutedFailures(unrouted, out);
  for (const auto& traffic : snapshot.traffic) {
    const auto shadows = traffic->shadow_figures();
    // A model that has had a policy keeps its counters' series, through a DELETE too (probe 52).
    if (!traffic->had_policy()) continue;
    TrafficSample sample;
    sample.model = traffic->model();
    for (const auto& [v, w] : traffic->weights()) sample.weights.emplace_back(v, w);
    sample.rollbacks = traffic->rollbacks();
    sample.breaker_panics = traffic->breaker_panics();
    for (const auto& [v, f] : shadows) {
      sample.shadows.push_back({v, f.compared, f.errors, f.shed, f.mismatched, f.top1_agreed,
                                f.top1_compared, f.last_max_abs_difference});
    }
    for (const auto& [v, state] : traffic->breaker_states()) {
      TrafficSample::Breaker breaker{v, {}};
      for (auto s : {CircuitBreaker::State::kClosed, CircuitBreaker::State::kOpen,
                     CircuitBreaker::State::kHalfOpen}) {
        breaker.states.emplace_back(BreakerStateName(s), s == state);
      }
      sample.breakers.push_back(std::move(breaker));
    }
    AppendTrafficMetrics(sample, out);
  }
  for (const PinnedVersion& v : snapshot.versions)
    AppendModelState(v.state, v.load_seconds, v.warmup_failures, out);
}

std::vector<DashboardVersion> DashboardRows(const RepositorySnapshot& snapshot) {
  // The notes of the policies in force (each controller under its own lock).
  std::map<std::string, std::map<int64_t, std::string>, std::less<>> notes;
  for (const auto& c : snapshot.traffic)
    if (c->active()) notes[c->model()] = c->VersionNotes();
  std::vector<DashboardVersion> out;
  out.reserve(snapshot.versions.size());
  for (const PinnedVersion& v : snapshot.versions) {
    DashboardVersion row;
    row.state = v.state;
    if (LoadedModel* model = v.model.get()) {
      ModelVersionStats stats;
      model->SnapshotStats(&stats);
      const ModelMetrics& m = model->metrics();
      row.loaded = true;
      row.success_count = stats.success.count;
      for (size_t r = 0; r < kFailureReasonCount; ++r)
        row.failure_count += m.failures.Read(static_cast<FailureReason>(r));
      row.queue_depth = model->queue_depth();
      row.in_flight = m.in_flight.load(std::memory_order_relaxed);
      row.request_duration = m.request_duration.Snapshot();
      if (model->generative() != nullptr) {
        row.generative = true;
        row.generated_tokens = m.generated_tokens.load(std::memory_order_relaxed);
        row.time_to_first_token = m.time_to_first_token.Snapshot();
      }
    }
    if (auto m = notes.find(row.state.name); m != notes.end()) {
      if (auto n = m->second.find(row.state.version); n != m->second.end()) row.traffic = n->second;
    }
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace harrier
