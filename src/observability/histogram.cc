#include "observability/histogram.h"

#include <algorithm>

namespace harrier {
namespace {

HistogramBuckets MakeLatency() {
  // R10 mantissas in hundredths, so that every bound is an exact number of nanoseconds.
  static constexpr uint64_t kR10[] = {100, 125, 160, 200, 250, 315, 400, 500, 630, 800};
  HistogramBuckets b;
  for (uint64_t decade = 10'000; decade <= 10'000'000'000ull; decade *= 10) {  // 10 us .. 10 s
    for (uint64_t m : kR10) {
      const uint64_t ns = m * decade / 100;
      if (ns >= 50'000 && ns <= 10'000'000'000ull) b.upper_bounds.push_back(ns);
    }
  }
  return b;
}

HistogramBuckets MakeBatchSize() {
  HistogramBuckets b;
  for (uint64_t p = 1; p <= 1024; p *= 2) {
    b.upper_bounds.push_back(p);
    if (p >= 2 && p < 1024) b.upper_bounds.push_back(p + p / 2);
  }
  return b;
}

}  // namespace

const HistogramBuckets& HistogramBuckets::Latency() {
  static const HistogramBuckets buckets = MakeLatency();
  return buckets;
}

const HistogramBuckets& HistogramBuckets::BatchSize() {
  static const HistogramBuckets buckets = MakeBatchSize();
  return buckets;
}

uint64_t HistogramSnapshot::count() const {
  uint64_t n = 0;
  for (uint64_t c : bucket_counts) n += c;
  return n;
}

Histogram::Histogram(const HistogramBuckets& buckets)
    : bounds_(buckets.upper_bounds),
      sum_cell_(bounds_.size() + 1),
      cells_per_shard_((sum_cell_ + 1 + 7) / 8 * 8),
      lines_(new Line[kShards * cells_per_shard_ / 8]) {}

size_t Histogram::BucketIndex(uint64_t value) const {
  return static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                             bounds_.begin());
}

size_t Histogram::ShardIndex() {
  static std::atomic<size_t> next{0};
  thread_local const size_t index = next.fetch_add(1, std::memory_order_relaxed) % kShards;
  return index;
}

HistogramSnapshot Histogram::Snapshot() const {
  HistogramSnapshot s;
  s.bucket_counts.assign(bounds_.size() + 1, 0);
  for (size_t shard = 0; shard < kShards; ++shard) {
    const size_t base = shard * cells_per_shard_;
    for (size_t i = 0; i < s.bucket_counts.size(); ++i)
      s.bucket_counts[i] += Cell(base + i).load(std::memory_order_relaxed);
    s.sum += Cell(base + sum_cell_).load(std::memory_order_relaxed);
  }
  return s;
}

}  // namespace harrier
