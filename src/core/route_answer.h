// The answer and access line of a request that a route answers by itself: metadata, health,
// statistics, the repository and logging APIs, the status page, OpenAI's model list, a 404 or
// 405 - every request that is neither an inference nor a generation, whose lines carry their
// model and timings (protocol/common/inference_access_line.h, openai's GenerationRecord).
// Whichever handler of the REST chain answers such a request, it answers through here, so that
// each gets exactly one line (docs/logging.md: "a line for every request").
#pragma once

#include <string>
#include <string_view>

#include "harrier/access_log.h"
#include "harrier/http_message.h"

namespace harrier {

inline constexpr std::string_view kRequestIdHeader = "X-Request-Id";

// The message of an error body, for the access log: KServe's {"error":"..."}, OpenAI's
// {"error":{"message":"..."}}, or the whole body when it is neither; empty below status 400.
std::string ErrorMessageOf(const HttpResponse& response);

// Gives `response` the X-Request-Id header (`request_id`), writes its access line when
// `access_log` is not null (method, target, status, the error, the API key's id, the body
// sizes, 0 for a HEAD request's; no stage timings, which only inferences and generations have),
// then answers it.
void AnswerRoute(AccessLog* access_log, const HttpRequest& request, std::string_view request_id,
                 HttpResponse response, const HttpResponder& respond);

// The line itself (nothing when `access_log` is null): the request's method, target and key,
// and what the caller says of the rest. For a streamed answer that ends later (a resumed stream),
// whose status and bytes are known only at the end, and for the transport's own refusals, whose
// body bytes are those read before the refusal.
void WriteRouteAccessLine(AccessLog* access_log, const HttpRequest& request,
                          std::string_view request_id, int status, uint64_t request_bytes,
                          uint64_t response_bytes, std::string_view error);

}  // namespace harrier
