#include "observability/model_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

namespace harrier {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(FailureReasonTest, EveryStatusCodeHasABoundedReason) {
  struct Case {
    StatusCode code;
    std::string_view reason;
  };
  for (const Case& c :
       {Case{StatusCode::kInvalidArgument, "bad_request"},
        Case{StatusCode::kPayloadTooLarge, "bad_request"},
        Case{StatusCode::kUnimplemented, "bad_request"}, Case{StatusCode::kNotFound, "not_found"},
        Case{StatusCode::kDeadlineExceeded, "timeout"}, Case{StatusCode::kCancelled, "cancelled"},
        Case{StatusCode::kResourceExhausted, "rejected"},
        Case{StatusCode::kUnavailable, "unavailable"}, Case{StatusCode::kInternal, "internal"}}) {
    EXPECT_EQ(FailureReasonName(FailureReasonFor(c.code)), c.reason) << StatusCodeName(c.code);
  }
}

class ModelMetricsExpositionTest : public ::testing::Test {
 protected:
  ModelMetricsExpositionTest() {
    stats_.name = "resnet";
    stats_.version = 3;
    stats_.success = {5, 12'345'678};  // 12345.678 us
    stats_.fail = {2, 1000};
    stats_.queue = {5, 2'000'999};
    stats_.compute_input = {5, 1'000};
    stats_.compute_infer = {5, 7'000'000};
    stats_.compute_output = {5, 999};
    stats_.inference_count = 9;
    stats_.execution_count = 4;
    metrics_.request_duration.Observe(2'000'000);  // 2 ms
    metrics_.batch_size.Observe(3);
    metrics_.failures.Add(FailureReason::kTimeout);
    metrics_.failures.Add(FailureReason::kCancelled);
    metrics_.RecordCancellation(CancellationStage::kRunning);
    metrics_.in_flight = 2;
  }
  std::string Text(std::optional<double> predicted_queue_wait_seconds = std::nullopt) {
    TextExposition e;
    DeclareModelMetricFamilies(&e);
    ModelVersionSample sample;
    sample.stats = &stats_;
    sample.metrics = &metrics_;
    sample.queue_depth = 1;
    sample.predicted_queue_wait_seconds = predicted_queue_wait_seconds;
    AppendModelVersionMetrics(sample, &e);
    return e.Text();
  }
  ModelVersionStats stats_;
  ModelMetrics metrics_;
};

TEST_F(ModelMetricsExpositionTest, HarrierFamilies) {
  const std::string text = Text();
  const std::string l = "model=\"resnet\",version=\"3\"";
  EXPECT_THAT(text, HasSubstr("# TYPE harrier_request_duration_seconds histogram\n"));
  EXPECT_THAT(text,
              HasSubstr("harrier_request_duration_seconds_bucket{" + l + ",le=\"0.0016\"} 0\n"));
  EXPECT_THAT(text,
              HasSubstr("harrier_request_duration_seconds_bucket{" + l + ",le=\"0.002\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("harrier_request_duration_seconds_bucket{" + l + ",le=\"+Inf\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("harrier_request_duration_seconds_sum{" + l + "} 0.002\n"));
  EXPECT_THAT(text, HasSubstr("harrier_request_duration_seconds_count{" + l + "} 1\n"));
  EXPECT_THAT(text, HasSubstr("harrier_queue_duration_seconds_count{" + l + "} 0\n"));
  EXPECT_THAT(text, HasSubstr("harrier_batch_size_bucket{" + l + ",le=\"3\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("harrier_batch_size_sum{" + l + "} 3\n"));
  EXPECT_THAT(text, HasSubstr("harrier_request_success_total{" + l + "} 5\n"));
  EXPECT_THAT(text, HasSubstr("harrier_request_failure_total{" + l + ",reason=\"timeout\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("harrier_request_failure_total{" + l + ",reason=\"cancelled\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("harrier_request_failure_total{" + l + ",reason=\"rejected\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("harrier_cancellations_total{" + l + ",stage=\"queued\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("harrier_cancellations_total{" + l + ",stage=\"running\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("harrier_inference_total{" + l + "} 9\n"));
  EXPECT_THAT(text, HasSubstr("harrier_execution_total{" + l + "} 4\n"));
  EXPECT_THAT(text, HasSubstr("harrier_queue_depth{" + l + "} 1\n"));
  EXPECT_THAT(text, HasSubstr("harrier_inflight_requests{" + l + "} 2\n"));
}

// The autoscaling gauges (docs/metrics.md, "Autoscaling"): waiting, in flight, and the
// predicted queue wait, which only a version with overload protection has.
TEST_F(ModelMetricsExpositionTest, PredictedQueueWaitOnlyWithOverloadProtection) {
  const std::string l = "model=\"resnet\",version=\"3\"";
  const std::string with = Text(0.0125);
  EXPECT_THAT(with, HasSubstr("# TYPE harrier_predicted_queue_wait_seconds gauge\n"));
  EXPECT_THAT(with, HasSubstr("harrier_predicted_queue_wait_seconds{" + l + "} 0.0125\n"));
  EXPECT_THAT(Text(0.0), HasSubstr("harrier_predicted_queue_wait_seconds{" + l + "} 0\n"));
  EXPECT_THAT(Text(), Not(HasSubstr("harrier_predicted_queue_wait_seconds{")));
}

TEST_F(ModelMetricsExpositionTest, TritonFamiliesAreCumulativeMicroseconds) {
  const std::string text = Text();
  const std::string l = "{model=\"resnet\",version=\"3\"} ";
  EXPECT_THAT(text, HasSubstr("# TYPE nv_inference_request_success counter\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_request_success" + l + "5\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_request_failure" + l + "2\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_count" + l + "9\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_exec_count" + l + "4\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_request_duration_us" + l + "12345\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_queue_duration_us" + l + "2000\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_compute_input_duration_us" + l + "1\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_compute_infer_duration_us" + l + "7000\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_compute_output_duration_us" + l + "0\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_pending_request_count" + l + "1\n"));
}

TEST(ModelMetricsTest, UnroutedFailuresHaveEmptyModelAndVersion) {
  FailureCounters failures;
  failures.Add(FailureReasonFor(StatusCode::kNotFound));
  failures.Add(FailureReasonFor(StatusCode::kNotFound));
  TextExposition e;
  DeclareModelMetricFamilies(&e);
  AppendUnroutedFailures(failures, &e);
  const std::string text = e.Text();
  EXPECT_THAT(
      text,
      HasSubstr("harrier_request_failure_total{model=\"\",version=\"\",reason=\"not_found\"} 2\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "harrier_request_failure_total{model=\"\",version=\"\",reason=\"bad_request\"} 0\n"));
}

TEST(ModelMetricsTest, ModelStateIsOneHotWithLoadTime) {
  TextExposition e;
  DeclareModelMetricFamilies(&e);
  AppendModelState({"m", 1, ModelState::kReady, ""}, 0.25, 1, &e);
  AppendModelState({"broken", 1, ModelState::kUnavailable, "bad file"}, -1, 0, &e);
  const std::string text = e.Text();
  EXPECT_THAT(text,
              HasSubstr("harrier_model_state{model=\"m\",version=\"1\",state=\"READY\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("harrier_model_state{model=\"m\",version=\"1\",state=\"LOADING\"} 0\n"));
  EXPECT_THAT(
      text,
      HasSubstr("harrier_model_state{model=\"broken\",version=\"1\",state=\"UNAVAILABLE\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("harrier_model_load_duration_seconds{model=\"m\",version=\"1\"} 0.25\n"));
  EXPECT_THAT(text, Not(HasSubstr("harrier_model_load_duration_seconds{model=\"broken\"")));
  // Warm-up failures are counted for a version that serves; one that failed has its reason.
  EXPECT_THAT(text,
              HasSubstr("harrier_model_warmup_failures_total{model=\"m\",version=\"1\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("harrier_model_warmup_failures_total{model=\"broken\"")));
}

}  // namespace
}  // namespace harrier
