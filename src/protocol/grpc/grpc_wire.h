// The gRPC-over-HTTP/2 wire format ("PROTOCOL-HTTP2" of the gRPC project) that Harrier's own
// HTTP/2 server speaks on the gRPC port: length-prefixed messages, grpc-timeout, and the
// grpc-status / grpc-message fields. Pure functions and one small value type, no I/O, no gRPC
// library; the fuzzers and unit tests drive them directly.
//
// Thread safety: the functions may be called from any thread; a MessageReader from one at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status_mapping.h"
#include "harrier/status.h"

namespace harrier::grpc_frontend {

// Every message is a 1-byte compressed flag, a 4-byte big-endian length, then the bytes.
inline constexpr std::size_t kMessagePrefixBytes = 5;
// The message encodings this server decodes, as it announces them (grpc-accept-encoding).
inline constexpr std::string_view kAcceptedMessageEncodings = "identity,deflate,gzip";

// A call's message encoding, from its grpc-encoding header (gRPC's compression.md): what its
// messages whose compressed flag is 1 are compressed with. Responses are never compressed
// (identity is always acceptable to a client; Triton compresses none by default either).
enum class MessageEncoding { kIdentity, kGzip, kDeflate, kUnsupported };
// "" (no header) and "identity": kIdentity; "gzip", "deflate"; anything else kUnsupported (an
// error only once a compressed message comes: uncompressed ones are read as usual).
MessageEncoding ParseMessageEncoding(std::string_view grpc_encoding);

struct MessagePrefix {
  bool compressed = false;
  uint32_t length = 0;  // of the bytes as sent (compressed ones: before decompression)
};
// grpc-message is cut to this many bytes (before percent-encoding, on a UTF-8 boundary), so that
// an error that echoes a huge name cannot make a header block no client accepts.
inline constexpr std::size_t kMaxStatusMessageBytes = 1024;

// Writes the 5-byte prefix of an uncompressed message of `length` bytes at `out`.
void WriteMessagePrefix(std::size_t length, char* out);
// What a 5-byte prefix (at `prefix`) announces: kInternal when the flag is neither 0 nor 1,
// kPayloadTooLarge when the length is over `max_message_bytes`.
StatusOr<MessagePrefix> ReadMessagePrefix(const char* prefix, std::size_t max_message_bytes);

// A message's bytes as its prefix and the call's encoding say: `bytes` itself when it is not
// compressed, else decompressed into `*storage` (and a view of it), at most `max_message_bytes`
// of them. Errors, as gRPC's servers answer them: kUnimplemented for an encoding this server
// does not decode (the answer's grpc-accept-encoding names the ones it does), kInternal for a
// compressed message on a call whose encoding is identity or for bytes that are not a complete
// stream of that encoding, kPayloadTooLarge as soon as the decompressed size passes the limit
// (a compression bomb costs at most the limit).
StatusOr<std::string_view> MessageBytes(const MessagePrefix& prefix, std::string_view bytes,
                                        MessageEncoding encoding, std::size_t max_message_bytes,
                                        std::string* storage);

// `message` with its 5-byte prefix (uncompressed).
std::string FrameMessage(std::string_view message);

// Splits a request body, fed in arbitrary pieces, into messages.
class MessageReader {
 public:
  // `max_message_bytes`: a larger message is an error (kPayloadTooLarge) as soon as its prefix
  // is in, before its bytes are buffered; a compressed one also once it decompresses past it.
  // `encoding`: the call's (grpc-encoding), for its compressed messages.
  explicit MessageReader(std::size_t max_message_bytes,
                         MessageEncoding encoding = MessageEncoding::kIdentity)
      : max_message_bytes_(max_message_bytes), encoding_(encoding) {}

  // Appends bytes. After an error, everything is ignored and error() stays set.
  void Append(std::string_view bytes);
  // The next complete message, decompressed, moved out (nullopt: none complete yet). After an
  // error, the messages that were complete before the one in error are still handed out, in
  // order; none after it.
  std::optional<std::string> Next();
  // MessageBytes's and ReadMessagePrefix's errors for the first message that had one; OK
  // otherwise.
  const Status& error() const { return error_; }
  // Whether bytes of an unfinished message are buffered (a body that ends here is cut short).
  bool partial() const { return !buffer_.empty(); }
  // The bytes of that unfinished message (its prefix included).
  std::size_t partial_bytes() const { return buffer_.size(); }
  // Whether a complete message waits for Next().
  bool has_next() const { return next_ready_ < ready_.size(); }
  // Bytes buffered and not yet handed out by Next().
  std::size_t buffered_bytes() const { return buffered_; }

 private:
  void Split();

  struct Ready {
    std::string message;     // decompressed
    std::size_t wire_bytes;  // as it came, prefix included (what buffered_bytes() counts)
  };

  const std::size_t max_message_bytes_;
  const MessageEncoding encoding_;
  std::string buffer_;  // an incomplete message (prefix included)
  std::vector<Ready> ready_;
  std::size_t next_ready_ = 0;
  std::size_t buffered_ = 0;
  Status error_ = Status::Ok();
};

// A grpc-timeout value ("1*8DIGIT unit", unit one of H M S m u n). kInvalidArgument when it
// does not parse; the result is at most about a year, whatever the digits say.
StatusOr<std::chrono::nanoseconds> ParseGrpcTimeout(std::string_view value);

// grpc-message's encoding: `message` cut to kMaxStatusMessageBytes (marked "...(truncated)"),
// then every byte outside 0x20..0x7E, and '%', as %XX.
std::string EncodeStatusMessage(std::string_view message);
// The inverse, for tests and clients: %XX decoded, anything malformed kept as it is.
std::string DecodeStatusMessage(std::string_view encoded);

// The fields that end a call: grpc-status, grpc-message when there is one, and `retry-after`
// (seconds) for a refusal that names one (RetryAfterSeconds).
std::vector<std::pair<std::string, std::string>> StatusFields(const Status& status);
// The same for a code and message of the transport's own.
std::vector<std::pair<std::string, std::string>> StatusFields(GrpcCode code,
                                                              std::string_view message);

// The gRPC code for an HTTP status the transport answered itself (gRPC's "HTTP to gRPC status
// code mapping": 400 INTERNAL, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 UNIMPLEMENTED,
// 502/503/504 UNAVAILABLE), except that 413, 429 and 431, a limit broken, are
// RESOURCE_EXHAUSTED and 408 is DEADLINE_EXCEEDED, as a gRPC server says them.
GrpcCode GrpcCodeForHttpStatus(int http_status);

}  // namespace harrier::grpc_frontend
