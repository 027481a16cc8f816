#include "protocol/kserve/server_timing.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace harrier::kserve {
namespace {

TEST(ServerTimingTest, MillisecondsWithThreeDecimalsInStageOrder) {
  InferenceTiming t;
  t.queue_ns = 12'000;             // 0.012 ms
  t.compute_input_ns = 3'400;      // 0.0034 ms -> 0.003
  t.compute_infer_ns = 1'250'600;  // 1.2506 ms -> 1.251
  EXPECT_EQ(FormatServerTiming(t, 999, 2'000'000'000).view(),
            "queue;dur=0.012, input;dur=0.003, infer;dur=1.251, output;dur=0.001, "
            "total;dur=2000.000");
}

TEST(ServerTimingTest, ZeroDurations) {
  EXPECT_EQ(FormatServerTiming({}, 0, 0).view(),
            "queue;dur=0.000, input;dur=0.000, infer;dur=0.000, output;dur=0.000, "
            "total;dur=0.000");
}

// The value has storage of its own (kMaxBytes): the longest durations still fit.
TEST(ServerTimingTest, LargestDurationsFit) {
  constexpr uint64_t kMax = UINT64_MAX;  // 18446744073709.551615 ms -> .552
  InferenceTiming t;
  t.queue_ns = t.compute_input_ns = t.compute_infer_ns = kMax;
  const ServerTimingValue value = FormatServerTiming(t, kMax, kMax);
  EXPECT_LE(value.view().size(), ServerTimingValue::kMaxBytes);
  EXPECT_EQ(value.view(),
            "queue;dur=18446744073709.552, input;dur=18446744073709.552, "
            "infer;dur=18446744073709.552, output;dur=18446744073709.552, "
            "total;dur=18446744073709.552");
}

}  // namespace
}  // namespace harrier::kserve
