// libFuzzer target: HTTP/1.1 requests, as a client sends them, through the server's own
// connection (server/http_connection.h and the Beast-based server/request_parser.h): request
// lines, header fields, Content-Length and chunked bodies, Expect: 100-continue, pipelining,
// keep-alive and Connection: close, errors answered by the transport (400, 413, 431), and the
// hand-over to HTTP/2 (a preface with prior knowledge, or `Upgrade: h2c` with HTTP2-Settings
// followed by the preface and frames).
//
// Input: one options byte (ExchangeOptions::FromByte: how the bytes are split into reads,
// whether the server begins to stop, whether answers are deferred), then the bytes the client
// writes. What the handler does per path and what counts as a finding: fuzz/http_fuzz_harness.h.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/http_fuzz_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* harness = new harrier::fuzz::HttpFuzzHarness(harrier::fuzz::FuzzServerOptions());
  if (size < 1) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  harness->Exchange({}, bytes, harrier::fuzz::ExchangeOptions::FromByte(data[0]));
  return 0;
}
