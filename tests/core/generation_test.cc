// FinishStatus: the one outcome every front end reports for a generation's FinishReason.
#include "harrier/generation.h"

#include <gtest/gtest.h>

namespace harrier {
namespace {

TEST(FinishStatusTest, EachReasonHasOneOutcome) {
  struct Row {
    FinishReason reason;
    Status engine;
    StatusCode code;
    std::string message;
  };
  const Row rows[] = {
      {FinishReason::kStop, Status::Ok(), StatusCode::kOk, ""},
      {FinishReason::kLength, Status::Ok(), StatusCode::kOk, ""},
      // The engine's status is not read for a reason that says what happened.
      {FinishReason::kStop, Internal("ignored"), StatusCode::kOk, ""},
      {FinishReason::kCancelled, Status::Ok(), StatusCode::kCancelled,
       "the generation was cancelled"},
      {FinishReason::kDeadline, Internal("ignored"), StatusCode::kDeadlineExceeded,
       "the request's deadline passed"},
      {FinishReason::kError, ResourceExhausted("the context is full"),
       StatusCode::kResourceExhausted, "the context is full"},
      {FinishReason::kError, Status::Ok(), StatusCode::kInternal, "the generation failed"},
  };
  for (const Row& row : rows) {
    const Status s = FinishStatus(row.reason, row.engine);
    EXPECT_EQ(s.code(), row.code) << FinishReasonName(row.reason);
    EXPECT_EQ(s.message(), row.message) << FinishReasonName(row.reason);
  }
}

}  // namespace
}  // namespace harrier
