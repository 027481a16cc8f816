#include "protocol/kserve/scheduling_fields.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace harrier::kserve {
namespace {

using std::chrono::microseconds;
using ::testing::HasSubstr;
using TimePoint = std::chrono::steady_clock::time_point;

constexpr TimePoint kReceived = TimePoint{} + std::chrono::seconds(100);

struct Case {
  const char* name = "";
  Parameters parameters;
  std::vector<std::pair<std::string, std::string>> headers;
  // Expected outcome: an error fragment, or the fields.
  const char* error = nullptr;
  uint64_t priority = 0;
  uint64_t timeout_us = 0;
  TimePoint deadline = TimePoint::max();
  std::string client_id;
};

class SchedulingFieldsTest : public ::testing::TestWithParam<Case> {};

TEST_P(SchedulingFieldsTest, Table) {
  const Case& c = GetParam();
  HttpRequest http;
  http.headers = c.headers;
  InferenceRequest request;
  request.received_at = kReceived;
  request.parameters = c.parameters;
  Status s = ApplySchedulingFields(http, &request);
  if (c.error != nullptr) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(c.error));
    return;
  }
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(request.priority, c.priority);
  EXPECT_EQ(request.timeout_us, c.timeout_us);
  EXPECT_EQ(request.deadline, c.deadline);
  EXPECT_EQ(request.client_id, c.client_id);
}

const std::string kLongId(kMaxClientIdBytes + 1, 'a');
const std::string kLongestId(kMaxClientIdBytes, 'a');

using Headers = std::vector<std::pair<std::string, std::string>>;

Case Ok(const char* name, Parameters parameters, Headers headers, uint64_t priority = 0,
        uint64_t timeout_us = 0, TimePoint deadline = TimePoint::max(),
        std::string client_id = "") {
  Case c;
  c.name = name;
  c.parameters = std::move(parameters);
  c.headers = std::move(headers);
  c.priority = priority;
  c.timeout_us = timeout_us;
  c.deadline = deadline;
  c.client_id = std::move(client_id);
  return c;
}

Case Bad(const char* name, Parameters parameters, Headers headers, const char* error) {
  Case c = Ok(name, std::move(parameters), std::move(headers));
  c.error = error;
  return c;
}

constexpr TimePoint kNone = TimePoint::max();
const auto kMax = static_cast<int64_t>(kMaxRequestTimeoutUs);

INSTANTIATE_TEST_SUITE_P(
    All, SchedulingFieldsTest,
    ::testing::Values(
        Ok("nothing", {}, {}), Ok("priority", {{"priority", int64_t{3}}}, {}, 3),
        Ok("priority_zero_is_default", {{"priority", int64_t{0}}}, {}, 0),
        Bad("priority_negative", {{"priority", int64_t{-1}}}, {}, "'priority'"),
        Bad("priority_string", {{"priority", std::string("1")}}, {}, "'priority'"),
        Bad("priority_bool", {{"priority", true}}, {}, "'priority'"),
        Bad("priority_double", {{"priority", 1.0}}, {}, "'priority'"),
        Ok("timeout", {{"timeout", int64_t{5000}}}, {}, 0, 5000),
        Ok("timeout_at_the_limit", {{"timeout", kMax}}, {}, 0, kMaxRequestTimeoutUs),
        Bad("timeout_over_the_limit", {{"timeout", kMax + 1}}, {}, "'timeout'"),
        Bad("timeout_negative", {{"timeout", int64_t{-5}}}, {}, "'timeout'"),
        Bad("timeout_string", {{"timeout", std::string("5ms")}}, {}, "'timeout'"),
        Ok("header_deadline", {}, {{"x-request-timeout-us", "1500"}}, 0, 0,
           kReceived + microseconds(1500)),
        Ok("header_deadline_spaces", {}, {{"x-request-timeout-us", " 7 "}}, 0, 0,
           kReceived + microseconds(7)),
        Ok("header_zero_is_no_deadline", {}, {{"x-request-timeout-us", "0"}}),
        Ok("two_headers_earliest_wins", {},
           {{"x-request-timeout-us", "900"}, {"x-request-timeout-us", "300"}}, 0, 0,
           kReceived + microseconds(300)),
        Bad("header_empty", {}, {{"x-request-timeout-us", ""}}, "X-Request-Timeout-Us"),
        Bad("header_negative", {}, {{"x-request-timeout-us", "-1"}}, "X-Request-Timeout-Us"),
        Bad("header_fraction", {}, {{"x-request-timeout-us", "1.5"}}, "X-Request-Timeout-Us"),
        Bad("header_unit", {}, {{"x-request-timeout-us", "10ms"}}, "X-Request-Timeout-Us"),
        Bad("header_plus", {}, {{"x-request-timeout-us", "+10"}}, "X-Request-Timeout-Us"),
        Bad("header_too_large", {}, {{"x-request-timeout-us", "1000000000001"}},
            "X-Request-Timeout-Us"),
        Bad("header_huge", {}, {{"x-request-timeout-us", "99999999999999999999999"}},
            "X-Request-Timeout-Us"),
        Ok("client_id", {}, {{"x-client-id", "tenant-7"}}, 0, 0, kNone, "tenant-7"),
        Ok("client_id_first_wins", {}, {{"x-client-id", "a"}, {"x-client-id", "b"}}, 0, 0, kNone,
           "a"),
        Ok("client_id_longest", {}, {{"x-client-id", kLongestId}}, 0, 0, kNone, kLongestId),
        Bad("client_id_too_long", {}, {{"x-client-id", kLongId}}, "X-Client-Id")),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace harrier::kserve
