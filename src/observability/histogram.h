// Histogram: a Prometheus-style cumulative histogram that is cheap to record into from many
// threads at once.
//
// Values are unsigned integers in a base unit chosen by the owner (nanoseconds for durations,
// items for batch sizes); bucket upper bounds are in the same unit, and the exposition scales
// them (e.g. ns -> seconds) when it writes them (text_exposition.h).
//
// Observe() takes no lock: it finds the bucket by binary search over the bounds and does two
// relaxed atomic adds (the bucket and the sum) in a shard picked by the calling thread, so two
// threads recording into the same histogram rarely share a cache line. Count is the sum of
// the buckets, so a reader never sees a _count that disagrees with the +Inf bucket; it may see
// a _sum that is a few observations ahead or behind, which Prometheus tolerates (rate() over
// a scrape interval).
//
// Thread safety: Observe() and Snapshot() from any thread. The bounds are constant after
// construction.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace harrier {

// Ascending, distinct bucket upper bounds in a histogram's base unit; the implicit last bucket
// is +Inf.
struct HistogramBuckets {
  std::vector<uint64_t> upper_bounds;

  // Durations in nanoseconds: the R10 preferred numbers (1, 1.25, 1.6, 2, 2.5, 3.15, 4, 5,
  // 6.3, 8 per decade, a ratio of about 1.26) from 50 us to 10 s, 54 bounds. A P99 read with
  // histogram_quantile() is then within about 26% of the true value (linear interpolation
  // inside a bucket), usually much closer.
  static const HistogramBuckets& Latency();
  // Batch sizes in items: 1, 2, 3, 4, 6, 8, 12, 16, ... 768, 1024 (powers of two and the
  // midpoints between them).
  static const HistogramBuckets& BatchSize();
};

struct HistogramSnapshot {
  std::vector<uint64_t> bucket_counts;  // per bucket, not cumulative; last = +Inf bucket
  uint64_t sum = 0;                     // in the base unit
  uint64_t count() const;
};

class Histogram {
 public:
  // `buckets` must outlive the histogram (the static ones above do).
  explicit Histogram(const HistogramBuckets& buckets);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void Observe(uint64_t value) {
    const size_t base = ShardIndex() * cells_per_shard_;
    Cell(base + BucketIndex(value)).fetch_add(1, std::memory_order_relaxed);
    Cell(base + sum_cell_).fetch_add(value, std::memory_order_relaxed);
  }

  // The sum over shards. Not a snapshot across buckets: observations made meanwhile may be
  // partly included.
  HistogramSnapshot Snapshot() const;
  std::span<const uint64_t> upper_bounds() const { return bounds_; }

  // Index of the bucket `value` falls in: the first bound >= value, or the +Inf bucket.
  size_t BucketIndex(uint64_t value) const;

  static constexpr size_t kShards = 8;

 private:
  // Each shard is a whole number of cache lines: its bucket cells, then its sum cell.
  struct alignas(64) Line {
    std::atomic<uint64_t> cells[8] = {};
  };
  std::atomic<uint64_t>& Cell(size_t i) const { return lines_[i / 8].cells[i % 8]; }
  // A per-thread index, assigned round robin on a thread's first observation.
  static size_t ShardIndex();

  // Constant after construction.
  const std::span<const uint64_t> bounds_;
  const size_t sum_cell_;         // = bounds_.size() + 1 (the +Inf bucket comes before it)
  const size_t cells_per_shard_;  // sum_cell_ + 1, rounded up to whole lines
  const std::unique_ptr<Line[]> lines_;
};

}  // namespace harrier
