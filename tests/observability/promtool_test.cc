// The whole exposition, as a scrape builds it, through `promtool check metrics` (Debian package
// prometheus): it must parse, and its linter may only object to Triton's nv_* names, which are
// kept as Triton spells them. promtool is part of the set-up (tools/deps.sh installs it): where it
// is missing the tests fail, so that a broken set-up cannot pass as "not run".
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "observability/model_metrics.h"
#include "observability/process_metrics.h"
#include "observability/text_exposition.h"

namespace harrier {
namespace {

constexpr const char* kPromtool = "/usr/bin/promtool";

constexpr const char* kPromtoolMissing =
    " is missing: install Debian's prometheus package (tools/deps.sh, run by `make deps`)";

struct PromtoolResult {
  int exit_code = -1;
  std::string output;
};

PromtoolResult Check(const std::string& exposition) {
  const std::string path =
      ::testing::TempDir() + "exposition-" + std::to_string(getpid()) + ".prom";
  std::ofstream(path) << exposition;
  const std::string command = std::string(kPromtool) + " check metrics < " + path + " 2>&1";
  PromtoolResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) result.output.append(buf, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::remove(path.c_str());
  return result;
}

std::string FullExposition(std::string_view model_name) {
  ModelVersionStats stats;
  stats.name = std::string(model_name);
  stats.version = 2;
  stats.success = {3, 3'000'000};
  ModelMetrics metrics;
  for (uint64_t ns : {40'000ull, 1'000'000ull, 20'000'000'000ull}) {
    metrics.request_duration.Observe(ns);
    metrics.queue_duration.Observe(ns / 10);
  }
  metrics.batch_size.Observe(4);
  metrics.failures.Add(FailureReason::kRejected);
  metrics.RecordCancellation(CancellationStage::kQueued);
  FailureCounters unrouted;
  unrouted.Add(FailureReason::kNotFound);

  TextExposition e;
  DeclareModelMetricFamilies(&e);
  AppendModelVersionMetrics({&stats, &metrics, 2}, &e);
  AppendUnroutedFailures(unrouted, &e);
  AppendModelState({std::string(model_name), 2, ModelState::kReady, ""}, 1.5, 0, &e);
  AppendModelState({"broken", 0, ModelState::kUnavailable, "no versions"}, -1, 0, &e);
  if (auto process = ReadProcessSample()) AppendProcessMetrics(*process, &e);
  return e.Text();
}

// Drops every line that mentions a Triton family.
std::string WithoutTritonNames(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.find("nv_inference_") == std::string::npos) out += line + "\n";
  }
  return out;
}

TEST(PromtoolTest, HarrierFamiliesPassTheLinter) {
  ASSERT_EQ(access(kPromtool, X_OK), 0) << kPromtool << kPromtoolMissing;
  // A model name that needs escaping in a label value, and non-ASCII.
  const std::string text = WithoutTritonNames(FullExposition("we\"ird\\name\nmodèle"));
  PromtoolResult r = Check(text);
  EXPECT_EQ(r.exit_code, 0) << r.output << "\n" << text;
}

TEST(PromtoolTest, TritonNamesParseAndOnlyTheirNamesAreLinted) {
  ASSERT_EQ(access(kPromtool, X_OK), 0) << kPromtool << kPromtoolMissing;
  PromtoolResult r = Check(FullExposition("resnet"));
  // 3: lint problems only (1 would be a parse error).
  EXPECT_EQ(r.exit_code, 3) << r.output;
  std::istringstream in(r.output);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) {
      EXPECT_EQ(line.rfind("nv_inference_", 0), 0u) << line;
    }
  }
}

}  // namespace
}  // namespace harrier
