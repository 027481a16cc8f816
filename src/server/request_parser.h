// RequestParser: Beast's HTTP/1.1 request parser, writing straight into a harrier::HttpRequest.
//
// Beast's stock request_parser builds a beast::http::fields (one heap node per header) that we
// would then copy; this parser lower-cases header names into HttpRequest::headers as they are
// parsed and appends chunked body data to a caller-owned std::string. Content-Length bodies
// are normally read by the connection directly into that string (one copy fewer), so
// on_body_impl is only a fallback.
//
// Beyond Beast's own checks it refuses, as RFC 9112 requires of a server (docs/server.md):
//   400 an HTTP/1.1 request without a Host header, or any request with more than one, or one
//       whose value is not a host[:port] (§3.2);
//   400 obs-fold, a header line starting with SP or HTAB that continues the previous one (§5.2;
//       Beast would join the lines silently);
//   400 Transfer-Encoding whose last coding is not `chunked`, `identity` included (no longer a
//       transfer coding), or that names `chunked` twice: the body length is unknown (§6.3);
//       and Transfer-Encoding in an HTTP/1.0 request (§6.1);
//   501 Transfer-Encoding with a coding before `chunked` (`gzip, chunked`): Harrier decodes
//       only chunked (§6.1).
// put() then fails with http::error::bad_value and refusal() says what to answer.
// An absolute-form target (`http://host/path`) becomes its origin-form (`/path`; §3.2.2; 400
// when its authority is not host[:port]), and a chunked body's trailer fields are dropped, never
// merged into the header (RFC 9110 §6.5.1). A chunk's extensions, and the trailer section, over
// max_header_bytes are 400 (§7.1.1, §7.1.2).
//
// One parser per request (it is a small object, no heap allocation of its own). Not thread
// safe; used by one connection on its I/O thread.
#pragma once

#include <boost/beast/http/basic_parser.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harrier/http_message.h"

namespace harrier::server_internal {

using HeaderField = std::pair<std::string, std::string>;

// The header fields of a connection's earlier requests, kept for their strings' room: the next
// request's fields are parsed into them, so the usual handful (whose names and values recur
// request after request: Inference-Header-Content-Length is 31 bytes, past a std::string's
// inline 15) costs no heap allocation (issue 10). Bounded: at most kMaxFields fields, and a
// string whose room passed kMaxBytes is freed instead of kept.
class SpareHeaderFields {
 public:
  static constexpr std::size_t kMaxFields = 16;
  static constexpr std::size_t kMaxBytes = 256;

  // Takes `fields`' strings, leaving it empty (its own room kept).
  void Reclaim(std::vector<HeaderField>* fields);
  // A kept field (its contents are stale: assign both), or a new one.
  HeaderField Take();
  std::size_t size() const { return fields_.size(); }

 private:
  std::vector<HeaderField> fields_;
};

class RequestParser final : public boost::beast::http::basic_parser<true> {
 public:
  // `request`, `body` and `spare` must outlive the parser; `spare` (may be null) lends the
  // fields' strings. `max_body_bytes` bounds the body (a
  // Content-Length over it fails the header with http::error::body_limit; chunked data over it
  // fails when the chunk header arrives). `max_header_bytes` bounds request line + fields
  // (http::error::header_limit).
  RequestParser(HttpRequest* request, std::string* body, SpareHeaderFields* spare,
                uint64_t max_body_bytes, uint32_t max_header_bytes);

  // Why the parser refused the request itself (see above); set when put() failed for it.
  struct Refusal {
    int status = 400;
    std::string message;
  };

  // True when the request carried `Expect: 100-continue`.
  bool expects_continue() const { return expects_continue_; }
  int version() const { return version_; }
  const std::optional<Refusal>& refusal() const { return refusal_; }

 private:
  void on_request_impl(boost::beast::http::verb method, boost::beast::string_view method_str,
                       boost::beast::string_view target, int version,
                       boost::beast::error_code& ec) override;
  void on_response_impl(int code, boost::beast::string_view reason, int version,
                        boost::beast::error_code& ec) override;
  void on_field_impl(boost::beast::http::field name, boost::beast::string_view name_string,
                     boost::beast::string_view value, boost::beast::error_code& ec) override;
  void on_header_impl(boost::beast::error_code& ec) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                         boost::beast::error_code& ec) override;
  std::size_t on_body_impl(boost::beast::string_view body, boost::beast::error_code& ec) override;
  void on_chunk_header_impl(std::uint64_t size, boost::beast::string_view extensions,
                            boost::beast::error_code& ec) override;
  std::size_t on_chunk_body_impl(std::uint64_t remain, boost::beast::string_view body,
                                 boost::beast::error_code& ec) override;
  void on_finish_impl(boost::beast::error_code& ec) override;

  void Refuse(int status, std::string message, boost::beast::error_code& ec);
  // Reads one Transfer-Encoding field value's codings into the counters below.
  void NoteTransferCodings(boost::beast::string_view value);
  // The Host and Transfer-Encoding rules, once every header field is in.
  void CheckHeader(boost::beast::error_code& ec);

  HttpRequest* request_;
  std::string* body_;
  SpareHeaderFields* spare_;
  uint64_t max_body_bytes_;
  uint32_t max_header_bytes_;  // also bounds a chunk's extensions and the trailer section
  std::size_t trailer_bytes_ = 0;
  std::size_t extension_bytes_ = 0;  // over every chunk
  int version_ = 11;
  bool expects_continue_ = false;
  int host_fields_ = 0;
  bool invalid_host_ = false;
  // Transfer-Encoding, over all its fields in order.
  bool transfer_encoding_ = false;
  int chunked_codings_ = 0;
  bool last_coding_chunked_ = false;
  std::string first_other_coding_;  // the first coding that is not chunked; usually empty
  std::optional<Refusal> refusal_;
};

}  // namespace harrier::server_internal
