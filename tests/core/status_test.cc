#include "harrier/status.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/status_mapping.h"

namespace harrier {
namespace {

TEST(StatusTest, OkHasNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = NotFound("unknown model 'x'");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NOT_FOUND: unknown model 'x'");
  EXPECT_EQ(s.WithContext("model x").message(), "model x: unknown model 'x'");
  EXPECT_TRUE(Status::Ok().WithContext("ignored").ok());
}

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd");
  return x / 2;
}

Status Quarter(int x, int* out) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(StatusTest, AssignOrReturnPropagates) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  EXPECT_EQ(Quarter(6, &out).code(), StatusCode::kInvalidArgument);
}

TEST(StatusMappingTest, EveryCodeHasItsHttpStatus) {
  struct Row {
    StatusCode code;
    int http;
  };
  const Row rows[] = {
      {StatusCode::kOk, 200},           {StatusCode::kInvalidArgument, 400},
      {StatusCode::kNotFound, 404},     {StatusCode::kPayloadTooLarge, 413},
      {StatusCode::kResourceExhausted, 429}, {StatusCode::kUnavailable, 503},
      {StatusCode::kDeadlineExceeded, 504},  {StatusCode::kCancelled, 499},
      {StatusCode::kUnimplemented, 501}, {StatusCode::kInternal, 500},
  };
  for (const Row& r : rows) EXPECT_EQ(HttpStatusFor(r.code), r.http) << StatusCodeName(r.code);
}

TEST(StatusMappingTest, EveryCodeHasItsGrpcCode) {
  struct Row {
    StatusCode code;
    int grpc;  // the gRPC wire protocol's numbers
  };
  const Row rows[] = {
      {StatusCode::kOk, 0},
      {StatusCode::kInvalidArgument, 3},    // INVALID_ARGUMENT
      {StatusCode::kNotFound, 5},           // NOT_FOUND
      {StatusCode::kPayloadTooLarge, 8},    // RESOURCE_EXHAUSTED, as gRPC for a large message
      {StatusCode::kResourceExhausted, 8},  // RESOURCE_EXHAUSTED
      {StatusCode::kUnavailable, 14},       // UNAVAILABLE
      {StatusCode::kDeadlineExceeded, 4},   // DEADLINE_EXCEEDED
      {StatusCode::kCancelled, 1},          // CANCELLED
      {StatusCode::kUnimplemented, 12},     // UNIMPLEMENTED
      {StatusCode::kInternal, 13},          // INTERNAL
  };
  for (const Row& r : rows) {
    EXPECT_EQ(static_cast<int>(GrpcStatusCodeFor(r.code)), r.grpc) << StatusCodeName(r.code);
  }
}

TEST(StatusMappingTest, RetryAfterSecondsReadsRefusalsOfBothKinds) {
  EXPECT_EQ(RetryAfterSeconds(ResourceExhausted("queue full; retry after 3 s")), 3);
  EXPECT_EQ(RetryAfterSeconds(ResourceExhausted("queue full")), 1);
  // A version's open circuit breaker (routing): kUnavailable with its wait.
  EXPECT_EQ(RetryAfterSeconds(Unavailable("every version is out of rotation; retry after 7 s")), 7);
  EXPECT_EQ(RetryAfterSeconds(Unavailable("not ready")), 0);
  EXPECT_EQ(RetryAfterSeconds(Internal("x; retry after 7 s")), 0);
  // Long waits are said as they are (probe 30: more than six digits was sent as 1), the
  // longest an int holds past that.
  EXPECT_EQ(
      RetryAfterSeconds(ResourceExhausted("rate limit (1e-07 req/s); retry after 10000000 s")),
      10'000'000);
  EXPECT_EQ(RetryAfterSeconds(ResourceExhausted("x; retry after 99999999999999999999 s")),
            std::numeric_limits<int>::max());
  EXPECT_EQ(RetryAfterSeconds(ResourceExhausted("x; retry after 1x s")), 1);
}

}  // namespace
}  // namespace harrier
