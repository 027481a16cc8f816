#include "protocol/kserve/server_timing.h"

#include <charconv>
#include <cstring>

namespace harrier::kserve {

void ServerTimingValue::Append(std::string_view s) {
  std::memcpy(text_ + size_, s.data(), s.size());  // within kMaxBytes: see AppendMetric
  size_ += s.size();
}

// `name;dur=<ms with 3 decimals>`, rounded to the nearest microsecond. At most 2 + 6 + 5 + 20 + 4
// bytes (", ", the longest name, ";dur=", a uint64_t's digits, ".ddd"): five fit in kMaxBytes.
void ServerTimingValue::AppendMetric(std::string_view name, uint64_t ns) {
  if (size_ > 0) Append(", ");
  Append(name);
  Append(";dur=");
  const uint64_t us = ns / 1000 + (ns % 1000 >= 500 ? 1 : 0);
  char digits[20];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), us / 1000);
  (void)ec;  // 20 digits hold any uint64_t
  Append(std::string_view(digits, static_cast<std::size_t>(end - digits)));
  const uint64_t frac = us % 1000;
  const char decimals[4] = {'.', static_cast<char>('0' + frac / 100),
                            static_cast<char>('0' + frac / 10 % 10),
                            static_cast<char>('0' + frac % 10)};
  Append(std::string_view(decimals, sizeof(decimals)));
}

ServerTimingValue FormatServerTiming(const InferenceTiming& timing, uint64_t output_ns,
                                     uint64_t total_ns) {
  ServerTimingValue out;
  out.AppendMetric("queue", timing.queue_ns);
  out.AppendMetric("input", timing.compute_input_ns);
  out.AppendMetric("infer", timing.compute_infer_ns);
  out.AppendMetric("output", output_ns);
  out.AppendMetric("total", total_ns);
  return out;
}

}  // namespace harrier::kserve
