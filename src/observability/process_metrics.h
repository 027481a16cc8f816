// Process metrics under Prometheus's standard names (what client libraries export as
// process_*), read from /proc at scrape time: nothing is recorded on the request path.
//
// Thread safety: the functions are stateless; call them from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "observability/text_exposition.h"

namespace harrier {

struct ProcessSample {
  double cpu_seconds = 0;  // user + system time
  uint64_t resident_memory_bytes = 0;
  uint64_t virtual_memory_bytes = 0;
  double start_time_seconds = 0;  // since the Unix epoch
  uint64_t open_fds = 0;
  std::optional<uint64_t> max_fds;  // the soft RLIMIT_NOFILE; none when unlimited
  uint64_t threads = 0;
};

// Parses the content of /proc/<pid>/stat (fields after the parenthesised command name, which
// may itself hold spaces and parentheses). `ticks_per_second` is sysconf(_SC_CLK_TCK),
// `page_bytes` the page size, `boot_time_seconds` /proc/stat's btime. Fills cpu_seconds,
// resident and virtual memory, start time and threads; false when the text does not parse.
bool ParseProcStat(std::string_view stat, double ticks_per_second, uint64_t page_bytes,
                   double boot_time_seconds, ProcessSample* out);

// This process, from /proc/self; nullopt when /proc cannot be read (not Linux).
std::optional<ProcessSample> ReadProcessSample();

// process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
// process_start_time_seconds, process_open_fds, process_max_fds, process_threads.
void AppendProcessMetrics(const ProcessSample& sample, TextExposition* out);

}  // namespace harrier
