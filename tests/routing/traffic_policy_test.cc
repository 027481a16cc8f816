#include "routing/traffic_policy.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace harrier {
namespace {

TrafficPolicy ParseOk(std::string_view json) {
  auto p = ParseTrafficPolicy(json);
  EXPECT_TRUE(p.ok()) << p.status().ToString() << "\n" << json;
  return p.ok() ? *p : TrafficPolicy{};
}

TEST(ParseTrafficPolicyTest, ReadsEveryField) {
  const TrafficPolicy p = ParseOk(R"({
    "weights": {"1": 90, "2": 10, "3": 0},
    "sticky_header": "X-User-Id",
    "shadow": {"version": 3, "percent": 0.5},
    "rollout": {"candidate": 2, "steps": [1, 10, 50, 100], "dwell_seconds": 300},
    "guard": {"window_seconds": 60, "min_requests": 200, "max_p99_ratio": 1.5,
              "max_error_rate": 0.01, "max_p99_us": 20000},
    "breaker": {"failure_threshold": 7, "failure_rate": 0.5, "min_requests": 40,
                "window_seconds": 20, "open_seconds": 15, "half_open_probes": 3}
  })");
  EXPECT_EQ(p.weights, (VersionWeights{{1, 90}, {2, 10}, {3, 0}}));
  EXPECT_EQ(p.sticky_header, "x-user-id");  // header names are case-insensitive: lower-cased
  ASSERT_TRUE(p.shadow.has_value());
  EXPECT_EQ(p.shadow->version, 3);
  EXPECT_EQ(p.shadow->percent, 0.5);
  ASSERT_TRUE(p.rollout.has_value());
  EXPECT_EQ(p.rollout->candidate, 2);
  EXPECT_EQ(p.rollout->steps_percent, (std::vector<double>{1, 10, 50, 100}));
  EXPECT_EQ(p.rollout->dwell_seconds, 300);
  ASSERT_TRUE(p.guard.has_value());
  EXPECT_EQ(p.guard->window_seconds, 60);
  EXPECT_EQ(p.guard->min_requests, 200);
  EXPECT_EQ(p.guard->max_p99_ratio, 1.5);
  EXPECT_EQ(p.guard->max_error_rate, 0.01);
  EXPECT_EQ(p.guard->max_p99_us, 20000);
  ASSERT_TRUE(p.breaker.has_value());
  EXPECT_EQ(p.breaker->failure_threshold, 7);
  EXPECT_EQ(p.breaker->failure_rate, 0.5);
  EXPECT_EQ(p.breaker->min_requests, 40);
  EXPECT_EQ(p.breaker->window_seconds, 20);
  EXPECT_EQ(p.breaker->open_seconds, 15);
  EXPECT_EQ(p.breaker->half_open_probes, 3);
}

TEST(ParseTrafficPolicyTest, FillsDefaults) {
  TrafficPolicy p = ParseOk(R"({"weights": {"4": 1}})");
  EXPECT_EQ(p.weights, (VersionWeights{{4, 1}}));
  EXPECT_TRUE(p.sticky_header.empty());
  EXPECT_FALSE(p.shadow || p.rollout || p.guard || p.breaker);

  p = ParseOk(R"({"weights": {"1": 1, "2": 0},
                  "rollout": {"candidate": 2, "steps": [100], "dwell_seconds": 1},
                  "guard": {"window_seconds": 30, "max_error_rate": 0}})");
  ASSERT_TRUE(p.guard.has_value());
  EXPECT_EQ(p.guard->min_requests, 50);
  EXPECT_FALSE(p.guard->max_p99_ratio.has_value());
  EXPECT_EQ(p.guard->max_error_rate, 0.0);

  p = ParseOk(R"({"weights": {"1": 1}, "breaker": {}})");
  ASSERT_TRUE(p.breaker.has_value());
  EXPECT_EQ(p.breaker->failure_threshold, 5);
  EXPECT_FALSE(p.breaker->failure_rate.has_value());
  EXPECT_EQ(p.breaker->min_requests, 20);
  EXPECT_EQ(p.breaker->window_seconds, 10);
  EXPECT_EQ(p.breaker->open_seconds, 30);
  EXPECT_EQ(p.breaker->half_open_probes, 1);

  // A rate alone replaces the default count.
  p = ParseOk(R"({"weights": {"1": 1}, "breaker": {"failure_rate": 0.25}})");
  EXPECT_EQ(p.breaker->failure_threshold, 0);
  EXPECT_EQ(p.breaker->failure_rate, 0.25);
}

TEST(ParseTrafficPolicyTest, FractionalPercents) {
  const TrafficPolicy p = ParseOk(R"({"weights": {"1": 1, "2": 1},
      "shadow": {"version": 2, "percent": 0.125},
      "rollout": {"candidate": 2, "steps": [0.5, 2.25, 100], "dwell_seconds": 60}})");
  EXPECT_EQ(p.shadow->percent, 0.125);
  EXPECT_EQ(p.rollout->steps_percent, (std::vector<double>{0.5, 2.25, 100}));
}

// Probe 38: a shadow percent of -0 is 0, written as 0.
TEST(ParseTrafficPolicyTest, MinusZeroIsZero) {
  const TrafficPolicy p =
      ParseOk(R"({"weights": {"1": 1}, "shadow": {"version": 2, "percent": -0.0}})");
  EXPECT_EQ(TrafficPolicyToJson(p), R"({"weights":{"1":1},"shadow":{"version":2,"percent":0}})");
}

TEST(TrafficPolicyToJsonTest, WritesEveryFieldInOrder) {
  const TrafficPolicy p = ParseOk(R"({"breaker": {"failure_rate": 0.5},
      "guard": {"max_p99_ratio": 1.5, "window_seconds": 60},
      "rollout": {"dwell_seconds": 300, "steps": [1, 10, 50, 100], "candidate": 2},
      "shadow": {"percent": 0.5, "version": 10}, "sticky_header": "X-User",
      "weights": {"10": 0, "2": 10, "1": 90}})");
  EXPECT_EQ(TrafficPolicyToJson(p),
            R"({"weights":{"1":90,"2":10,"10":0},"sticky_header":"x-user",)"
            R"("shadow":{"version":10,"percent":0.5},)"
            R"("rollout":{"candidate":2,"steps":[1,10,50,100],"dwell_seconds":300},)"
            R"("guard":{"window_seconds":60,"min_requests":50,"max_p99_ratio":1.5},)"
            R"("breaker":{"failure_rate":0.5,"min_requests":20,"window_seconds":10,)"
            R"("open_seconds":30,"half_open_probes":1}})");
}

TEST(TrafficPolicyToJsonTest, RoundTrips) {
  const char* docs[] = {
      R"({"weights": {"1": 1}})",
      R"({"weights": {"1": 90, "2": 10}, "sticky_header": "x-session"})",
      R"({"weights": {"1": 1, "2": 1, "3": 1}, "shadow": {"version": 3, "percent": 0}})",
      R"({"weights": {"1": 1, "2": 1}, "shadow": {"version": 2, "percent": 0.001}})",
      R"({"weights": {"1": 1, "2": 1}, "shadow": {"version": 2, "percent": 100}})",
      // Versions as strings, as the KServe API writes them elsewhere.
      R"({"weights": {"1": 1, "2": 1}, "shadow": {"version": "2", "percent": 5}})",
      R"({"weights": {"1": 3, "7": 1}, "rollout": {"candidate": 9, "steps": [0.01, 33.33, 100],
          "dwell_seconds": 1}, "guard": {"window_seconds": 3600, "min_requests": 1,
          "max_p99_ratio": 1.05, "max_error_rate": 0.005, "max_p99_us": 1}})",
      R"({"weights": {"1": 1}, "breaker": {}})",
      R"({"weights": {"1": 1}, "breaker": {"failure_rate": 1, "min_requests": 1}})",
      R"({"weights": {"1": 1}, "breaker": {"failure_threshold": 2, "failure_rate": 0.1,
          "window_seconds": 3600, "open_seconds": 86400, "half_open_probes": 1000}})",
      R"({"weights": {"9223372036854775807": 1000000}})",
      // A ratio whose shortest form was 22 digits without a point: an integer past uint64
      // that the parser refused (found by fuzzing).
      R"({"weights": {"1": 100}, "rollout": {"candidate": 2, "steps": [1, 100],
          "dwell_seconds": 60}, "guard": {"window_seconds": 18, "min_requests": 50,
          "max_p99_ratio": 1.4444444444444443e21}})",
  };
  for (const char* doc : docs) {
    SCOPED_TRACE(doc);
    const TrafficPolicy p = ParseOk(doc);
    const std::string json = TrafficPolicyToJson(p);
    const TrafficPolicy again = ParseOk(json);
    EXPECT_EQ(again, p) << json;
    EXPECT_EQ(TrafficPolicyToJson(again), json);
  }
}

TEST(ParseTrafficPolicyTest, RejectsBadDocumentsNamingTheField) {
  struct Case {
    const char* doc;
    const char* message;  // a part of the expected message
  };
  const Case cases[] = {
      {"", "invalid JSON"},
      {R"({"weights": {"1": 1})", "invalid JSON"},
      {"[]", "the document must be an object"},
      {"{}", "weights: is required"},
      {R"({"weights": {"1": 1}, "weight": {}})", "weight: unknown field"},
      {R"({"weights": {"1": 1}, "weights": {"2": 1}})", "weights: appears twice"},
      {R"({"weights": [1]})", "weights: must be an object"},
      {R"({"weights": {}})", "weights: at least one version needs a weight above 0"},
      {R"({"weights": {"1": 0, "2": 0}})", "weights: at least one version needs a weight above 0"},
      {R"({"weights": {"1": -1}})", "weights.1: -1 is out of range (0 to 1000000)"},
      {R"({"weights": {"1": 1000001}})", "weights.1: 1000001 is out of range"},
      {R"({"weights": {"1": 1.5}})", "weights.1: must be an integer"},
      {R"({"weights": {"1": 1e3}})", "weights.1: must be an integer"},
      {R"({"weights": {"1": 18446744073709551615}})", "weights.1: is too large"},
      {R"({"weights": {"1": "1"}})", "weights.1: must be an integer"},
      {R"({"weights": {"v1": 1}})", "weights.v1: a version key is a positive integer"},
      {R"({"weights": {"0": 1}})", "weights.0: a version key"},
      {R"({"weights": {"01": 1}})", "weights.01: a version key"},
      {R"({"weights": {"-1": 1}})", "weights.-1: a version key"},
      {R"({"weights": {"+1": 1}})", "weights.+1: a version key"},
      {R"({"weights": {"1.0": 1}})", "weights.1.0: a version key"},
      {R"({"weights": {" 1": 1}})", "weights. 1: a version key"},
      {R"({"weights": {"99999999999999999999": 1}})", "weights.99999999999999999999: a version"},
      {R"({"weights": {"1": 1, "1": 2}})", "weights.1: appears twice"},
      {R"({"weights": {"1": 1}, "sticky_header": 3})", "sticky_header: must be a string"},
      {R"({"weights": {"1": 1}, "sticky_header": "x user"})", "sticky_header: 'x user' is not"},
      {R"({"weights": {"1": 1}, "sticky_header": "x:y"})", "sticky_header: 'x:y' is not"},
      {R"({"weights": {"1": 1}, "sticky_header": "X-Harrier-Model-Version"})",
       "sticky_header: 'X-Harrier-Model-Version' chooses the version itself"},
      {R"({"weights": {"1": 1}, "shadow": 2})", "shadow: must be an object"},
      {R"({"weights": {"1": 1}, "shadow": {"percent": 1}})", "shadow.version: is required"},
      {R"({"weights": {"1": 1}, "shadow": {"version": 2}})", "shadow.percent: is required"},
      {R"({"weights": {"1": 1}, "shadow": {"version": 0, "percent": 1}})",
       "shadow.version: a version is a positive integer, not 0"},
      {R"({"weights": {"1": 1}, "shadow": {"version": "02", "percent": 1}})",
       "shadow.version: a version is a positive integer, not '02'"},
      {R"({"weights": {"1": 1}, "shadow": {"version": true, "percent": 1}})",
       "shadow.version: must be an integer"},
      {R"({"weights": {"1": 1}, "shadow": {"version": 2, "percent": 101}})",
       "shadow.percent: 101 is out of range (0 to 100)"},
      {R"({"weights": {"1": 1}, "shadow": {"version": 2, "percent": -0.5}})",
       "shadow.percent: -0.5 is out of range"},
      {R"({"weights": {"1": 1}, "shadow": {"version": 2, "percent": 1, "mode": "x"}})",
       "shadow.mode: unknown field (expected one of version, percent)"},
      {R"({"weights": {"1": 1}, "rollout": {"steps": [100], "dwell_seconds": 1}})",
       "rollout.candidate: is required"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "dwell_seconds": 1}})",
       "rollout.steps: is required"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [100]}})",
       "rollout.dwell_seconds: is required"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [], "dwell_seconds": 1}})",
       "rollout.steps: needs at least one step"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": 5, "dwell_seconds": 1}})",
       "rollout.steps: must be an array"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [10, 5, 100],
          "dwell_seconds": 1}})",
       "rollout.steps[1]: 5 is not above the step before it (10)"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [10, 10, 100],
          "dwell_seconds": 1}})",
       "rollout.steps[1]: 10 is not above"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [10, 50],
          "dwell_seconds": 1}})",
       "rollout.steps: the last step must be 100, not 50"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [0, 100],
          "dwell_seconds": 1}})",
       "rollout.steps[0]: 0 is out of range (above 0, at most 100)"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [50, 150],
          "dwell_seconds": 1}})",
       "rollout.steps[1]: 150 is out of range"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [0.001, 100],
          "dwell_seconds": 1}})",
       "rollout.steps[0]: 0.001 has more than two decimals"},
      // Below 0.01, however close to 0 (probe 78: it rounded to weight 0 for good).
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [1e-9, 100],
          "dwell_seconds": 1}})",
       "rollout.steps[0]: 1e-09 has more than two decimals"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": ["10", 100],
          "dwell_seconds": 1}})",
       "rollout.steps[0]: must be a number"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [100],
          "dwell_seconds": 0}})",
       "rollout.dwell_seconds: 0 is out of range"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [100],
          "dwell_seconds": 1.5}})",
       "rollout.dwell_seconds: must be an integer"},
      {R"({"weights": {"2": 1}, "rollout": {"candidate": 2, "steps": [100],
          "dwell_seconds": 1}})",
       "rollout.candidate: needs a baseline"},
      {R"({"weights": {"1": 0, "2": 1}, "rollout": {"candidate": 2, "steps": [100],
          "dwell_seconds": 1}})",
       "rollout.candidate: needs a baseline"},
      {R"({"weights": {"1": 1}, "guard": {"window_seconds": 60, "max_error_rate": 0.1}})",
       "guard: watches a rollout's candidate; it needs a rollout"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [100], "dwell_seconds": 1},
          "guard": {"max_error_rate": 0.1}})",
       "guard.window_seconds: is required"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [100], "dwell_seconds": 1},
          "guard": {"window_seconds": 60}})",
       "guard: set at least one of max_p99_ratio, max_error_rate, max_p99_us"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [100], "dwell_seconds": 1},
          "guard": {"window_seconds": 3601, "max_error_rate": 0.1}})",
       "guard.window_seconds: 3601 is out of range (1 to 3600)"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [100], "dwell_seconds": 1},
          "guard": {"window_seconds": 60, "max_p99_ratio": 1}})",
       "guard.max_p99_ratio: 1 must be above 1"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [100], "dwell_seconds": 1},
          "guard": {"window_seconds": 60, "max_error_rate": 1.5}})",
       "guard.max_error_rate: 1.5 is out of range (0 to 1)"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [100], "dwell_seconds": 1},
          "guard": {"window_seconds": 60, "max_p99_us": 0}})",
       "guard.max_p99_us: 0 is out of range"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [100], "dwell_seconds": 1},
          "guard": {"window_seconds": 60, "min_requests": 0, "max_p99_us": 5}})",
       "guard.min_requests: 0 is out of range"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [100], "dwell_seconds": 1},
          "guard": {"window_seconds": 60, "max_p99": 5}})",
       "guard.max_p99: unknown field"},
      {R"({"weights": {"1": 1}, "breaker": []})", "breaker: must be an object"},
      {R"({"weights": {"1": 1}, "breaker": {"failure_threshold": 0}})",
       "breaker.failure_threshold: 0 is out of range"},
      {R"({"weights": {"1": 1}, "breaker": {"failure_rate": 0}})",
       "breaker.failure_rate: 0 is out of range (above 0, at most 1)"},
      {R"({"weights": {"1": 1}, "breaker": {"failure_rate": 1.01}})",
       "breaker.failure_rate: 1.01 is out of range"},
      {R"({"weights": {"1": 1}, "breaker": {"open_seconds": -1}})",
       "breaker.open_seconds: -1 is out of range"},
      {R"({"weights": {"1": 1}, "breaker": {"window_seconds": 0}})",
       "breaker.window_seconds: 0 is out of range"},
      {R"({"weights": {"1": 1}, "breaker": {"half_open_probes": 0}})",
       "breaker.half_open_probes: 0 is out of range"},
      {R"({"weights": {"1": 1}, "breaker": {"open_seconds": true}})",
       "breaker.open_seconds: must be an integer"},
      {R"({"weights": {"1": 1}, "breaker": {"threshold": 3}})", "breaker.threshold: unknown field"},
      {R"({"weights": {"1": 1}, "breaker": {"open_seconds": 1, "open_seconds": 2}})",
       "breaker.open_seconds: appears twice"},
      {R"({"weights": {"1": 1}, "shadow": {"version": 1, "percent": 20}})",
       "shadow.version: version 1 answers all of the traffic"},
      {R"({"weights": {"1": 1, "2": 0}, "shadow": {"version": 1, "percent": 20}})",
       "shadow.version: version 1 answers all of the traffic"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.doc);
    auto p = ParseTrafficPolicy(c.doc);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(p.status().message().rfind("traffic policy: ", 0), 0u) << p.status().message();
    EXPECT_NE(p.status().message().find(c.message), std::string::npos) << p.status().message();
  }
}

TEST(ParseTrafficPolicyTest, AStickyHeaderNameNoRequestCouldCarryIsRefused) {
  const std::string doc =
      R"({"weights": {"1": 1}, "sticky_header": ")" + std::string(300, 'x') + "\"}";
  auto p = ParseTrafficPolicy(doc);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("sticky_header: a header name of 300 bytes; at most 256"),
            std::string::npos)
      << p.status().message();
  EXPECT_TRUE(ParseTrafficPolicy(R"({"weights": {"1": 1}, "sticky_header": ")" +
                                 std::string(256, 'x') + "\"}")
                  .ok());
}

TEST(ValidateAgainstVersionsTest, EveryVersionGivenTrafficMustBeServed) {
  struct Case {
    const char* doc;
    std::vector<int64_t> available;
    const char* message;  // nullptr = OK
  };
  const Case cases[] = {
      {R"({"weights": {"1": 90, "2": 10}})", {1, 2}, nullptr},
      {R"({"weights": {"1": 90, "2": 10}})", {2, 1, 3}, nullptr},
      // Weight 0 sends nothing: version 3 may be gone.
      {R"({"weights": {"1": 1, "3": 0}})", {1}, nullptr},
      {R"({"weights": {"1": 90, "2": 10}})",
       {1},
       "traffic policy: weights.2: version 2 is not served by the model (served: 1)"},
      {R"({"weights": {"1": 1}})",
       {},
       "weights.1: version 1 is not served by the model (no version"},
      {R"({"weights": {"1": 1}, "shadow": {"version": 5, "percent": 1}})",
       {3, 1},
       "shadow.version: version 5 is not served by the model (served: 1, 3)"},
      {R"({"weights": {"1": 1}, "shadow": {"version": 5, "percent": 1}})", {1, 5}, nullptr},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [100], "dwell_seconds": 1}})",
       {1},
       "rollout.candidate: version 2 is not served"},
      {R"({"weights": {"1": 1}, "rollout": {"candidate": 2, "steps": [100], "dwell_seconds": 1}})",
       {1, 2},
       nullptr},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.doc);
    const TrafficPolicy p = ParseOk(c.doc);
    const Status s = ValidateAgainstVersions(p, c.available);
    if (c.message == nullptr) {
      EXPECT_TRUE(s.ok()) << s.ToString();
    } else {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
    }
  }
}

}  // namespace
}  // namespace harrier
