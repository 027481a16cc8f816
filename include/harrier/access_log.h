// AccessLog: where a front end reports each request it answered, one record per request.
//
// The KServe REST handler fills a record for every request it answers, the gRPC front end one
// for every inference call (an inference has its model, version, input shapes and stage
// durations; any other route only its method, path and status), the HTTP server one for every
// request it refuses itself before the handler sees it (400, 408, 413, 431: method, target,
// status, error and bytes as far as they were read), and each hands it to the AccessLog, which
// formats and writes it off the request path (src/observability/access_log.h: a buffer drained
// by a writer thread). Front ends hold an AccessLog* that is null when access logging is off, so
// the request path pays nothing then.
#pragma once

#include <cstdint>
#include <string_view>

#include "harrier/http_message.h"
#include "harrier/inference_request.h"

namespace harrier {

// One answered request. Every string_view points into memory the caller keeps alive for the
// duration of AccessLog::Write() only.
struct AccessRecord {
  std::string_view request_id;  // X-Request-Id as sent, or generated (docs/logging.md)
  // A streamed generation, whose request_id is its stream's own: the X-Request-Id its client
  // sent, for joining a proxy's log with this one; empty otherwise.
  std::string_view client_request_id;
  std::string_view protocol;    // "http" (HTTP/1.1, h2c and h2 alike) or "grpc"
  // The connection's (HttpRequest::version, HttpRequest::tls_version): the HTTP version
  // (kUnknown: not said), and the TLS version ("TLSv1.3"), empty in clear text.
  HttpVersion http_version = HttpVersion::kUnknown;
  std::string_view tls_version;
  std::string_view method;      // "POST", ...; the RPC name for gRPC
  std::string_view target;      // path and query as sent
  int status = 0;               // the HTTP status answered; for gRPC the gRPC status code
  std::string_view error;       // the error message when status is not 2xx; empty otherwise
  std::string_view key_id;      // the API key's id (HttpRequest::auth_key_id); empty: none
  // Inference only: the model and the version that answered (0: not known, e.g. a request
  // refused before a version was chosen), and the input shapes, already formatted as a JSON
  // array of {"name":..,"datatype":..,"shape":[..]} objects ("" when not an inference or not
  // decoded).
  std::string_view model;
  int64_t model_version = 0;
  std::string_view input_shapes_json;
  uint64_t request_bytes = 0;   // the request body's size (gRPC: the request message's)
  uint64_t response_bytes = 0;  // the response body's size (gRPC: the response message's)
  // Stage durations of a successful inference (zero otherwise); output_ns is the response
  // encoding, total_ns from receipt of the whole request to the encoded response.
  InferenceTiming timing;
  uint64_t output_ns = 0;
  uint64_t total_ns = 0;
  // A generation (docs/generation.md): token counts over its sequences and the time from
  // receipt to its first token (0: none came); `timing` and output_ns stay zero.
  // prompt_tokens -1: not a generation.
  int64_t prompt_tokens = -1;
  int64_t completion_tokens = 0;
  uint64_t first_token_ns = 0;
};

class AccessLog {
 public:
  virtual ~AccessLog() = default;
  // Queues `record` for writing. Never blocks on I/O: when the writer falls behind and its
  // buffer is full, this record's line is dropped (and counted). Thread safe.
  virtual void Write(const AccessRecord& record) = 0;
};

}  // namespace harrier
