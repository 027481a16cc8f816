#include "repository/version_policy.h"

#include <algorithm>

namespace harrier {
namespace {

void SortUnique(std::vector<int64_t>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

}  // namespace

VersionSelection SelectVersions(const inference::ModelVersionPolicy& policy,
                                std::vector<int64_t> available) {
  SortUnique(&available);
  VersionSelection result;
  switch (policy.policy_choice_case()) {
    case inference::ModelVersionPolicy::kAll: result.selected = std::move(available); break;
    case inference::ModelVersionPolicy::kSpecific: {
      std::vector<int64_t> wanted(policy.specific().versions().begin(),
                                  policy.specific().versions().end());
      SortUnique(&wanted);
      for (int64_t v : wanted) {
        if (std::binary_search(available.begin(), available.end(), v)) {
          result.selected.push_back(v);
        } else {
          result.missing.push_back(v);
        }
      }
      break;
    }
    case inference::ModelVersionPolicy::kLatest:
    case inference::ModelVersionPolicy::POLICY_CHOICE_NOT_SET: {
      // num_versions 0 is "not set": Triton documents its default as 1.
      size_t n = policy.has_latest() ? policy.latest().num_versions() : 1;
      if (n == 0) n = 1;
      n = std::min(n, available.size());
      result.selected.assign(available.end() - static_cast<std::ptrdiff_t>(n), available.end());
      break;
    }
  }
  return result;
}

}  // namespace harrier
