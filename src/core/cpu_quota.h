// How many cores this process may really use: the smallest of the CPU affinity mask and the
// cgroup CPU quota (v2 `cpu.max`, or v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`), rounded up.
// Containers often show every host core to nproc while the quota allows two. And how much memory
// it may use: the smaller of the physical memory and the cgroup memory limit (v2 `memory.max`,
// or v1 `memory.limit_in_bytes`), which a container's memory limit sets while /proc/meminfo
// still shows the host's.
#pragma once

#include <cstdint>
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
// `cpu/cpu.cfs_period_us` (v1); a file that is missing or unreadable reads as empty. Read in the
// process's own cgroup and every one above it up to the root, the smallest count winning:
// `proc_self_cgroup` is the text of /proc/self/cgroup ("0::/path" for v2, "N:cpu,cpuacct:/path"
// for v1); empty, or a path not under the root, reads the root alone. Inside a container's
// cgroup namespace the own cgroup is the root; a systemd unit's CPUQuota= (or a cgroup made by
// hand) sits below it (probe 75). The seam UsableCores() reads /sys/fs/cgroup through, so that
// tests can point it at a folder of their own.
int UsableCoresUnder(const std::filesystem::path& cgroup_root, int affinity_cores,
                     std::string_view proc_self_cgroup = {});

// UsableCoresUnder("/sys/fs/cgroup", the affinity mask of the calling thread, /proc/self/cgroup).
int UsableCores();

// Pure part, for tests: `memory_max` is the content of cgroup v2 `memory.max` ("max" or a byte
// count; empty when absent), `v1_limit` of v1 `memory/memory.limit_in_bytes` (an unlimited v1
// cgroup reads as a huge count). Returns the smallest of the limits and `physical_bytes`.
uint64_t UsableMemoryBytesFrom(std::string_view memory_max, std::string_view v1_limit,
                               uint64_t physical_bytes);

// UsableMemoryBytesFrom() over the files under `cgroup_root`, `memory.max` (v2) and
// `memory/memory.limit_in_bytes` (v1), in the process's own cgroup and every one above it, the
// smallest winning (as UsableCoresUnder).
uint64_t UsableMemoryBytesUnder(const std::filesystem::path& cgroup_root, uint64_t physical_bytes,
                                std::string_view proc_self_cgroup = {});

// UsableMemoryBytesUnder("/sys/fs/cgroup", the physical memory, /proc/self/cgroup); the
// physical memory alone when the cgroup files say nothing; UINT64_MAX when even that cannot be
// read.
uint64_t UsableMemoryBytes();

// The CPU numbers in the calling thread's affinity mask, ascending (for pinning threads).
std::vector<int> AllowedCpus();

}  // namespace harrier
