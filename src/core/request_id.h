// Request ids: the X-Request-Id a client sends (or one the server makes up) that ties a
// response, its access log line and the client's own logs together (docs/logging.md).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace harrier {

// Longest client id taken as is; a longer one is replaced by a generated id.
inline constexpr size_t kMaxRequestIdBytes = 128;

// True when `id` may be used as sent: 1..kMaxRequestIdBytes bytes of visible ASCII (0x21..0x7E;
// no spaces or control characters, so that a text log line stays one line of fields).
bool IsAcceptableRequestId(std::string_view id);

// Makes ids "<6 hex digits of a per-process random prefix>-<8 hex digits of a counter>":
// 15 characters, which fit std::string's inline buffer, so making one allocates nothing.
// Unique within a process until the counter wraps (2^32 ids); the prefix keeps restarts and
// replicas apart with high probability, not certainty. Thread safe.
class RequestIdGenerator {
 public:
  // `prefix`: only its low 24 bits are used.
  explicit RequestIdGenerator(uint32_t prefix) : prefix_(prefix & 0xFFFFFF) {}
  std::string Next();

  // The process's generator, with a prefix from std::random_device.
  static RequestIdGenerator& Process();

 private:
  const uint32_t prefix_;
  std::atomic<uint32_t> counter_{0};
};

// The id for a request whose X-Request-Id header is `sent` ("" when absent): `sent` when
// acceptable, else a new one from `generator`.
std::string ResolveRequestId(std::string_view sent, RequestIdGenerator& generator);

}  // namespace harrier
