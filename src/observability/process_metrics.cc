#include "observability/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace harrier {
namespace {

using Type = TextExposition::Type;

std::optional<std::string> ReadFile(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool ParseU64(std::string_view s, uint64_t* out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

std::optional<double> BootTimeSeconds() {
  auto stat = ReadFile("/proc/stat");
  if (!stat) return std::nullopt;
  const size_t at = stat->find("\nbtime ");
  if (at == std::string::npos) return std::nullopt;
  const size_t start = at + 7;
  const size_t end = stat->find('\n', start);
  uint64_t btime = 0;
  if (!ParseU64(std::string_view(*stat).substr(start, end - start), &btime)) return std::nullopt;
  return static_cast<double>(btime);
}

uint64_t CountOpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  uint64_t n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n > 0 ? n - 1 : 0;  // not counting the descriptor opendir() itself holds
}

}  // namespace

bool ParseProcStat(std::string_view stat, double ticks_per_second, uint64_t page_bytes,
                   double boot_time_seconds, ProcessSample* out) {
  // "pid (comm) state ppid ...": the command may hold anything, so split after its last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return false;
  std::vector<std::string_view> fields;  // fields[0] is field 3 (state)
  std::string_view rest = stat.substr(close + 1);
  while (!rest.empty()) {
    const size_t begin = rest.find_first_not_of(" \n");
    if (begin == std::string_view::npos) break;
    rest.remove_prefix(begin);
    const size_t end = std::min(rest.find_first_of(" \n"), rest.size());
    fields.push_back(rest.substr(0, end));
    rest.remove_prefix(end);
  }
  // proc(5) numbers fields from 1; field n is fields[n - 3].
  auto field = [&](size_t n, uint64_t* v) {
    return n - 3 < fields.size() && ParseU64(fields[n - 3], v);
  };
  uint64_t utime, stime, threads, starttime, vsize, rss;
  if (!field(14, &utime) || !field(15, &stime) || !field(20, &threads) || !field(22, &starttime) ||
      !field(23, &vsize) || !field(24, &rss)) {
    return false;
  }
  out->cpu_seconds = static_cast<double>(utime + stime) / ticks_per_second;
  out->threads = threads;
  out->start_time_seconds = boot_time_seconds + static_cast<double>(starttime) / ticks_per_second;
  out->virtual_memory_bytes = vsize;
  out->resident_memory_bytes = rss * page_bytes;
  return true;
}

std::optional<ProcessSample> ReadProcessSample() {
  auto stat = ReadFile("/proc/self/stat");
  auto boot = BootTimeSeconds();
  if (!stat || !boot) return std::nullopt;
  ProcessSample sample;
  if (!ParseProcStat(*stat, static_cast<double>(sysconf(_SC_CLK_TCK)),
                     static_cast<uint64_t>(sysconf(_SC_PAGESIZE)), *boot, &sample)) {
    return std::nullopt;
  }
  sample.open_fds = CountOpenFds();
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    sample.max_fds = limit.rlim_cur;
  return sample;
}

void AppendProcessMetrics(const ProcessSample& sample, TextExposition* out) {
  out->Declare("process_cpu_seconds_total", Type::kCounter,
               "Total user and system CPU time spent in seconds.");
  out->Add("process_cpu_seconds_total", {}, sample.cpu_seconds);
  out->Declare("process_resident_memory_bytes", Type::kGauge, "Resident memory size in bytes.");
  out->Add("process_resident_memory_bytes", {}, sample.resident_memory_bytes);
  out->Declare("process_virtual_memory_bytes", Type::kGauge, "Virtual memory size in bytes.");
  out->Add("process_virtual_memory_bytes", {}, sample.virtual_memory_bytes);
  out->Declare("process_start_time_seconds", Type::kGauge,
               "Start time of the process since unix epoch in seconds.");
  out->Add("process_start_time_seconds", {}, sample.start_time_seconds);
  out->Declare("process_open_fds", Type::kGauge, "Number of open file descriptors.");
  out->Add("process_open_fds", {}, sample.open_fds);
  if (sample.max_fds) {
    out->Declare("process_max_fds", Type::kGauge, "Maximum number of open file descriptors.");
    out->Add("process_max_fds", {}, *sample.max_fds);
  }
  out->Declare("process_threads", Type::kGauge, "Number of OS threads in the process.");
  out->Add("process_threads", {}, sample.threads);
}

}  // namespace harrier
