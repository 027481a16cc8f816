// ShadowSampler: whether a request is also sent to the shadow version — a Bernoulli draw of
// `percent` from a random 64-bit value the caller supplies (no randomness of its own, so tests
// and replays are deterministic).
//
// The value is mixed with a salt of its own before it is compared, so the same per-request
// random may feed both WeightedSplit and the sampler without the two decisions correlating.
// Pass a per-request random even for sticky policies: a sticky key would shadow the same
// clients every time.
//
// Value type, immutable after construction: any thread may call it.
#pragma once

#include <cstdint>

namespace harrier {

class ShadowSampler {
 public:
  // `percent` is clamped to 0..100; 0 never samples, 100 always does.
  explicit ShadowSampler(double percent);

  bool Sample(uint64_t random) const;

  double percent() const { return percent_; }

 private:
  double percent_;  // constant after construction, as are the two below
  // Sample() is true when the mixed value is below threshold_, or always when all_ is set
  // (2^64 does not fit in the threshold).
  uint64_t threshold_;
  bool all_;
};

}  // namespace harrier
