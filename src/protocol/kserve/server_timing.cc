#include "protocol/kserve/server_timing.h"

#include <string_view>

namespace harrier::kserve {
namespace {

// `name;dur=<ms with 3 decimals>`, rounded to the nearest microsecond.
void AppendMetric(std::string* out, std::string_view name, uint64_t ns) {
  if (!out->empty()) out->append(", ");
  out->append(name);
  out->append(";dur=");
  const uint64_t us = (ns + 500) / 1000;
  out->append(std::to_string(us / 1000));
  out->push_back('.');
  const uint64_t frac = us % 1000;
  out->push_back(static_cast<char>('0' + frac / 100));
  out->push_back(static_cast<char>('0' + frac / 10 % 10));
  out->push_back(static_cast<char>('0' + frac % 10));
}

}  // namespace

std::string FormatServerTiming(const InferenceTiming& timing, uint64_t output_ns,
                               uint64_t total_ns) {
  std::string out;
  out.reserve(96);  // five metrics of ordinary size: one allocation
  AppendMetric(&out, "queue", timing.queue_ns);
  AppendMetric(&out, "input", timing.compute_input_ns);
  AppendMetric(&out, "infer", timing.compute_infer_ns);
  AppendMetric(&out, "output", output_ns);
  AppendMetric(&out, "total", total_ns);
  return out;
}

}  // namespace harrier::kserve
