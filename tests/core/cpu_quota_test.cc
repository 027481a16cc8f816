#include "core/cpu_quota.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

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
      {"", "", "", 8, 8},                   // no cgroup limits
      {"max 100000\n", "", "", 8, 8},       // v2 unlimited
      {"200000 100000\n", "", "", 8, 2},    // v2 two cores
      {"150000 100000", "", "", 8, 2},      // 1.5 cores round up
      {"50000 100000", "", "", 8, 1},       // half a core -> 1
      {"800000 100000", "", "", 2, 2},      // quota above affinity
      {"", "-1\n", "100000\n", 4, 4},       // v1 unlimited
      {"", "300000\n", "100000\n", 16, 3},  // v1 three cores
      {"garbage", "", "", 4, 4},            // unreadable: ignore
      {"", "", "", 0, 1},                   // never below one
  };
  for (const Row& r : rows) {
    EXPECT_EQ(UsableCoresFrom(r.cpu_max, r.cfs_quota, r.cfs_period, r.affinity), r.want)
        << "cpu.max='" << r.cpu_max << "' quota='" << r.cfs_quota << "'";
  }
}

// A cgroup folder of the test's own: the files UsableCoresUnder() reads, as the kernel writes them.
class CgroupDir {
 public:
  CgroupDir() : root_(std::filesystem::path(::testing::TempDir()) / UniqueName()) {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "cpu");
  }
  ~CgroupDir() { std::filesystem::remove_all(root_); }

  // `relative`: "cpu.max" (v2), "cpu/cpu.cfs_quota_us" or "cpu/cpu.cfs_period_us" (v1).
  void Write(const std::string& relative, const std::string& content) {
    std::ofstream(root_ / relative) << content;
  }
  const std::filesystem::path& root() const { return root_; }

 private:
  static std::string UniqueName() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string("cgroup-") + info->name() + "-" + std::to_string(getpid());
  }
  std::filesystem::path root_;
};

TEST(CpuQuotaTest, ReadsCgroupV2CpuMax) {
  struct Row {
    const char* cpu_max;
    int affinity;
    int want;
  };
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  const Row rows[] = {
      {"max 100000\n", hardware, hardware},  // unlimited: the affinity mask's count
      {"200000 100000\n", 8, 2},
      {"150000 100000\n", 8, 2},  // 1.5 cores round up
      {"50000 100000\n", 8, 1},   // half a core: one
      {"800000 100000\n", 3, 3},  // quota above the affinity mask
      {"garbage\n", 5, 5},        // unreadable: the affinity mask's count
      {"", 6, 6},                 // empty file
  };
  for (const Row& r : rows) {
    CgroupDir dir;
    dir.Write("cpu.max", r.cpu_max);
    EXPECT_EQ(UsableCoresUnder(dir.root(), r.affinity), r.want) << "cpu.max='" << r.cpu_max << "'";
  }
}

TEST(CpuQuotaTest, ReadsCgroupV1CfsQuota) {
  CgroupDir dir;
  dir.Write("cpu/cpu.cfs_quota_us", "300000\n");
  dir.Write("cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(UsableCoresUnder(dir.root(), 16), 3);
  dir.Write("cpu/cpu.cfs_quota_us", "-1\n");  // unlimited
  EXPECT_EQ(UsableCoresUnder(dir.root(), 16), 16);
  dir.Write("cpu/cpu.cfs_quota_us", "250000\n");
  dir.Write("cpu/cpu.cfs_period_us", "");  // a quota without its period: ignored
  EXPECT_EQ(UsableCoresUnder(dir.root(), 16), 16);
}

TEST(CpuQuotaTest, OfCgroupV2AndV1TheSmallerCountWins) {
  CgroupDir dir;
  dir.Write("cpu.max", "100000 100000\n");
  dir.Write("cpu/cpu.cfs_quota_us", "400000\n");
  dir.Write("cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(UsableCoresUnder(dir.root(), 8), 1);
}

TEST(CpuQuotaTest, NoCgroupFilesMeansTheAffinityMask) {
  CgroupDir dir;
  EXPECT_EQ(UsableCoresUnder(dir.root(), 7), 7);
  EXPECT_EQ(UsableCoresUnder(dir.root() / "absent", 7), 7);
}

// The real thing: this machine's /sys/fs/cgroup and affinity mask, counted independently.
TEST(CpuQuotaTest, UsableCoresReadsSysFsCgroupAndTheAffinityMask) {
  const int affinity = static_cast<int>(AllowedCpus().size());
  ASSERT_GT(affinity, 0);
  EXPECT_EQ(UsableCores(), UsableCoresUnder("/sys/fs/cgroup", affinity));
}

TEST(MemoryQuotaTest, TheSmallerOfThePhysicalMemoryAndTheCgroupLimit) {
  constexpr uint64_t kPhysical = uint64_t{24} << 30;
  EXPECT_EQ(UsableMemoryBytesFrom("", "", kPhysical), kPhysical);       // no cgroup
  EXPECT_EQ(UsableMemoryBytesFrom("max\n", "", kPhysical), kPhysical);  // v2 unlimited
  EXPECT_EQ(UsableMemoryBytesFrom("2147483648\n", "", kPhysical), uint64_t{2} << 30);
  EXPECT_EQ(UsableMemoryBytesFrom("", "1073741824\n", kPhysical), uint64_t{1} << 30);  // v1
  // v1 "unlimited" is a count near 2^63: the physical memory stays.
  EXPECT_EQ(UsableMemoryBytesFrom("", "9223372036854771712\n", kPhysical), kPhysical);
  EXPECT_EQ(UsableMemoryBytesFrom("garbage", "", kPhysical), kPhysical);
  EXPECT_EQ(UsableMemoryBytesFrom("0\n", "", kPhysical), kPhysical);  // not a limit
  // Both there (a hybrid hierarchy, whose memory controller is v1's): the smaller.
  EXPECT_EQ(UsableMemoryBytesFrom("max\n", "1073741824\n", kPhysical), uint64_t{1} << 30);
}

// The limit of the process's own cgroup, or of any above it, not only the mount's root: a
// systemd unit's MemoryMax= or CPUQuota= sits below the root without a cgroup namespace (probe
// 75: a server in a 2 GiB cgroup sized its budgets from the host's 24 GiB).
TEST(MemoryQuotaTest, TheOwnCgroupAndThoseAboveItCount) {
  CgroupDir dir;
  std::filesystem::create_directories(dir.root() / "memory" / "a" / "b");
  std::filesystem::create_directories(dir.root() / "svc");
  const std::string v1 = "5:memory:/a/b\n1:cpu,cpuacct:/a\n0::/svc\n";
  dir.Write("memory/a/b/memory.limit_in_bytes", "3000\n");
  dir.Write("memory/a/memory.limit_in_bytes", "2000\n");  // the parent's is smaller: it wins
  dir.Write("memory/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_EQ(UsableMemoryBytesUnder(dir.root(), 100000, v1), 2000u);
  EXPECT_EQ(UsableMemoryBytesUnder(dir.root(), 100000), 100000u);  // the root alone says nothing
  dir.Write("svc/memory.max", "1500\n");                           // v2's own cgroup
  EXPECT_EQ(UsableMemoryBytesUnder(dir.root(), 100000, v1), 1500u);
  // A path that climbs out of the mount is the root alone.
  EXPECT_EQ(UsableMemoryBytesUnder(dir.root(), 100000, "0::/../../etc\n"), 100000u);

  std::filesystem::create_directories(dir.root() / "cpu" / "a");
  dir.Write("svc/cpu.max", "200000 100000\n");
  EXPECT_EQ(UsableCoresUnder(dir.root(), 8, v1), 2);
  dir.Write("cpu/a/cpu.cfs_quota_us", "100000\n");
  dir.Write("cpu/a/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(UsableCoresUnder(dir.root(), 8, v1), 1);
  EXPECT_EQ(UsableCoresUnder(dir.root(), 8), 8);
}

TEST(MemoryQuotaTest, ReadsTheCgroupFiles) {
  CgroupDir dir;
  std::filesystem::create_directories(dir.root() / "memory");
  EXPECT_EQ(UsableMemoryBytesUnder(dir.root(), 1000), 1000u);
  dir.Write("memory/memory.limit_in_bytes", "600\n");
  EXPECT_EQ(UsableMemoryBytesUnder(dir.root(), 1000), 600u);
  dir.Write("memory.max", "500\n");
  EXPECT_EQ(UsableMemoryBytesUnder(dir.root(), 1000), 500u);
  EXPECT_GT(UsableMemoryBytes(), 0u);
}

}  // namespace
}  // namespace harrier
