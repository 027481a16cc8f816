// libFuzzer target: gRPC's wire format as the gRPC port reads it (protocol/grpc/grpc_wire.h).
// Any byte string, fed to a MessageReader in pieces whose sizes the input chooses, must give
// messages or a clear error — never a crash, a sanitizer report, or a buffer larger than the
// input; each message is then parsed as a ModelInferRequest (the protobuf decoder the unary and
// streaming calls use). The same body goes through a reader whose call says gzip or deflate,
// where compressed messages are decompressed within the limit. grpc-timeout and grpc-message
// encoding get the same bytes.
//
// Input layout: byte 0 picks the piece size (bits 0-6: 1..128) and the second reader's encoding
// (bit 7: deflate, else gzip); the rest is the body.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/grpc/grpc_service.pb.h"
#include "protocol/grpc/grpc_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::size_t piece = std::size_t{data[0] & 0x7Fu} + 1;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  harrier::grpc_frontend::MessageReader reader(1 << 16);
  std::size_t taken = 0;
  for (std::size_t at = 0; at < body.size(); at += piece) {
    reader.Append(body.substr(at, piece));
    if (reader.buffered_bytes() > body.size()) __builtin_trap();  // buffered more than was fed
    while (auto message = reader.Next()) {
      taken += message->size() + harrier::grpc_frontend::kMessagePrefixBytes;
      inference::ModelInferRequest request;
      (void)request.ParseFromString(*message);
    }
  }
  if (taken > body.size()) __builtin_trap();

  constexpr std::size_t kLimit = 1 << 16;
  const auto encoding = (data[0] & 0x80u) != 0 ? harrier::grpc_frontend::MessageEncoding::kDeflate
                                               : harrier::grpc_frontend::MessageEncoding::kGzip;
  harrier::grpc_frontend::MessageReader compressed(kLimit, encoding);
  for (std::size_t at = 0; at < body.size(); at += piece) {
    compressed.Append(body.substr(at, piece));
    if (compressed.buffered_bytes() > body.size()) __builtin_trap();  // counted as it came
    while (auto message = compressed.Next()) {
      if (message->size() > kLimit) __builtin_trap();  // decompressed past the limit
    }
  }

  (void)harrier::grpc_frontend::ParseGrpcTimeout(body.substr(0, 16));
  const std::string encoded = harrier::grpc_frontend::EncodeStatusMessage(body);
  if (encoded.size() > 3 * harrier::grpc_frontend::kMaxStatusMessageBytes + 32) __builtin_trap();
  const std::string decoded = harrier::grpc_frontend::DecodeStatusMessage(encoded);
  if (body.size() <= harrier::grpc_frontend::kMaxStatusMessageBytes && decoded != body)
    __builtin_trap();  // encoding round-trips when nothing was cut
  return 0;
}
