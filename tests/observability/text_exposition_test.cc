#include "observability/text_exposition.h"

#include <gtest/gtest.h>

namespace harrier {
namespace {

using Type = TextExposition::Type;

TEST(TextExpositionTest, LabelValuesAreEscaped) {
  std::string out;
  AppendEscapedLabelValue(&out, "a\\b\"c\nd");
  EXPECT_EQ(out, "a\\\\b\\\"c\\nd");
  TextExposition e;
  e.Declare("m", Type::kGauge, "help with \\ and\nnewline");
  e.Add("m", {{"model", "x\"y"}}, uint64_t{1});
  EXPECT_EQ(e.Text(),
            "# HELP m help with \\\\ and\\nnewline\n"
            "# TYPE m gauge\n"
            "m{model=\"x\\\"y\"} 1\n");
}

TEST(TextExpositionTest, SamplesOfAFamilyAreWrittenTogetherInDeclarationOrder) {
  TextExposition e;
  e.Declare("b_total", Type::kCounter, "B");
  e.Declare("a", Type::kGauge, "A");
  e.Declare("unused", Type::kGauge, "never sampled");
  // A collector that walks models first and families second.
  for (std::string_view model : {"m1", "m2"}) {
    e.Add("a", {{"model", model}}, 0.5);
    e.Add("b_total", {{"model", model}}, uint64_t{7});
  }
  EXPECT_EQ(e.Text(),
            "# HELP b_total B\n# TYPE b_total counter\n"
            "b_total{model=\"m1\"} 7\nb_total{model=\"m2\"} 7\n"
            "# HELP a A\n# TYPE a gauge\n"
            "a{model=\"m1\"} 0.5\na{model=\"m2\"} 0.5\n");
}

TEST(TextExpositionTest, DeclaringTwiceKeepsTheFirst) {
  TextExposition e;
  e.Declare("x", Type::kCounter, "first");
  e.Declare("x", Type::kGauge, "second");
  e.Add("x", {}, uint64_t{3});
  EXPECT_EQ(e.Text(), "# HELP x first\n# TYPE x counter\nx 3\n");
}

TEST(TextExpositionTest, HistogramHasCumulativeBucketsInfSumAndCount) {
  HistogramBuckets buckets{{50'000, 125'000, 1'000'000'000}};
  Histogram h(buckets);
  for (uint64_t v : {40'000, 100'000, 100'000, 2'000'000'000}) h.Observe(v);
  TextExposition e;
  e.Declare("d_seconds", Type::kHistogram, "D");
  e.AddHistogram("d_seconds", {{"model", "m"}, {"version", "1"}}, h.upper_bounds(), h.Snapshot(),
                 1e9);
  EXPECT_EQ(e.Text(),
            "# HELP d_seconds D\n# TYPE d_seconds histogram\n"
            "d_seconds_bucket{model=\"m\",version=\"1\",le=\"0.00005\"} 1\n"
            "d_seconds_bucket{model=\"m\",version=\"1\",le=\"0.000125\"} 3\n"
            "d_seconds_bucket{model=\"m\",version=\"1\",le=\"1\"} 3\n"
            "d_seconds_bucket{model=\"m\",version=\"1\",le=\"+Inf\"} 4\n"
            "d_seconds_sum{model=\"m\",version=\"1\"} 2.00024\n"
            "d_seconds_count{model=\"m\",version=\"1\"} 4\n");
}

TEST(TextExpositionTest, EveryLatencyBoundPrintsAsAPlainDecimal) {
  for (uint64_t ns : HistogramBuckets::Latency().upper_bounds) {
    const std::string le = FormatSampleValue(static_cast<double>(ns) / 1e9);
    EXPECT_EQ(le.find('e'), std::string::npos) << le;
    EXPECT_LE(le.size(), 9u) << le;  // "0.000063", "0.00315", "10"
    EXPECT_EQ(std::stod(le), static_cast<double>(ns) / 1e9);
  }
}

TEST(TextExpositionTest, SampleValues) {
  EXPECT_EQ(FormatSampleValue(0), "0");
  EXPECT_EQ(FormatSampleValue(3), "3");
  EXPECT_EQ(FormatSampleValue(0.25), "0.25");
  EXPECT_EQ(FormatSampleValue(1e300), "1e+300");
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatSampleValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

TEST(TextExpositionTest, UndeclaredFamilyIsUntyped) {
  TextExposition e;
  e.Add("x", {}, 1.5);
  EXPECT_EQ(e.Text(), "# TYPE x untyped\nx 1.5\n");
}

}  // namespace
}  // namespace harrier
