#include "observability/histogram.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace harrier {
namespace {

TEST(HistogramBucketsTest, LatencyIsTheR10SeriesFrom50usTo10s) {
  const std::vector<uint64_t>& b = HistogramBuckets::Latency().upper_bounds;
  ASSERT_EQ(b.size(), 54u);
  EXPECT_EQ(b.front(), 50'000u);  // 50 us
  EXPECT_EQ(b[1], 63'000u);
  EXPECT_EQ(b[3], 100'000u);             // 100 us
  EXPECT_EQ(b.back(), 10'000'000'000u);  // 10 s
  for (size_t i = 1; i < b.size(); ++i) {
    // Every step is the R10 ratio, 1.25..1.27: fine enough to read a P99 from.
    const double ratio = static_cast<double>(b[i]) / static_cast<double>(b[i - 1]);
    EXPECT_GT(ratio, 1.2) << i;
    EXPECT_LT(ratio, 1.3) << i;
  }
}

TEST(HistogramBucketsTest, BatchSizeHasPowersOfTwoAndMidpoints) {
  const std::vector<uint64_t> expected = {1,  2,  3,  4,   6,   8,   12,  16,  24,  32,
                                          48, 64, 96, 128, 192, 256, 384, 512, 768, 1024};
  EXPECT_EQ(HistogramBuckets::BatchSize().upper_bounds, expected);
}

TEST(HistogramTest, AValueGoesInTheFirstBucketWhoseBoundIsAtLeastIt) {
  HistogramBuckets buckets{{10, 20, 40}};
  Histogram h(buckets);
  struct Case {
    uint64_t value;
    size_t bucket;
  };
  for (const Case& c : {Case{0, 0}, Case{10, 0}, Case{11, 1}, Case{20, 1}, Case{21, 2}, Case{40, 2},
                        Case{41, 3}, Case{~0ull, 3}}) {
    EXPECT_EQ(h.BucketIndex(c.value), c.bucket) << c.value;
  }
}

TEST(HistogramTest, SnapshotHasPerBucketCountsAndTheSum) {
  HistogramBuckets buckets{{10, 20, 40}};
  Histogram h(buckets);
  for (uint64_t v : {5, 10, 15, 100, 1000}) h.Observe(v);
  HistogramSnapshot s = h.Snapshot();
  EXPECT_EQ(s.bucket_counts, (std::vector<uint64_t>{2, 1, 0, 2}));
  EXPECT_EQ(s.sum, 1130u);
  EXPECT_EQ(s.count(), 5u);
}

TEST(HistogramTest, TwoThreadsCountsAddUp) {
  Histogram h(HistogramBuckets::Latency());
  constexpr int kPerThread = 200'000;
  auto record = [&](uint64_t value) {
    for (int i = 0; i < kPerThread; ++i) h.Observe(value);
  };
  // Same bucket from both threads (the contended case) and a second bucket.
  std::thread a(record, 70'000), b(record, 70'000), c(record, 2'000'000);
  a.join();
  b.join();
  c.join();
  HistogramSnapshot s = h.Snapshot();
  EXPECT_EQ(s.count(), 3u * kPerThread);
  EXPECT_EQ(s.bucket_counts[h.BucketIndex(70'000)], 2u * kPerThread);
  EXPECT_EQ(s.bucket_counts[h.BucketIndex(2'000'000)], 1u * kPerThread);
  EXPECT_EQ(s.sum, uint64_t{kPerThread} * (70'000 + 70'000 + 2'000'000));
}

TEST(HistogramTest, SnapshotWhileRecordingNeverLosesCounts) {
  Histogram h(HistogramBuckets::Latency());
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    while (!stop.load()) h.Observe(123'456);
  });
  uint64_t last = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t now = h.Snapshot().count();
    EXPECT_GE(now, last);  // counts only grow
    last = now;
  }
  stop = true;
  writer.join();
}

}  // namespace
}  // namespace harrier
