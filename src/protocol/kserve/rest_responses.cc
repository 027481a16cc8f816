#include "protocol/kserve/rest_responses.h"

#include <optional>
#include <utility>

#include "core/json_writer.h"
#include "core/status_mapping.h"
#include "core/utf8.h"
#include "protocol/common/content_coding.h"
#include "protocol/kserve/infer_request_decoder.h"

namespace harrier::kserve {

// The body as the codecs read it (docs/api.md, "Compression"), padded for simdjson.
Status DecodeBodyContent(const HttpRequest& request, uint64_t max_bytes,
                         std::shared_ptr<const std::string>* body) {
  return DecodeRequestBody(request, max_bytes, kJsonPaddingBytes, body);
}

// Encodes an inference response in the coding the client accepts; unencoded if zlib fails.
void EncodeResponseContent(ContentCoding coding, HttpResponse* response) {
  if (coding == ContentCoding::kIdentity) return;
  std::optional<std::string> encoded = EncodeContent(response->body, coding);
  if (!encoded) return;
  response->body = std::move(*encoded);
  response->headers.emplace_back("Content-Encoding", ContentCodingName(coding));
  response->headers.emplace_back("Vary", "Accept-Encoding");
}

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", kJson);
  r.body = std::move(body);
  return r;
}

// The one place where an error becomes an HTTP response.
HttpResponse ErrorResponse(int http_status, std::string_view message) {
  std::string body = "{\"error\":";
  if (IsValidUtf8(message)) {
    AppendJsonString(&body, message);
  } else {  // e.g. a percent-decoded model name: keep the ASCII, mark the rest
    std::string ascii(message);
    for (char& c : ascii)
      if (static_cast<unsigned char>(c) >= 0x80) c = '?';
    AppendJsonString(&body, ascii);
  }
  body.push_back('}');
  return JsonResponse(http_status, std::move(body));
}

HttpResponse ErrorResponse(const Status& status) {
  HttpResponse response = ErrorResponse(HttpStatusFor(status.code()), status.message());
  // 429 (a full queue, a rate limit): when to come back. A hint, not a promise; admission
  // control decides again then.
  if (int seconds = RetryAfterSeconds(status); seconds > 0)
    response.headers.emplace_back("Retry-After", std::to_string(seconds));
  return response;
}

HttpResponse EmptyOk() {
  return HttpResponse{};
}

}  // namespace harrier::kserve
