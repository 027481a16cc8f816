#include "harrier/generation.h"

namespace harrier {

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kDeadline: return "deadline";
    case FinishReason::kError: return "error";
  }
  return "error";
}

Status FinishStatus(FinishReason reason, const Status& status) {
  switch (reason) {
    case FinishReason::kStop:
    case FinishReason::kLength: return Status::Ok();
    case FinishReason::kCancelled: return Cancelled("the generation was cancelled");
    case FinishReason::kDeadline: return DeadlineExceeded("the request's deadline passed");
    case FinishReason::kError: break;
  }
  return status.ok() ? Internal("the generation failed") : status;
}

}  // namespace harrier
