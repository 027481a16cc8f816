#include "protocol/openai/openai_error.h"

#include <gtest/gtest.h>

#include "core/status_mapping.h"

namespace harrier::openai {
namespace {

TEST(OpenAiErrorTest, Shape) {
  EXPECT_EQ(
      OpenAiErrorJson(InvalidArgument("'max_tokens' must be at least 1, got -5"), "max_tokens"),
      R"({"error":{"message":"'max_tokens' must be at least 1, got -5",)"
      R"("type":"invalid_request_error","param":"max_tokens","code":null}})");
  EXPECT_EQ(OpenAiErrorJson(NotFound("The model 'x' does not exist"), "", "model_not_found"),
            R"({"error":{"message":"The model 'x' does not exist",)"
            R"("type":"invalid_request_error","param":null,"code":"model_not_found"}})");
  EXPECT_EQ(OpenAiErrorJson(Internal("boom")),
            R"({"error":{"message":"boom","type":"server_error","param":null,"code":null}})");
}

TEST(OpenAiErrorTest, TypesAndStatuses) {
  struct Case {
    StatusCode code;
    const char* type;
    int http_status;
  } cases[] = {
      {StatusCode::kInvalidArgument, "invalid_request_error", 400},
      {StatusCode::kNotFound, "invalid_request_error", 404},
      {StatusCode::kPayloadTooLarge, "invalid_request_error", 413},
      {StatusCode::kUnimplemented, "invalid_request_error", 501},
      {StatusCode::kResourceExhausted, "rate_limit_error", 429},
      {StatusCode::kUnavailable, "server_error", 503},
      {StatusCode::kDeadlineExceeded, "server_error", 504},
      {StatusCode::kInternal, "server_error", 500},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(OpenAiErrorType(c.code), c.type) << StatusCodeName(c.code);
    EXPECT_EQ(HttpStatusFor(c.code), c.http_status) << StatusCodeName(c.code);
  }
}

TEST(OpenAiErrorTest, MessagesAreEscapedAndRepaired) {
  EXPECT_EQ(OpenAiErrorJson(InvalidArgument("got \"\n\xFF\""), "stop[0]"),
            "{\"error\":{\"message\":\"got \\\"\\n\xEF\xBF\xBD\\\"\","
            "\"type\":\"invalid_request_error\",\"param\":\"stop[0]\",\"code\":null}}");
}

}  // namespace
}  // namespace harrier::openai
