// What the model repository reports about itself besides its index: the Prometheus families
// of every version (docs/metrics.md) and the status page's rows (docs/dashboard.md), both read
// from the same pinned snapshot of the versions.
//
// The manager pins the versions under its lock (a map walk) and these functions read their
// figures outside it: a scrape or a status page does not hold up a request's lookup.
//
// Thread safety: pure functions over a snapshot; the objects it pins are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "harrier/model_manager.h"
#include "lifecycle/loaded_model.h"
#include "observability/dashboard_summary.h"
#include "observability/model_metrics.h"
#include "observability/text_exposition.h"
#include "routing/traffic_controller.h"

namespace harrier {

// One row of the repository index, pinned: a version of a model, or a model with no versions
// yet (version 0, LOADING or UNAVAILABLE).
struct PinnedVersion {
  ModelVersionState state;             // name, version, state and reason
  double load_seconds = -1;            // its load and warm-up time; negative: never tried
  uint64_t warmup_failures = 0;        // implicit warm-ups that failed (the version serves)
  std::shared_ptr<LoadedModel> model;  // null unless loaded (READY, or UNLOADING)
};

struct RepositorySnapshot {
  std::vector<PinnedVersion> versions;  // in the index's order
  // The traffic controllers of the models that have one (made with a model's first load).
  std::vector<std::shared_ptr<TrafficController>> traffic;
};

// Every model family: the loaded versions' request figures, `unrouted` (failures of requests
// that reached no version), the traffic policies' weights, rollbacks, breakers and shadow
// figures, then every row's state.
void AppendRepositoryMetrics(const RepositorySnapshot& snapshot, const FailureCounters& unrouted,
                             TextExposition* out);

// The status page's rows, one per PinnedVersion, with the active traffic policies' notes.
std::vector<DashboardVersion> DashboardRows(const RepositorySnapshot& snapshot);

}  // namespace harrier
