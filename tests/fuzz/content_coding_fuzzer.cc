// libFuzzer target: compressed request bodies as clients send them (protocol/kserve/
// content_coding.h). The first byte picks the coding (even: gzip, odd: deflate); the rest is the
// body, decoded with a 64 KiB limit.
//
// Findings besides the sanitizers': an output past the limit, a result without the requested
// padding, an error other than kInvalidArgument / kPayloadTooLarge, and a decoded body that does
// not survive EncodeContent and a second DecodeContent unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "protocol/common/content_coding.h"

namespace {

using harrier::StatusCode;
using harrier::ContentCoding;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "content_coding_fuzzer: %s\n", what);
  std::abort();
}

constexpr uint64_t kLimit = 64 * 1024;
constexpr size_t kPadding = 64;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const ContentCoding coding = data[0] % 2 == 0 ? ContentCoding::kGzip : ContentCoding::kDeflate;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  auto decoded = harrier::DecodeContent(body, coding, kLimit, kPadding);
  if (!decoded.ok()) {
    const StatusCode code = decoded.status().code();
    if (code != StatusCode::kInvalidArgument && code != StatusCode::kPayloadTooLarge)
      Fail("an error other than 400 or 413");
    return 0;
  }
  if (decoded->size() > kLimit) Fail("decoded past the limit");
  if (decoded->capacity() < decoded->size() + kPadding) Fail("no padding after the body");
  auto encoded = harrier::EncodeContent(*decoded, coding);
  if (!encoded) Fail("EncodeContent failed");
  auto again = harrier::DecodeContent(*encoded, coding, kLimit, 0);
  if (!again.ok() || *again != *decoded) Fail("the round trip changed the body");
  // The header parsers see the same bytes as header values.
  (void)harrier::ParseContentEncoding(body.substr(0, 64));
  (void)harrier::NegotiateContentCoding(body.substr(0, 256));
  return 0;
}
