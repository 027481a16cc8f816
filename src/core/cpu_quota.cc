#include "core/cpu_quota.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace harrier {
namespace {

std::optional<long long> ParseInt(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

int QuotaCores(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return 0;
  return static_cast<int>((quota + period - 1) / period);
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The process's cgroup path in the hierarchy /proc/self/cgroup's line for it names: v2's
// "0::/path" when `v1_controller` is empty, else the v1 line whose controllers include it.
std::string OwnCgroupPath(std::string_view proc_self_cgroup, std::string_view v1_controller) {
  while (!proc_self_cgroup.empty()) {
    const size_t end = std::min(proc_self_cgroup.find('\n'), proc_self_cgroup.size());
    const std::string_view line = proc_self_cgroup.substr(0, end);
    proc_self_cgroup.remove_prefix(std::min(end + 1, proc_self_cgroup.size()));
    const size_t first = line.find(':');
    const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string_view path = line.substr(second + 1);
    if (v1_controller.empty()) {
      if (line.substr(0, first) == "0" && controllers.empty()) return std::string(path);
      continue;
    }
    for (std::string_view rest = controllers; !rest.empty();) {
      const size_t comma = std::min(rest.find(','), rest.size());
      if (rest.substr(0, comma) == v1_controller) return std::string(path);
      rest.remove_prefix(std::min(comma + 1, rest.size()));
    }
  }
  return {};
}

// `base`/`path` and each directory above it up to `base`, own first. A path that climbs out
// (".."), or none, is `base` alone.
std::vector<std::filesystem::path> UpToRoot(const std::filesystem::path& base,
                                            std::string_view path) {
  std::vector<std::filesystem::path> dirs;
  std::filesystem::path relative = std::filesystem::path(path).relative_path().lexically_normal();
  if (!relative.empty() && *relative.begin() == "..") relative.clear();
  for (; !relative.empty() && relative != "."; relative = relative.parent_path())
    dirs.push_back(base / relative);
  dirs.push_back(base);
  return dirs;
}

std::string ReadProcSelfCgroup() {
  return ReadFile("/proc/self/cgroup");
}

}  // namespace

int UsableCoresFrom(std::string_view cpu_max, std::string_view cfs_quota,
                    std::string_view cfs_period, int affinity_cores) {
  int cores = affinity_cores > 0 ? affinity_cores : 1;
  int quota_cores = 0;
  if (!cpu_max.empty()) {
    auto space = cpu_max.find(' ');
    if (space != std::string_view::npos) {
      auto quota = ParseInt(cpu_max.substr(0, space));  // "max" does not parse: unlimited
      auto period = ParseInt(cpu_max.substr(space + 1));
      if (quota && period) quota_cores = QuotaCores(*quota, *period);
    }
  } else if (!cfs_quota.empty() && !cfs_period.empty()) {
    auto quota = ParseInt(cfs_quota);
    auto period = ParseInt(cfs_period);
    if (quota && period) quota_cores = QuotaCores(*quota, *period);
  }
  if (quota_cores > 0 && quota_cores < cores) cores = quota_cores;
  return cores;
}

int UsableCoresUnder(const std::filesystem::path& cgroup_root, int affinity_cores,
                     std::string_view proc_self_cgroup) {
  int cores = UsableCoresFrom({}, {}, {}, affinity_cores);
  for (const auto& dir : UpToRoot(cgroup_root, OwnCgroupPath(proc_self_cgroup, {})))
    cores = std::min(cores, UsableCoresFrom(ReadFile(dir / "cpu.max"), {}, {}, affinity_cores));
  for (const auto& dir : UpToRoot(cgroup_root / "cpu", OwnCgroupPath(proc_self_cgroup, "cpu"))) {
    cores = std::min(cores, UsableCoresFrom({}, ReadFile(dir / "cpu.cfs_quota_us"),
                                            ReadFile(dir / "cpu.cfs_period_us"), affinity_cores));
  }
  return cores;
}

int UsableCores() {
  int affinity = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) affinity = CPU_COUNT(&set);
  if (affinity <= 0) affinity = static_cast<int>(std::thread::hardware_concurrency());
  return UsableCoresUnder("/sys/fs/cgroup", affinity, ReadProcSelfCgroup());
}

uint64_t UsableMemoryBytesFrom(std::string_view memory_max, std::string_view v1_limit,
                               uint64_t physical_bytes) {
  uint64_t usable = physical_bytes;
  // "max" does not parse: unlimited; so does anything else that is not a count.
  for (std::string_view text : {memory_max, v1_limit}) {
    const std::optional<long long> limit = ParseInt(text);
    if (limit && *limit > 0 && static_cast<uint64_t>(*limit) < usable)
      usable = static_cast<uint64_t>(*limit);
  }
  return usable;
}

uint64_t UsableMemoryBytesUnder(const std::filesystem::path& cgroup_root, uint64_t physical_bytes,
                                std::string_view proc_self_cgroup) {
  uint64_t usable = physical_bytes;
  for (const auto& dir : UpToRoot(cgroup_root, OwnCgroupPath(proc_self_cgroup, {})))
    usable = UsableMemoryBytesFrom(ReadFile(dir / "memory.max"), {}, usable);
  for (const auto& dir :
       UpToRoot(cgroup_root / "memory", OwnCgroupPath(proc_self_cgroup, "memory")))
    usable = UsableMemoryBytesFrom({}, ReadFile(dir / "memory.limit_in_bytes"), usable);
  return usable;
}

uint64_t UsableMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  const uint64_t physical = pages > 0 && page > 0
                                ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                                : std::numeric_limits<uint64_t>::max();
  return UsableMemoryBytesUnder("/sys/fs/cgroup", physical, ReadProcSelfCgroup());
}

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

}  // namespace harrier
