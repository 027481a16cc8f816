// The REST front end's answers, shared by its files (kserve_handler.cc: routing and the small
// endpoints; kserve_metadata.cc: metadata, statistics and the repository index; rest_infer.cc:
// inference): JSON bodies, the one place an error becomes an HTTP response, and the body codings.
// Internal to src/protocol/kserve/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "harrier/http_message.h"
#include "harrier/status.h"
#include "protocol/common/content_coding.h"

namespace harrier::kserve {

inline constexpr std::string_view kJson = "application/json";

// The body as the codecs read it (docs/api.md, "Compression"), padded for simdjson.
Status DecodeBodyContent(const HttpRequest& request, uint64_t max_bytes,
                         std::shared_ptr<const std::string>* body);

// Encodes an inference response in the coding the client accepts; unencoded if zlib fails.
void EncodeResponseContent(ContentCoding coding, HttpResponse* response);

HttpResponse JsonResponse(int status, std::string body);

// The one place where an error becomes an HTTP response: {"error":"..."} (invalid UTF-8 in the
// message marked '?'), and for a Status its HTTP status and, for a 429, Retry-After.
HttpResponse ErrorResponse(int http_status, std::string_view message);
HttpResponse ErrorResponse(const Status& status);

HttpResponse EmptyOk();

}  // namespace harrier::kserve
