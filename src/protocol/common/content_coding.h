// Content codings (RFC 9110 §8.4.1), with zlib, for every front end: a KServe REST body sent
// with `Content-Encoding: gzip` or `deflate` is decoded before it is parsed, and an inference
// response is encoded when the request's `Accept-Encoding` asks for one, as Triton's HTTP
// endpoint does; a gRPC message compressed with its call's `grpc-encoding` (gzip, deflate) is
// decoded the same way (protocol/grpc/grpc_wire.h). The decoded size is bounded, so a
// compression bomb costs at most the limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "harrier/http_message.h"
#include "harrier/status.h"

namespace harrier {

enum class ContentCoding { kIdentity, kGzip, kDeflate };

// The coding a Content-Encoding value names (case-insensitive, surrounding spaces ignored):
// absent/"" and "identity", "gzip" or "x-gzip", "deflate". Anything else, a list of codings
// included: nullopt.
std::optional<ContentCoding> ParseContentEncoding(std::string_view value);

// The coding to answer with, from an Accept-Encoding value: gzip when the client accepts it
// (a q of 0 refuses; the higher q wins), else deflate, else identity. "*" stands for any
// coding not listed.
ContentCoding NegotiateContentCoding(std::string_view accept_encoding);

// "gzip" / "deflate" for the Content-Encoding header ("" for identity).
std::string_view ContentCodingName(ContentCoding coding);

// Decodes `encoded` (callers pass identity bodies through untouched; identity here is
// kInternal): gzip (RFC 1952, concatenated members too) or deflate (the zlib format of
// RFC 1950, which is what HTTP's "deflate" means; a raw RFC 1951 stream, which some clients
// send, is accepted as well). The result has `padding` bytes of spare capacity after its end.
// Errors: kPayloadTooLarge as soon as the output would pass `max_bytes` (the rest is not
// decoded); kInvalidArgument for data that is not a complete stream of that coding (bad header
// or checksum, truncated, bytes after the end).
StatusOr<std::string> DecodeContent(std::string_view encoded, ContentCoding coding,
                                    uint64_t max_bytes, size_t padding);

// A REST request's body as a front end parses it (`*body`, the request's own to begin with):
// decoded, within `max_bytes` and with `padding` spare bytes after its end, when its
// Content-Encoding names gzip or deflate; as it is without one (or with identity). Another
// coding is kInvalidArgument, as in Triton (docs/api.md, "Compression"); DecodeContent's errors
// otherwise.
Status DecodeRequestBody(const HttpRequest& request, uint64_t max_bytes, size_t padding,
                         std::shared_ptr<const std::string>* body);

// Encodes `body` in `coding` (gzip or deflate) at zlib's fastest level: a response is on the
// request's critical path, and level 1 already shrinks tensor data and JSON most of the way.
// nullopt if zlib fails (the response then goes out unencoded).
std::optional<std::string> EncodeContent(std::string_view body, ContentCoding coding);

}  // namespace harrier
