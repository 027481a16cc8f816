#include "observability/process_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace harrier {
namespace {

using ::testing::HasSubstr;

// A /proc/<pid>/stat line whose command holds spaces and a ')'; utime 250, stime 150 ticks,
// 7 threads, started 1000 ticks after boot, 4096000 bytes virtual, 300 pages resident.
constexpr std::string_view kStat =
    "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 7 0 1000 "
    "4096000 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n";

TEST(ProcessMetricsTest, ParsesProcStat) {
  ProcessSample s;
  ASSERT_TRUE(ParseProcStat(kStat, 100.0, 4096, 1'700'000'000.0, &s));
  EXPECT_DOUBLE_EQ(s.cpu_seconds, 4.0);
  EXPECT_EQ(s.threads, 7u);
  EXPECT_DOUBLE_EQ(s.start_time_seconds, 1'700'000'010.0);
  EXPECT_EQ(s.virtual_memory_bytes, 4'096'000u);
  EXPECT_EQ(s.resident_memory_bytes, 300u * 4096);
}

TEST(ProcessMetricsTest, RejectsTruncatedStat) {
  ProcessSample s;
  EXPECT_FALSE(ParseProcStat("4242 (cmd) S 1 2 3", 100.0, 4096, 0, &s));
  EXPECT_FALSE(ParseProcStat("garbage", 100.0, 4096, 0, &s));
}

TEST(ProcessMetricsTest, ReadsThisProcess) {
  auto s = ReadProcessSample();
  ASSERT_TRUE(s.has_value());
  EXPECT_GT(s->resident_memory_bytes, 0u);
  EXPECT_GE(s->open_fds, 3u);  // stdin, stdout, stderr
  EXPECT_GT(s->start_time_seconds, 1'500'000'000.0);
  EXPECT_GE(s->threads, 1u);
}

TEST(ProcessMetricsTest, Exposition) {
  ProcessSample s;
  s.cpu_seconds = 1.5;
  s.resident_memory_bytes = 1024;
  s.start_time_seconds = 1'700'000'010;
  s.open_fds = 9;
  s.max_fds = 1024;
  TextExposition e;
  AppendProcessMetrics(s, &e);
  const std::string text = e.Text();
  EXPECT_THAT(
      text, HasSubstr("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n"));
  EXPECT_THAT(text, HasSubstr("process_resident_memory_bytes 1024\n"));
  EXPECT_THAT(text, HasSubstr("process_start_time_seconds 1700000010\n"));
  EXPECT_THAT(text, HasSubstr("process_open_fds 9\n"));
  EXPECT_THAT(text, HasSubstr("process_max_fds 1024\n"));
}

}  // namespace
}  // namespace harrier
