#include "routing/shadow_sampler.h"

#include <algorithm>
#include <cmath>

#include "routing/weighted_split.h"

namespace harrier {
namespace {

constexpr uint64_t kShadowSalt = 0xbb67ae8584caa73bULL;

}  // namespace

ShadowSampler::ShadowSampler(double percent)
    : percent_(std::isnan(percent) ? 0 : std::clamp(percent, 0.0, 100.0)) {
  // percent / 100 of the 64-bit range; a percent just under 100 may round up to 2^64.
  const double threshold = std::ldexp(percent_ / 100, 64);
  all_ = threshold >= 0x1p64;
  threshold_ = all_ ? 0 : static_cast<uint64_t>(threshold);
}

bool ShadowSampler::Sample(uint64_t random) const {
  return all_ || Mix64(random ^ kShadowSalt) < threshold_;
}

}  // namespace harrier
