#include "protocol/grpc/grpc_wire.h"

#include <algorithm>
#include <charconv>

#include "core/utf8.h"
#include "protocol/common/content_coding.h"

namespace harrier::grpc_frontend {

MessageEncoding ParseMessageEncoding(std::string_view grpc_encoding) {
  if (grpc_encoding.empty() || grpc_encoding == "identity") return MessageEncoding::kIdentity;
  if (grpc_encoding == "gzip") return MessageEncoding::kGzip;
  if (grpc_encoding == "deflate") return MessageEncoding::kDeflate;
  return MessageEncoding::kUnsupported;
}

void WriteMessagePrefix(std::size_t length, char* out) {
  const auto n = static_cast<uint32_t>(length);
  out[0] = '\0';
  out[1] = static_cast<char>(n >> 24);
  out[2] = static_cast<char>(n >> 16);
  out[3] = static_cast<char>(n >> 8);
  out[4] = static_cast<char>(n);
}

StatusOr<MessagePrefix> ReadMessagePrefix(const char* prefix, std::size_t max_message_bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(prefix);
  if (p[0] > 1) return Status(StatusCode::kInternal, "the message's compressed flag is neither 0 nor 1");
  const uint32_t length = uint32_t{p[1]} << 24 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 8 | p[4];
  if (length > max_message_bytes) {
    return Status(StatusCode::kPayloadTooLarge, "received message larger than max (" +
                                                    std::to_string(length) + " vs. " +
                                                    std::to_string(max_message_bytes) + ")");
  }
  return MessagePrefix{p[0] == 1, length};
}

StatusOr<std::string_view> MessageBytes(const MessagePrefix& prefix, std::string_view bytes,
                                        MessageEncoding encoding, std::size_t max_message_bytes,
                                        std::string* storage) {
  if (!prefix.compressed) return bytes;
  ContentCoding coding = ContentCoding::kIdentity;
  switch (encoding) {
    case MessageEncoding::kGzip: coding = ContentCoding::kGzip; break;
    case MessageEncoding::kDeflate: coding = ContentCoding::kDeflate; break;
    case MessageEncoding::kIdentity:
      return Status(StatusCode::kInternal,
                    "a compressed message on a call whose grpc-encoding is identity");
    case MessageEncoding::kUnsupported:
      return Status(StatusCode::kUnimplemented,
                    "the message's grpc-encoding is not supported: this server accepts " +
                        std::string(kAcceptedMessageEncodings));
  }
  auto decoded = DecodeContent(bytes, coding, max_message_bytes, 0);
  if (!decoded.ok()) {
    if (decoded.status().code() == StatusCode::kPayloadTooLarge) {
      return Status(StatusCode::kPayloadTooLarge,
                    "received message decompresses to more than the max (" +
                        std::to_string(max_message_bytes) + " bytes)");
    }
    return Status(StatusCode::kInternal,
                  "the message cannot be decompressed: " + decoded.status().message());
  }
  *storage = std::move(decoded).value();
  return std::string_view(*storage);
}

std::string FrameMessage(std::string_view message) {
  std::string out(kMessagePrefixBytes, '\0');
  WriteMessagePrefix(message.size(), out.data());
  out.append(message);
  return out;
}

void MessageReader::Append(std::string_view bytes) {
  if (!error_.ok() || bytes.empty()) return;
  buffer_.append(bytes);
  buffered_ += bytes.size();
  Split();
}

void MessageReader::Split() {
  std::size_t at = 0;
  while (buffer_.size() - at >= kMessagePrefixBytes) {
    auto prefix = ReadMessagePrefix(buffer_.data() + at, max_message_bytes_);
    if (!prefix.ok()) {
      error_ = prefix.status();
      break;
    }
    const uint32_t length = prefix->length;
    if (buffer_.size() - at - kMessagePrefixBytes < length) {
      // Incomplete: reserve for the whole of it once, so that a large message is copied once.
      if (at == 0) buffer_.reserve(kMessagePrefixBytes + length);
      break;
    }
    const std::string_view bytes(buffer_.data() + at + kMessagePrefixBytes, length);
    if (prefix->compressed) {
      std::string decompressed;
      auto message = MessageBytes(*prefix, bytes, encoding_, max_message_bytes_, &decompressed);
      if (!message.ok()) {
        error_ = message.status();
        break;
      }
      ready_.push_back({std::move(decompressed), kMessagePrefixBytes + length});
    } else {
      ready_.push_back({std::string(bytes), kMessagePrefixBytes + length});
    }
    at += kMessagePrefixBytes + length;
  }
  if (!error_.ok()) {
    // The messages complete before the bad one stay to be handed out; nothing after it.
    buffer_ = std::string();
    buffered_ = 0;
    for (std::size_t i = next_ready_; i < ready_.size(); ++i) buffered_ += ready_[i].wire_bytes;
    return;
  }
  if (at > 0) buffer_.erase(0, at);
}

std::optional<std::string> MessageReader::Next() {
  if (next_ready_ == ready_.size()) {
    ready_.clear();
    next_ready_ = 0;
    return std::nullopt;
  }
  Ready& ready = ready_[next_ready_++];
  buffered_ -= ready.wire_bytes;
  return std::move(ready.message);
}

StatusOr<std::chrono::nanoseconds> ParseGrpcTimeout(std::string_view value) {
  if (value.size() < 2 || value.size() > 9)
    return InvalidArgument("grpc-timeout must be 1 to 8 digits and a unit");
  uint64_t n = 0;
  const std::string_view digits = value.substr(0, value.size() - 1);
  for (char ch : digits)
    if (ch < '0' || ch > '9')
      return InvalidArgument("grpc-timeout must be 1 to 8 digits and a unit");
  std::from_chars(digits.data(), digits.data() + digits.size(), n);
  using std::chrono::nanoseconds;
  constexpr auto kYear = std::chrono::hours(24 * 365);
  std::chrono::nanoseconds unit;
  switch (value.back()) {
    case 'H': unit = std::chrono::hours(1); break;
    case 'M': unit = std::chrono::minutes(1); break;
    case 'S': unit = std::chrono::seconds(1); break;
    case 'm': unit = std::chrono::milliseconds(1); break;
    case 'u': unit = std::chrono::microseconds(1); break;
    case 'n': unit = nanoseconds(1); break;
    default: return InvalidArgument("grpc-timeout's unit must be one of H M S m u n");
  }
  // At most 99,999,999 hours: clamp before multiplying out of range.
  if (n >= static_cast<uint64_t>(kYear / unit)) return nanoseconds(kYear);
  return nanoseconds(unit * static_cast<int64_t>(n));
}

std::string EncodeStatusMessage(std::string_view message) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const bool cut = message.size() > kMaxStatusMessageBytes;
  const std::string_view kept = Utf8Prefix(message, kMaxStatusMessageBytes);
  std::string out;
  out.reserve(kept.size() + 16);
  for (char ch : kept) {
    const auto b = static_cast<unsigned char>(ch);
    if (b >= 0x20 && b <= 0x7E && b != '%') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[b >> 4]);
      out.push_back(kHex[b & 0xF]);
    }
  }
  if (cut) out += "...(truncated)";
  return out;
}

std::string DecodeStatusMessage(std::string_view encoded) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  out.reserve(encoded.size());
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    if (encoded[i] == '%' && i + 2 < encoded.size() && hex(encoded[i + 1]) >= 0 &&
        hex(encoded[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(encoded[i + 1]) << 4 | hex(encoded[i + 2])));
      i += 2;
    } else {
      out.push_back(encoded[i]);
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> StatusFields(GrpcCode code,
                                                              std::string_view message) {
  std::vector<std::pair<std::string, std::string>> fields;
  fields.reserve(2);
  fields.emplace_back("grpc-status", std::to_string(static_cast<int>(code)));
  if (!message.empty()) fields.emplace_back("grpc-message", EncodeStatusMessage(message));
  return fields;
}

std::vector<std::pair<std::string, std::string>> StatusFields(const Status& status) {
  if (status.ok()) return {{"grpc-status", "0"}};
  auto fields = StatusFields(GrpcStatusCodeFor(status.code()), status.message());
  if (int seconds = RetryAfterSeconds(status); seconds > 0)
    fields.emplace_back("retry-after", std::to_string(seconds));
  return fields;
}

GrpcCode GrpcCodeForHttpStatus(int http_status) {
  switch (http_status) {
    case 400: return GrpcCode::kInternal;
    case 401: return GrpcCode::kUnauthenticated;
    case 403: return GrpcCode::kPermissionDenied;
    case 404: return GrpcCode::kUnimplemented;
    case 408: return GrpcCode::kDeadlineExceeded;
    case 413:
    case 431:
    // A rate limit (an API key's own, src/auth/), as admission control's refusals are said.
    case 429: return GrpcCode::kResourceExhausted;
    case 502:
    case 503:
    case 504: return GrpcCode::kUnavailable;
    default: return GrpcCode::kUnknown;
  }
}

}  // namespace harrier::grpc_frontend
