// Pieces the HTTP/1.1 and HTTP/2 connections share: request-body padding, the empty body,
// header-name comparison and the JSON error body the server writes itself.
//
// Thread safety: every function may be called from any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "harrier/http_message.h"

namespace harrier::server_internal {

// simdjson reads up to SIMDJSON_PADDING bytes past the end of its input: every request body
// handed to a handler has this much spare capacity after its end.
inline constexpr std::size_t kBodyPadding = 64;

// One shared empty body (with kBodyPadding capacity) for requests that have none.
const std::shared_ptr<const std::string>& EmptyBody();

// ASCII case-insensitive equality, for header names and tokens.
bool IEquals(std::string_view a, std::string_view b);

// A response with `status`, a JSON content type (`content_type_name` as the caller's
// protocol spells it) and the body {"error": message}.
HttpResponse JsonErrorResponse(int status, std::string_view message,
                               std::string_view content_type_name);

}  // namespace harrier::server_internal
