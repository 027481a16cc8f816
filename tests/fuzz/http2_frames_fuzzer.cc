// libFuzzer target: HTTP/2 frames from a client, through the server's own connection classes:
// the connection starts as HTTP/1.1 and hands itself to Http2Connection<TcpStream> on seeing
// the preface, as in the server; nghttp2 then frames and decodes, and our callbacks turn streams
// into requests (header list limits, content-length, bodies against max_body_bytes, Precheck
// refusals with RST_STREAM, responses from inside and outside the handler, streams reset or
// closed before their answer, GOAWAY when the server stops).
//
// Input: one options byte (ExchangeOptions::FromByte: how the frames are split into reads,
// whether the server begins to stop, whether answers are deferred), then frames. The harness
// writes the client preface and an empty SETTINGS frame first, so the input starts where a
// client's first request would (more SETTINGS are welcome). tests/fuzz/make_seeds.py builds the
// seeds. What the handler does per path and what counts as a finding: fuzz/http_fuzz_harness.h.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/http_fuzz_harness.h"
#include "server/http2_connection.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* harness = new harrier::fuzz::HttpFuzzHarness(harrier::fuzz::FuzzServerOptions());
  // An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
  static const std::string prologue =
      std::string(harrier::server_internal::kHttp2Preface) + std::string("\0\0\0\4\0\0\0\0\0", 9);
  if (size < 1) return 0;
  const std::string_view frames(reinterpret_cast<const char*>(data + 1), size - 1);
  harness->Exchange(prologue, frames, harrier::fuzz::ExchangeOptions::FromByte(data[0]));
  return 0;
}
