#include "core/cpu_quota.h"

#include <gtest/gtest.h>

namespace harrier {
namespace {

TEST(CpuQuotaTest, Table) {
  struct Row {
    const char* cpu_max;
    const char* cfs_quota;
    const char* cfs_period;
    int affinity;
    int want;
  };
  const Row rows[] = {
      {"", "", "", 8, 8},                          // no cgroup limits
      {"max 100000\n", "", "", 8, 8},              // v2 unlimited
      {"200000 100000\n", "", "", 8, 2},           // v2 two cores
      {"150000 100000", "", "", 8, 2},             // 1.5 cores round up
      {"50000 100000", "", "", 8, 1},              // half a core -> 1
      {"800000 100000", "", "", 2, 2},             // quota above affinity
      {"", "-1\n", "100000\n", 4, 4},              // v1 unlimited
      {"", "300000\n", "100000\n", 16, 3},         // v1 three cores
      {"garbage", "", "", 4, 4},                   // unreadable: ignore
      {"", "", "", 0, 1},                          // never below one
  };
  for (const Row& r : rows) {
    EXPECT_EQ(UsableCoresFrom(r.cpu_max, r.cfs_quota, r.cfs_period, r.affinity), r.want)
        << "cpu.max='" << r.cpu_max << "' quota='" << r.cfs_quota << "'";
  }
}

TEST(CpuQuotaTest, ThisMachineHasAtLeastOne) { EXPECT_GE(UsableCores(), 1); }

}  // namespace
}  // namespace harrier
