// How many cores this process may really use: the smallest of the CPU affinity mask and the
// cgroup CPU quota (v2 `cpu.max`, or v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`), rounded up.
// Containers often show every host core to nproc while the quota allows two.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

namespace harrier {

// Pure part, for tests: `cpu_max` is the content of cgroup v2 `cpu.max` ("max 100000" or
// "200000 100000"; empty when absent); `cfs_quota` / `cfs_period` the v1 files (empty when
// absent; quota -1 means unlimited). `affinity_cores` is the count from sched_getaffinity.
// Returns at least 1.
int UsableCoresFrom(std::string_view cpu_max, std::string_view cfs_quota,
                    std::string_view cfs_period, int affinity_cores);

// UsableCoresFrom() over the files under `cgroup_root`: `cpu.max` (v2), `cpu/cpu.cfs_quota_us` and
// `cpu/cpu.cfs_period_us` (v1); a file that is missing or unreadable reads as empty. The seam
// UsableCores() reads /sys/fs/cgroup through, so that tests can point it at a folder of their own.
int UsableCoresUnder(const std::filesystem::path& cgroup_root, int affinity_cores);

// UsableCoresUnder("/sys/fs/cgroup", the affinity mask of the calling thread).
int UsableCores();

// The CPU numbers in the calling thread's affinity mask, ascending (for pinning threads).
std::vector<int> AllowedCpus();

}  // namespace harrier
