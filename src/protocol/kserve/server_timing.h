// The Server-Timing response header (W3C Server Timing) of an inference: where the request's
// time went inside the server, so that a client can tell queueing from compute.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "harrier/inference_request.h"

namespace harrier::kserve {

// A formatted Server-Timing value in storage of its own, so that formatting one allocates
// nothing (issue 10): the header list copies it in (harrier/http_headers.h).
class ServerTimingValue {
 public:
  // Five metrics with the largest durations a uint64_t of nanoseconds holds fit.
  static constexpr std::size_t kMaxBytes = 192;

  std::string_view view() const { return {text_, size_}; }

 private:
  friend ServerTimingValue FormatServerTiming(const InferenceTiming&, uint64_t, uint64_t);
  void Append(std::string_view s);
  void AppendMetric(std::string_view name, uint64_t ns);

  char text_[kMaxBytes];
  std::size_t size_ = 0;
};

// "queue;dur=Q, input;dur=I, infer;dur=F, output;dur=O, total;dur=T": milliseconds with three
// decimals (microsecond resolution). queue, input and infer are the model's (`timing`), output
// the response encoding, total from receipt of the whole request to the encoded response.
ServerTimingValue FormatServerTiming(const InferenceTiming& timing, uint64_t output_ns,
                                     uint64_t total_ns);

}  // namespace harrier::kserve
