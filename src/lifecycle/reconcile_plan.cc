#include "lifecycle/reconcile_plan.h"

#include <algorithm>

namespace harrier {

ReconcilePlan PlanReconcile(const ReconcileInputs& in) {
  ReconcilePlan plan;
  for (int64_t v : in.selected) {
    const auto fp = in.fingerprints.find(v);
    const uint64_t now = fp == in.fingerprints.end() ? 0 : fp->second;
    const auto serving = in.serving.find(v);
    const bool unchanged = serving != in.serving.end() && serving->second == now;
    const auto failed = in.failed_before.find(v);
    const bool failed_unchanged = failed != in.failed_before.end() && failed->second == now;
    const auto reload = in.failed_reload.find(v);
    const bool reload_failed_unchanged = reload != in.failed_reload.end() && reload->second == now;
    if (in.force || (!unchanged && !failed_unchanged && !reload_failed_unchanged))
      plan.to_load.push_back(v);
  }
  auto selected = [&](int64_t v) {
    return std::find(in.selected.begin(), in.selected.end(), v) != in.selected.end();
  };
  for (const auto& [v, fingerprint] : in.serving)
    if (!selected(v)) plan.deselected.push_back(v);
  for (const auto& [v, fingerprint] : in.failed_before)
    if (!selected(v)) plan.forgotten.push_back(v);
  return plan;
}

bool RetireDeselected(const std::vector<int64_t>& selected, const std::set<int64_t>& ready) {
  return std::all_of(selected.begin(), selected.end(),
                     [&](int64_t v) { return ready.contains(v); });
}

}  // namespace harrier
