// OpenAI's error body, which its client libraries read (`error.message`, `error.type`,
// `error.param`, `error.code`):
//
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "max_tokens",
//              "code": null}}
//
// The HTTP status goes with it from HttpStatusFor(status.code()) (core/status_mapping.h), the
// one place statuses become HTTP codes; OpenAI's SDKs choose their exception by that status,
// the type is for people reading the body. Mid-stream, the same object is sent as an SSE
// data event, since the status line has gone already.
#pragma once

#include <string>
#include <string_view>

#include "harrier/status.h"

namespace harrier::openai {

// "invalid_request_error" for what the client can fix (kInvalidArgument, kNotFound,
// kPayloadTooLarge, kUnimplemented), "rate_limit_error" for kResourceExhausted (retry later),
// "server_error" for the rest.
std::string_view OpenAiErrorType(StatusCode code);

// `param`: the request field at fault (the parsers report it), "" for null. `code`: OpenAI's
// machine-readable code when there is one ("model_not_found"), "" for null. The message may
// hold any bytes; ill-formed UTF-8 is replaced.
std::string OpenAiErrorJson(const Status& status, std::string_view param = {},
                            std::string_view code = {});

// The same object for a refusal made in front of the handler, known only by its HTTP status
// (the transport's 413, the access check's 401): "rate_limit_error" for 429, else
// "invalid_request_error" for 4xx and "server_error" for the rest; `param` null.
std::string OpenAiErrorJson(int http_status, std::string_view message, std::string_view code);

}  // namespace harrier::openai
