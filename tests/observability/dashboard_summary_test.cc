#include "observability/dashboard_summary.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <vector>

namespace harrier {
namespace {

// Bounds 10, 20, 40 and +Inf.
const std::vector<uint64_t> kBounds = {10, 20, 40};

double Q(double q, std::vector<uint64_t> counts) {
  return HistogramQuantile(q, kBounds, counts);
}

TEST(HistogramQuantileTest, InterpolatesInsideTheBucketLikePrometheus) {
  struct Case {
    double q;
    std::vector<uint64_t> counts;
    double want;
  };
  const Case cases[] = {
      {0.5, {10, 0, 0, 0}, 5},     // rank 5 of 10 in [0, 10]
      {1.0, {10, 0, 0, 0}, 10},    // the top of the only bucket
      {0.5, {0, 4, 0, 0}, 15},     // rank 2 of 4 in (10, 20]
      {0.5, {2, 2, 0, 0}, 10},     // rank 2: the top of the first bucket
      {0.75, {2, 2, 0, 0}, 15},    // rank 3: half way through the second
      {0.99, {90, 0, 10, 0}, 38},  // rank 99: 9 of 10 into (20, 40]
      {0.99, {90, 0, 0, 10}, 40},  // rank in +Inf: the highest finite bound
      {0.0, {0, 0, 3, 0}, 20},     // q 0: the bottom of the first bucket with observations
  };
  for (const Case& c : cases) {
    EXPECT_DOUBLE_EQ(Q(c.q, c.counts), c.want) << "q=" << c.q;
  }
}

TEST(HistogramQuantileTest, NaNWithoutObservationsOrForABadQuantile) {
  EXPECT_TRUE(std::isnan(Q(0.5, {0, 0, 0, 0})));
  EXPECT_TRUE(std::isnan(Q(1.5, {1, 0, 0, 0})));
  EXPECT_TRUE(std::isnan(Q(-0.1, {1, 0, 0, 0})));
  EXPECT_TRUE(std::isnan(Q(0.5, {1, 0, 0})));  // wrong number of buckets
}

TEST(DashboardSummaryJsonTest, OneRowPerVersionWithLifetimeQuantilesAndBuckets) {
  Histogram histogram(HistogramBuckets::Latency());
  for (int i = 0; i < 100; ++i) histogram.Observe(1'000'000);  // 1 ms: the bound 1'000'000 ns
  DashboardVersion ready;
  ready.state = {"simple", 1, ModelState::kReady, ""};
  ready.loaded = true;
  ready.success_count = 100;
  ready.failure_count = 3;
  ready.queue_depth = 2;
  ready.in_flight = 4;
  ready.traffic = "weight 90";
  ready.request_duration = histogram.Snapshot();
  DashboardVersion broken;
  broken.state = {"broken", 0, ModelState::kUnavailable, "no \"model.onnx\""};

  const std::string json =
      DashboardSummaryJson({ready, broken}, HistogramBuckets::Latency().upper_bounds);
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(json);

  simdjson::dom::array bounds = doc["latency_bounds_seconds"];
  ASSERT_EQ(bounds.size(), HistogramBuckets::Latency().upper_bounds.size());
  EXPECT_DOUBLE_EQ(double(bounds.at(0)), 50e-6);

  simdjson::dom::array versions = doc["versions"];
  ASSERT_EQ(versions.size(), 2u);
  simdjson::dom::element v = versions.at(0);
  EXPECT_EQ(std::string_view(v["name"]), "simple");
  EXPECT_EQ(int64_t(v["version"]), 1);
  EXPECT_EQ(std::string_view(v["state"]), "READY");
  EXPECT_EQ(uint64_t(v["success"]), 100u);
  EXPECT_EQ(uint64_t(v["failure"]), 3u);
  EXPECT_EQ(uint64_t(v["queue_depth"]), 2u);
  EXPECT_EQ(int64_t(v["in_flight"]), 4);
  EXPECT_EQ(std::string_view(v["traffic"]), "weight 90");
  EXPECT_EQ(std::string_view(versions.at(1)["traffic"]), "");
  // Every observation is in the bucket (800 us, 1 ms]: P50 half way, P99 near its top.
  EXPECT_NEAR(double(v["p50_seconds"]), 0.9e-3, 1e-12);
  EXPECT_NEAR(double(v["p99_seconds"]), 0.998e-3, 1e-12);
  simdjson::dom::array buckets = v["duration_buckets"];
  ASSERT_EQ(buckets.size(), HistogramBuckets::Latency().upper_bounds.size() + 1);
  uint64_t total = 0;
  for (simdjson::dom::element c : buckets) total += uint64_t(c);
  EXPECT_EQ(total, 100u);

  simdjson::dom::element b = versions.at(1);
  EXPECT_EQ(std::string_view(b["state"]), "UNAVAILABLE");
  EXPECT_EQ(std::string_view(b["reason"]), "no \"model.onnx\"");
  EXPECT_TRUE(b["p50_seconds"].is_null());
  EXPECT_TRUE(b["p99_seconds"].is_null());
  EXPECT_EQ(simdjson::dom::array(b["duration_buckets"]).size(), 0u);
  EXPECT_TRUE(v["generated_tokens"].error()) << "a tensor model has no token figures";
}

TEST(DashboardSummaryJsonTest, AGeneratingVersionHasItsTokenCountAndTimeToFirstToken) {
  Histogram ttft(HistogramBuckets::Latency());
  for (int i = 0; i < 10; ++i) ttft.Observe(1'000'000);
  DashboardVersion llm;
  llm.state = {"llm", 1, ModelState::kReady, ""};
  llm.loaded = true;
  llm.generative = true;
  llm.generated_tokens = 4321;
  llm.time_to_first_token = ttft.Snapshot();
  DashboardVersion idle = llm;
  idle.time_to_first_token = Histogram(HistogramBuckets::Latency()).Snapshot();
  const std::string json =
      DashboardSummaryJson({llm, idle}, HistogramBuckets::Latency().upper_bounds);
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(json);
  simdjson::dom::element v = doc["versions"].at(0);
  EXPECT_EQ(uint64_t(v["generated_tokens"]), 4321u);
  EXPECT_NEAR(double(v["ttft_p50_seconds"]), 0.9e-3, 1e-12);
  EXPECT_NEAR(double(v["ttft_p99_seconds"]), 0.998e-3, 1e-12);
  EXPECT_TRUE(doc["versions"].at(1)["ttft_p50_seconds"].is_null());
}

}  // namespace
}  // namespace harrier
