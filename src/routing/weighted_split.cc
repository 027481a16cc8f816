#include "routing/weighted_split.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace harrier {
namespace {

// Distinguishes version salts from other uses of Mix64 on small integers.
constexpr uint64_t kVersionSalt = 0x6a09e667f3bcc909ULL;

}  // namespace

uint64_t Mix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t HashKey(std::string_view value) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
  for (unsigned char c : value) {
    h ^= c;
    h *= 0x100000001b3ULL;  // FNV 64 prime
  }
  return Mix64(h);
}

WeightedSplit::WeightedSplit(const VersionWeights& weights) {
  for (const auto& [version, weight] : weights) {
    if (weight <= 0) continue;
    entries_.push_back({version, static_cast<double>(weight),
                        Mix64(static_cast<uint64_t>(version) ^ kVersionSalt)});
  }
}

double WeightedSplit::Score(const Entry& e, uint64_t key) const {
  // The top 53 bits as a uniform in (0, 1): never 0 (the log's pole) and never 1 (a zero
  // denominator).
  const double u = (static_cast<double>(Mix64(key ^ e.salt) >> 11) + 0.5) * 0x1p-53;
  return -e.weight / std::log(u);
}

int64_t WeightedSplit::Pick(uint64_t key) const {
  int64_t best = entries_.front().version;
  double best_score = Score(entries_.front(), key);
  for (size_t i = 1; i < entries_.size(); ++i) {
    const double s = Score(entries_[i], key);
    if (s > best_score) {  // ties (vanishingly rare) go to the lower version
      best_score = s;
      best = entries_[i].version;
    }
  }
  return best;
}

void WeightedSplit::Rank(uint64_t key, std::vector<int64_t>* out) const {
  out->clear();
  // Few versions: a small scored copy sorted once.
  std::vector<std::pair<double, int64_t>> scored;
  scored.reserve(entries_.size());
  for (const Entry& e : entries_) scored.emplace_back(Score(e, key), e.version);
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (const auto& [score, version] : scored) out->push_back(version);
}

VersionWeights WeightedSplit::weights() const {
  VersionWeights w;
  for (const Entry& e : entries_) w.emplace(e.version, static_cast<int64_t>(e.weight));
  return w;
}

}  // namespace harrier
