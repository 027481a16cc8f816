#include "server/request_parser.h"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>

namespace harrier::server_internal {

namespace http = boost::beast::http;
using boost::beast::error_code;
using boost::beast::string_view;

RequestParser::RequestParser(HttpRequest* request, std::string* body, uint64_t max_body_bytes,
                             uint32_t max_header_bytes)
    : request_(request), body_(body), max_body_bytes_(max_body_bytes) {
  body_limit(max_body_bytes);
  header_limit(max_header_bytes);
}

void RequestParser::on_request_impl(http::verb, string_view method_str, string_view target,
                                    int version, error_code&) {
  request_->method.assign(method_str.data(), method_str.size());
  request_->target.assign(target.data(), target.size());
  version_ = version;
}

void RequestParser::on_response_impl(int, string_view, int, error_code& ec) {
  ec = http::error::bad_version;  // unreachable: this is a request parser
}

void RequestParser::on_field_impl(http::field name, string_view name_string, string_view value,
                                  error_code&) {
  std::string lower(name_string.data(), name_string.size());
  for (char& c : lower)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  if (name == http::field::expect && boost::beast::iequals(value, "100-continue"))
    expects_continue_ = true;
  request_->headers.emplace_back(std::move(lower), std::string(value.data(), value.size()));
}

void RequestParser::on_header_impl(error_code&) {}

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

void RequestParser::on_chunk_header_impl(std::uint64_t size, string_view, error_code& ec) {
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
