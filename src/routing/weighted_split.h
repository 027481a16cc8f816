// WeightedSplit: which version answers a request, given the versions' weights and a 64-bit key
// — the traffic split of a TrafficPolicy.
//
// Weighted rendezvous hashing (highest random weight): for a key, each version with weight
// w > 0 draws u = a uniform in (0, 1) from a hash of (key, version), and scores -w / ln(u); the
// highest score wins. -ln(u) is exponential, so the winner is the smallest of independent
// exponentials of rates w_i: version i wins with probability w_i / sum(w), whatever the other
// versions are. That gives the two properties the split needs:
//   - shares follow the weights, and leaving versions out (an open circuit breaker) shares
//     their keys among the others in proportion to their weights (Rank());
//   - a weight change moves as few keys as possible: raising one version's weight only moves
//     keys to it, lowering it only moves keys away from it, and a new version takes keys only
//     for itself. Sticky clients keep their version through such a change unless theirs lost
//     weight.
// A version's hash depends only on the key and its own number, so the result depends on the
// weights only, never on the order or on which other versions are listed with weight 0.
//
// Keys: for a sticky policy, HashKey(the header's value); otherwise a per-request random
// 64-bit value from the caller (the split draws no randomness of its own).
//
// Value type, immutable after construction: any thread may call it.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "routing/traffic_policy.h"

namespace harrier {

// splitmix64's finalizer: a bijective 64-bit mix in which every input bit affects every output
// bit. Stable: sticky keys depend on it, so it must not change between releases.
uint64_t Mix64(uint64_t x);

// A sticky header's value -> a key for WeightedSplit: FNV-1a 64 over the bytes, then Mix64
// (FNV alone leaves similar strings' hashes close in the high bits). Stable across releases
// and processes (no per-process seed), so a client keeps its version across restarts.
uint64_t HashKey(std::string_view value);

class WeightedSplit {
 public:
  // Versions with weight 0 are left out. An empty split (no weight > 0) picks nothing.
  explicit WeightedSplit(const VersionWeights& weights);

  bool empty() const { return entries_.empty(); }

  // The version for `key`. REQUIRES: !empty().
  int64_t Pick(uint64_t key) const;

  // Every version with weight > 0, the key's preferred first: Pick(key) is (*out)[0], and the
  // first of (*out) that the caller accepts is the split renormalised over the accepted ones.
  // `out` is cleared first (its capacity reused).
  void Rank(uint64_t key, std::vector<int64_t>* out) const;

  // The versions with weight > 0, ascending, and their weights.
  VersionWeights weights() const;

 private:
  struct Entry {
    int64_t version;
    double weight;
    uint64_t salt;  // Mix64 of the version: the version's hash stream
  };
  double Score(const Entry& e, uint64_t key) const;

  std::vector<Entry> entries_;  // ascending version; constant after construction
};

}  // namespace harrier
