// Segments of a URL path, for every front end that routes on one (the KServe routes, the
// generate extension, the OpenAI API): a model name in a path may be percent-encoded (RFC 3986
// §2.1: `%61` and `a` are the same character), as clients that escape path parameters send it
// (the OpenAI SDKs use encodeURIComponent), and every route must decode it the same way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "harrier/status.h"

namespace harrier {

// Decodes one path segment into *out ("%2F" -> "/"; '+' stays '+', as in any URL path). A
// segment without '%', the usual case, is copied as is. kInvalidArgument, naming the segment,
// for a '%' not followed by two hex digits.
Status PercentDecode(std::string_view segment, std::string* out);

// The version segment of `/v2/models/{m}/versions/{v}/...`, percent-decoded: a positive decimal
// integer (leading zeros accepted, as Triton accepts them). kInvalidArgument, naming it, otherwise
// (PercentDecode's own error for a malformed escape).
StatusOr<int64_t> ParseUrlVersion(std::string_view segment);

}  // namespace harrier
