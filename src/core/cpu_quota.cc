#include "core/cpu_quota.h"

#include <sched.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>

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

int UsableCoresUnder(const std::filesystem::path& cgroup_root, int affinity_cores) {
  return UsableCoresFrom(ReadFile(cgroup_root / "cpu.max"),
                         ReadFile(cgroup_root / "cpu" / "cpu.cfs_quota_us"),
                         ReadFile(cgroup_root / "cpu" / "cpu.cfs_period_us"), affinity_cores);
}

int UsableCores() {
  int affinity = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) affinity = CPU_COUNT(&set);
  if (affinity <= 0) affinity = static_cast<int>(std::thread::hardware_concurrency());
  return UsableCoresUnder("/sys/fs/cgroup", affinity);
}

uint64_t UsableMemoryBytesFrom(std::string_view memory_max, std::string_view v1_limit,
                               uint64_t physical_bytes) {
  uint64_t usable = physical_bytes;
  // "max" does not parse: unlimited; so does anything else that is not a count.
  std::optional<long long> limit = ParseInt(memory_max.empty() ? v1_limit : memory_max);
  if (limit && *limit > 0 && static_cast<uint64_t>(*limit) < usable)
    usable = static_cast<uint64_t>(*limit);
  return usable;
}

uint64_t UsableMemoryBytesUnder(const std::filesystem::path& cgroup_root, uint64_t physical_bytes) {
  return UsableMemoryBytesFrom(ReadFile(cgroup_root / "memory.max"),
                               ReadFile(cgroup_root / "memory" / "memory.limit_in_bytes"),
                               physical_bytes);
}

uint64_t UsableMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  const uint64_t physical = pages > 0 && page > 0
                                ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                                : std::numeric_limits<uint64_t>::max();
  return UsableMemoryBytesUnder("/sys/fs/cgroup", physical);
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
