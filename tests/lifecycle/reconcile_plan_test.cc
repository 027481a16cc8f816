#include "lifecycle/reconcile_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace harrier {
namespace {

using Versions = std::vector<int64_t>;

TEST(PlanReconcileTest, TheTable) {
  struct Case {
    std::string what;
    ReconcileInputs in;
    Versions to_load;
    Versions deselected;
  };
  const std::vector<Case> cases = {
      {"nothing serves yet: load what the policy selects", {{}, {}, {1, 2}, {{1, 11}, {2, 22}}},
       {1, 2}, {}},
      {"nothing changed", {{{1, 11}}, {}, {1}, {{1, 11}}}, {}, {}},
      {"a file changed: reload that version only",
       {{{1, 11}, {2, 22}}, {}, {1, 2}, {{1, 11}, {2, 23}}}, {2}, {}},
      {"a new version under latest: load it, the old one is deselected",
       {{{1, 11}}, {}, {2}, {{2, 22}}}, {2}, {1}},
      {"a version removed from the policy's choice", {{{1, 11}, {2, 22}}, {}, {2}, {{2, 22}}}, {},
       {1}},
      {"failed before from the same files: not retried", {{{1, 11}}, {{2, 22}}, {2}, {{2, 22}}},
       {}, {1}},
      {"failed before, files changed since: tried again", {{{1, 11}}, {{2, 22}}, {2}, {{2, 23}}},
       {2}, {1}},
      {"forced (a load request): every selected version",
       {{{1, 11}}, {{2, 22}}, {1, 2}, {{1, 11}, {2, 22}}, true}, {1, 2}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const ReconcilePlan plan = PlanReconcile(c.in);
    EXPECT_EQ(plan.to_load, c.to_load);
    EXPECT_EQ(plan.deselected, c.deselected);
    EXPECT_EQ(plan.nothing_to_do(), c.to_load.empty() && c.deselected.empty());
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
