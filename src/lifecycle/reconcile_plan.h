// PlanReconcile: what bringing one model to its repository's state must do — the poll diff —
// as a pure function of what serves, what failed before, what the version policy selects now
// and the fingerprints of the selected versions' files (repository/model_fingerprint.h). The
// model repository manager carries the plan out (docs/model-lifecycle.md).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

namespace harrier {

struct ReconcileInputs {
  std::map<int64_t, uint64_t> serving;        // READY version -> the fingerprint it loaded from
  std::map<int64_t, uint64_t> failed_before;  // UNAVAILABLE version -> the fingerprint that failed
  std::vector<int64_t> selected;              // the version policy's choice now, ascending
  std::map<int64_t, uint64_t> fingerprints;   // of each selected version's files now
  bool force = false;  // a load request or a config override: reload every selected version
  // READY version -> the fingerprint of the files it failed to reload from (it serves on)
  std::map<int64_t, uint64_t> failed_reload;
};

struct ReconcilePlan {
  // Versions to load: new ones, ones whose files changed, every selected one when forced; not
  // one that failed before from the same files, nor a serving one whose reload from the same
  // files failed (a poll does not retry either until they change).
  std::vector<int64_t> to_load;
  // Serving versions the policy no longer selects: they retire once every selected version
  // serves (RetireDeselected()), and go on serving otherwise.
  std::vector<int64_t> deselected;
  // Versions that failed before and are no longer selected (their directory removed, or the
  // policy changed): they leave the index, and no longer count against readiness.
  std::vector<int64_t> forgotten;

  bool nothing_to_do() const { return to_load.empty() && deselected.empty() && forgotten.empty(); }
};

ReconcilePlan PlanReconcile(const ReconcileInputs& inputs);

// Whether the deselected versions may retire, given the versions READY once the loads are done:
// only when every selected version is among them (a new version that failed leaves the old ones
// serving).
bool RetireDeselected(const std::vector<int64_t>& selected, const std::set<int64_t>& ready);

}  // namespace harrier
