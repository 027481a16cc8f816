#include "lifecycle/reconcile_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace harrier {
namespace {

using Versions = std::vector<int64_t>;

using Fingerprints = std::map<int64_t, uint64_t>;

ReconcileInputs In(Fingerprints serving, Fingerprints failed_before, Versions selected,
                   Fingerprints fingerprints, bool force = false, Fingerprints failed_reload = {}) {
  ReconcileInputs in;
  in.serving = std::move(serving);
  in.failed_before = std::move(failed_before);
  in.selected = std::move(selected);
  in.fingerprints = std::move(fingerprints);
  in.force = force;
  in.failed_reload = std::move(failed_reload);
  return in;
}

TEST(PlanReconcileTest, TheTable) {
  struct Case {
    std::string what;
    ReconcileInputs in;
    Versions to_load;
    Versions deselected;
    Versions forgotten = {};
  };
  const std::vector<Case> cases = {
      {"nothing serves yet: load what the policy selects",
       In({}, {}, {1, 2}, {{1, 11}, {2, 22}}),
       {1, 2},
       {}},
      {"nothing changed", In({{1, 11}}, {}, {1}, {{1, 11}}), {}, {}},
      {"a file changed: reload that version only",
       In({{1, 11}, {2, 22}}, {}, {1, 2}, {{1, 11}, {2, 23}}),
       {2},
       {}},
      {"a new version under latest: load it, the old one is deselected",
       In({{1, 11}}, {}, {2}, {{2, 22}}),
       {2},
       {1}},
      {"a version removed from the policy's choice",
       In({{1, 11}, {2, 22}}, {}, {2}, {{2, 22}}),
       {},
       {1}},
      {"failed before from the same files: not retried",
       In({{1, 11}}, {{2, 22}}, {2}, {{2, 22}}),
       {},
       {1}},
      {"failed before, files changed since: tried again",
       In({{1, 11}}, {{2, 22}}, {2}, {{2, 23}}),
       {2},
       {1}},
      {"forced (a load request): every selected version",
       In({{1, 11}}, {{2, 22}}, {1, 2}, {{1, 11}, {2, 22}}, true),
       {1, 2},
       {}},
      {"a failed version's directory removed: it leaves the index",
       In({{1, 11}}, {{2, 22}}, {1}, {{1, 11}}),
       {},
       {},
       {2}},
      {"a serving version's reload failed from these files: not retried",
       In({{1, 11}}, {}, {1}, {{1, 12}}, false, {{1, 12}}),
       {},
       {}},
      {"... until they change again", In({{1, 11}}, {}, {1}, {{1, 13}}, false, {{1, 12}}), {1}, {}},
      {"... or a load request forces it",
       In({{1, 11}}, {}, {1}, {{1, 12}}, true, {{1, 12}}),
       {1},
       {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const ReconcilePlan plan = PlanReconcile(c.in);
    EXPECT_EQ(plan.to_load, c.to_load);
    EXPECT_EQ(plan.deselected, c.deselected);
    EXPECT_EQ(plan.forgotten, c.forgotten);
    EXPECT_EQ(plan.nothing_to_do(),
              c.to_load.empty() && c.deselected.empty() && c.forgotten.empty());
  }
}

TEST(PlanReconcileTest, DeselectedVersionsRetireOnlyWhenEverySelectedOneServes) {
  EXPECT_TRUE(RetireDeselected({2}, {1, 2}));
  EXPECT_FALSE(RetireDeselected({2}, {1}));  // version 2 failed: version 1 goes on serving
  EXPECT_FALSE(RetireDeselected({2, 3}, {2}));
  EXPECT_TRUE(RetireDeselected({}, {1}));
}

}  // namespace
}  // namespace harrier
