#include "server/request_parser.h"

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <optional>
#include <string>

#include "core/http_text.h"

namespace harrier::server_internal {

namespace http = boost::beast::http;
using boost::beast::error_code;
using boost::beast::string_view;

void SpareHeaderFields::Reclaim(std::vector<HeaderField>* fields) {
  for (HeaderField& field : *fields) {
    if (fields_.size() == kMaxFields) break;
    if (field.first.capacity() > kMaxBytes || field.second.capacity() > kMaxBytes) continue;
    fields_.push_back(std::move(field));
  }
  fields->clear();
}

HeaderField SpareHeaderFields::Take() {
  if (fields_.empty()) return {};
  HeaderField field = std::move(fields_.back());
  fields_.pop_back();
  return field;
}

RequestParser::RequestParser(HttpRequest* request, std::string* body, SpareHeaderFields* spare,
                             uint64_t max_body_bytes, uint32_t max_header_bytes)
    : request_(request),
      body_(body),
      spare_(spare),
      max_body_bytes_(max_body_bytes),
      max_header_bytes_(max_header_bytes) {
  body_limit(max_body_bytes);
  header_limit(max_header_bytes);
}

namespace {

// A Host field value RFC 9112 §3.2 accepts: empty, or uri-host [":" port] (RFC 3986: an
// IP-literal in brackets, an IPv4 address or a reg-name of unreserved, percent-encoded and
// sub-delims characters), checked by its characters; a server must answer 400 to any other
// (probe 57: `Host: x y@z` was served). Harrier does not use the value.
bool IsValidHostValue(std::string_view value) {
  for (const char c : value) {
    const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') ||
                         std::string_view("-._~%!$&'()*+,;=:[]").find(c) != std::string_view::npos;
    if (!allowed) return false;
  }
  return true;
}

// The origin-form of an absolute-form target ("http://host:port/v2/health/ready?x" ->
// "/v2/health/ready?x"; "http://host" -> "/"), which a server must accept (RFC 9112 §3.2.2) and
// a proxy may forward as it came (probe 57: HAProxy did, and every such request was a 404).
// Any other target as it is; nullopt for an absolute-form whose authority is not host[:port]
// (userinfo, a '#', a backslash: a proxy and Harrier could read such a target differently; probe
// 60).
std::optional<std::string_view> OriginForm(std::string_view target) {
  std::size_t scheme_end = 0;
  if (target.size() > 7 && IEquals(target.substr(0, 7), "http://")) {
    scheme_end = 7;
  } else if (target.size() > 8 && IEquals(target.substr(0, 8), "https://")) {
    scheme_end = 8;
  } else {
    return target;
  }
  const std::size_t path = target.find_first_of("/?", scheme_end);
  const std::string_view authority = target.substr(
      scheme_end, path == std::string_view::npos ? std::string_view::npos : path - scheme_end);
  if (authority.empty() || !IsValidHostValue(authority)) return std::nullopt;
  if (path == std::string_view::npos) return "/";
  return target.substr(path);
}

}  // namespace

void RequestParser::on_request_impl(http::verb, string_view method_str, string_view target,
                                    int version, error_code& ec) {
  request_->method.assign(method_str.data(), method_str.size());
  const std::optional<std::string_view> origin_form = OriginForm({target.data(), target.size()});
  if (!origin_form) {
    request_->target.assign(target.data(), std::min<std::size_t>(target.size(), 256));
    return Refuse(400, "the request target's authority is not host[:port]", ec);
  }
  // An empty path is "/" (RFC 9112 §3.2.1; probe 65: "http://x?q" was served as "?q").
  if (origin_form->starts_with('?')) {
    request_->target.assign("/");
    request_->target.append(origin_form->data(), origin_form->size());
  } else {
    request_->target.assign(origin_form->data(), origin_form->size());
  }
  version_ = version;
}

void RequestParser::on_response_impl(int, string_view, int, error_code& ec) {
  ec = http::error::bad_version;  // unreachable: this is a request parser
}

namespace {

// True when the field whose name starts at `name` was folded onto a second line. Beast hands
// over a field only once its line is in the buffer it parses, and only after it has seen the
// byte that follows the line's CRLF (to look for a fold itself): so the line is still there,
// its first CR is the end of its first line (a CR not followed by LF fails earlier), and the
// byte two past it is readable. Beast would join a folded value with a space; RFC 9112 §5.2
// lets a server refuse it instead, which leaves no room for two parsers to read it differently.
bool FieldIsFolded(string_view name) {
  const char* p = name.data() + name.size();
  while (*p != '\r') ++p;
  return IsOws(p[2]);
}

}  // namespace

void RequestParser::Refuse(int status, std::string message, error_code& ec) {
  refusal_ = Refusal{status, std::move(message)};
  ec = http::error::bad_value;
}

void RequestParser::NoteTransferCodings(string_view value) {
  transfer_encoding_ = true;
  while (true) {
    const std::size_t comma = value.find(',');
    const string_view element = value.substr(0, comma);
    // A coding's parameters do not matter here.
    const std::string_view item =
        TrimOws(std::string_view(element.data(), element.size()).substr(0, element.find(';')));
    if (!item.empty()) {  // empty list elements are allowed and ignored (RFC 9110 §5.6.1)
      last_coding_chunked_ = IEquals(item, "chunked");
      if (last_coding_chunked_) {
        ++chunked_codings_;
      } else if (first_other_coding_.empty()) {
        first_other_coding_.assign(item.data(), item.size());
      }
    }
    if (comma == string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
}

void RequestParser::CheckHeader(error_code& ec) {
  if (host_fields_ > 1) return Refuse(400, "more than one Host header", ec);
  if (host_fields_ == 0 && version_ >= 11)
    return Refuse(400, "an HTTP/1.1 request must carry a Host header", ec);
  if (invalid_host_) return Refuse(400, "the Host header's value is not a valid host[:port]", ec);
  if (!transfer_encoding_) return;
  if (version_ < 11)
    return Refuse(400, "Transfer-Encoding is not allowed in an HTTP/1.0 request", ec);
  if (!last_coding_chunked_ || chunked_codings_ > 1) {
    return Refuse(400,
                  "Transfer-Encoding must end with 'chunked', once (only chunked bodies have a "
                  "known length)",
                  ec);
  }
  if (!first_other_coding_.empty()) {
    return Refuse(
        501, "transfer coding '" + first_other_coding_ + "' is not implemented; only 'chunked' is",
        ec);
  }
}

void RequestParser::on_field_impl(http::field name, string_view name_string, string_view value,
                                  error_code& ec) {
  // A chunked body's trailer field: dropped. Merged into the header fields (RFC 9110 §6.5.1
  // forbids it) it changed how the body was decoded, started an h2c upgrade and put back a
  // client id that a proxy had removed, none of which a proxy that reads the header saw (probe
  // 57); Harrier uses no request trailer, and its HTTP/2 path never merged them. Their size is
  // bounded by the connection (--max-header-bytes).
  if (is_header_done()) {
    trailer_bytes_ += name_string.size() + value.size() + 4;  // "name: value\r\n", as a header
    if (trailer_bytes_ > max_header_bytes_) {
      return Refuse(400,
                    "the trailer section is larger than the server's limit of " +
                        std::to_string(max_header_bytes_) + " bytes",
                    ec);
    }
    return;
  }
  if (FieldIsFolded(name_string))
    return Refuse(400, "obsolete line folding (a header line starting with a space or tab)", ec);
  if (name == http::field::host) {
    ++host_fields_;
    if (!IsValidHostValue({value.data(), value.size()})) invalid_host_ = true;
  }
  if (name == http::field::transfer_encoding) NoteTransferCodings(value);
  HeaderField field = spare_ != nullptr ? spare_->Take() : HeaderField{};
  field.first.assign(name_string.data(), name_string.size());
  for (char& c : field.first)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  field.second.assign(value.data(), value.size());
  if (name == http::field::expect && boost::beast::iequals(value, "100-continue"))
    expects_continue_ = true;
  request_->headers.push_back(std::move(field));
}

void RequestParser::on_header_impl(error_code& ec) {
  CheckHeader(ec);
}

void RequestParser::on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                                      error_code& ec) {
  if (content_length) {
    if (*content_length > max_body_bytes_) {
      ec = http::error::body_limit;
      return;
    }
    // simdjson reads up to 64 bytes (SIMDJSON_PADDING) past the end: keep them allocated.
    body_->reserve(static_cast<std::size_t>(*content_length) + 64);
  }
}

std::size_t RequestParser::on_body_impl(string_view body, error_code&) {
  body_->append(body.data(), body.size());
  return body.size();
}

void RequestParser::on_chunk_header_impl(std::uint64_t size, string_view extensions,
                                         error_code& ec) {
  // Whether the line came in one read or many (the connection bounds what it buffers; probe
  // 60), and over all the body's chunks together (RFC 9112 §7.1.1; probe 65: 18 MB of
  // extensions went with a 2-byte body).
  extension_bytes_ += extensions.size();
  if (extension_bytes_ > max_header_bytes_) {
    return Refuse(400,
                  "the chunks' extensions are larger than the server's limit of " +
                      std::to_string(max_header_bytes_) + " bytes",
                  ec);
  }
  // Beast also counts chunk sizes against body_limit; checking here gives the same error
  // before any of the chunk's bytes are buffered.
  if (size > max_body_bytes_ - body_->size()) ec = http::error::body_limit;
}

std::size_t RequestParser::on_chunk_body_impl(std::uint64_t, string_view body, error_code&) {
  body_->append(body.data(), body.size());
  return body.size();
}

void RequestParser::on_finish_impl(error_code&) {}

}  // namespace harrier::server_internal
