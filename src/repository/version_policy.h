// Version policy: which of a model's versions on disk should be served. A pure function of the
// policy and the versions found, so its tests are a table.
//
//   no policy (default)        latest { num_versions: 1 }
//   latest { num_versions: N } the N highest versions (all of them when fewer exist);
//                               N = 0 (not set) means 1, as Triton documents
//   all { }                    every version
//   specific { versions: [..] } those listed that exist; listed ones that do not exist are
//                               reported in `missing` (the caller decides how loud to be:
//                               Triton marks such a version UNAVAILABLE)
#pragma once

#include <cstdint>
#include <vector>

#include "repository/model_config.pb.h"

namespace harrier {

struct VersionSelection {
  std::vector<int64_t> selected;  // ascending, without duplicates
  std::vector<int64_t> missing;   // specific policy only: listed but not available; ascending
};

// `available` may be in any order and hold duplicates.
VersionSelection SelectVersions(const inference::ModelVersionPolicy& policy,
                                std::vector<int64_t> available);

}  // namespace harrier
