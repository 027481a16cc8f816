#include "protocol/grpc/grpc_wire.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "protocol/common/content_coding.h"

namespace harrier::grpc_frontend {
namespace {

using namespace std::chrono_literals;

TEST(MessageReaderTest, SplitsMessagesFedInAnyPieces) {
  const std::string body = FrameMessage("hello") + FrameMessage("") + FrameMessage("world!");
  for (std::size_t piece = 1; piece <= body.size(); ++piece) {
    MessageReader reader(1024);
    std::vector<std::string> got;
    for (std::size_t at = 0; at < body.size(); at += piece) {
      reader.Append(std::string_view(body).substr(at, piece));
      while (auto m = reader.Next()) got.push_back(*m);
    }
    ASSERT_TRUE(reader.error().ok());
    EXPECT_FALSE(reader.partial());
    EXPECT_EQ(reader.buffered_bytes(), 0u);
    EXPECT_EQ(got, (std::vector<std::string>{"hello", "", "world!"})) << "piece " << piece;
  }
}

TEST(MessageReaderTest, AMessageOverTheLimitIsRefusedFromItsPrefix) {
  MessageReader reader(10);
  const std::string big = FrameMessage(std::string(11, 'x'));
  reader.Append(std::string_view(big).substr(0, 5));  // only the prefix: nothing buffered for it
  EXPECT_EQ(reader.error().code(), StatusCode::kPayloadTooLarge);
  EXPECT_NE(reader.error().message().find("11 vs. 10"), std::string::npos);
  reader.Append(FrameMessage("ok"));  // ignored after an error
  EXPECT_FALSE(reader.Next().has_value());
  EXPECT_EQ(reader.buffered_bytes(), 0u);
}

// The messages before one over the limit, in the same bytes, are still handed out (a stream
// answers them before it ends with the error); nothing after it is.
TEST(MessageReaderTest, TheMessagesBeforeAnErrorAreStillHandedOut) {
  MessageReader reader(10);
  reader.Append(FrameMessage("one") + FrameMessage("two") + FrameMessage(std::string(11, 'x')) +
                FrameMessage("after"));
  EXPECT_EQ(reader.error().code(), StatusCode::kPayloadTooLarge);
  EXPECT_EQ(reader.buffered_bytes(), 2 * (kMessagePrefixBytes + 3));
  EXPECT_EQ(reader.Next(), "one");
  EXPECT_TRUE(reader.has_next());
  EXPECT_EQ(reader.Next(), "two");
  EXPECT_FALSE(reader.has_next());
  EXPECT_FALSE(reader.Next().has_value());
  EXPECT_EQ(reader.buffered_bytes(), 0u);
  EXPECT_FALSE(reader.partial());
}

// `message` compressed in `coding`, framed with the compressed flag.
std::string FrameCompressed(std::string_view message, ContentCoding coding) {
  std::string framed = FrameMessage(*EncodeContent(message, coding));
  framed[0] = 1;
  return framed;
}

TEST(MessageReaderTest, CompressedMessagesAreDecompressedWithTheCallsEncoding) {
  const std::string big(5000, 'x');  // compresses to far fewer bytes
  for (auto [encoding, coding] : {std::pair{MessageEncoding::kGzip, ContentCoding::kGzip},
                                  std::pair{MessageEncoding::kDeflate, ContentCoding::kDeflate}}) {
    const std::string body =
        FrameCompressed("hello", coding) + FrameMessage("plain") + FrameCompressed(big, coding);
    for (std::size_t piece : {std::size_t{1}, std::size_t{7}, body.size()}) {
      MessageReader reader(8192, encoding);
      std::vector<std::string> got;
      for (std::size_t at = 0; at < body.size(); at += piece) {
        reader.Append(std::string_view(body).substr(at, piece));
        EXPECT_LE(reader.buffered_bytes(), body.size());  // counted as they came, not inflated
        while (auto m = reader.Next()) got.push_back(*m);
      }
      ASSERT_TRUE(reader.error().ok()) << reader.error().ToString();
      EXPECT_EQ(reader.buffered_bytes(), 0u);
      EXPECT_EQ(got, (std::vector<std::string>{"hello", "plain", big})) << "piece " << piece;
    }
  }
}

TEST(MessageReaderTest, CompressedMessageErrorsAreTheOnesGrpcServersAnswer) {
  const std::string gzipped = FrameCompressed("abc", ContentCoding::kGzip);
  // No grpc-encoding (identity) but the flag set: INTERNAL, as the gRPC spec says.
  MessageReader identity(100);
  identity.Append(gzipped);
  EXPECT_EQ(identity.error().code(), StatusCode::kInternal);
  // An encoding this server lacks: UNIMPLEMENTED, naming what it accepts.
  MessageReader snappy(100, ParseMessageEncoding("snappy"));
  snappy.Append(FrameMessage("uncompressed is fine"));
  EXPECT_TRUE(snappy.error().ok());
  snappy.Append(gzipped);
  EXPECT_EQ(snappy.error().code(), StatusCode::kUnimplemented);
  EXPECT_NE(snappy.error().message().find("identity,deflate,gzip"), std::string::npos);
  // Bytes that are not gzip: INTERNAL.
  MessageReader garbage(100, MessageEncoding::kGzip);
  std::string framed = FrameMessage("not gzip at all");
  framed[0] = 1;
  garbage.Append(framed);
  EXPECT_EQ(garbage.error().code(), StatusCode::kInternal);
  // A flag that is neither 0 nor 1: INTERNAL.
  MessageReader flag(100);
  framed[0] = 7;
  flag.Append(framed);
  EXPECT_EQ(flag.error().code(), StatusCode::kInternal);
}

TEST(MessageReaderTest, ACompressionBombStopsAtTheLimit) {
  const std::string bomb = FrameCompressed(std::string(1 << 20, '\0'), ContentCoding::kGzip);
  ASSERT_LT(bomb.size(), 8192u);  // 1 MiB of zeros in ~4.5 KiB (zlib level 1)
  MessageReader reader(64 * 1024, MessageEncoding::kGzip);
  reader.Append(bomb);
  EXPECT_EQ(reader.error().code(), StatusCode::kPayloadTooLarge);
  EXPECT_FALSE(reader.Next().has_value());
  EXPECT_EQ(reader.buffered_bytes(), 0u);
}

TEST(MessageEncodingTest, Names) {
  EXPECT_EQ(ParseMessageEncoding(""), MessageEncoding::kIdentity);
  EXPECT_EQ(ParseMessageEncoding("identity"), MessageEncoding::kIdentity);
  EXPECT_EQ(ParseMessageEncoding("gzip"), MessageEncoding::kGzip);
  EXPECT_EQ(ParseMessageEncoding("deflate"), MessageEncoding::kDeflate);
  EXPECT_EQ(ParseMessageEncoding("snappy"), MessageEncoding::kUnsupported);
  EXPECT_EQ(ParseMessageEncoding("gzip, deflate"), MessageEncoding::kUnsupported);
}

TEST(MessageReaderTest, APartialMessageIsReported) {
  MessageReader reader(100);
  reader.Append(std::string_view(FrameMessage("abcdef")).substr(0, 7));
  EXPECT_FALSE(reader.Next().has_value());
  EXPECT_TRUE(reader.partial());
  EXPECT_EQ(reader.buffered_bytes(), 7u);
}

TEST(GrpcTimeoutTest, EveryUnitAndTheBadOnes) {
  struct Case {
    const char* value;
    std::chrono::nanoseconds want;
  };
  for (const Case& c :
       {Case{"1H", 1h}, Case{"2M", 2min}, Case{"3S", 3s}, Case{"4m", 4ms}, Case{"5u", 5us},
        Case{"6n", 6ns}, Case{"99999999S", 24h * 365}, Case{"0m", 0ns}}) {
    auto got = ParseGrpcTimeout(c.value);
    ASSERT_TRUE(got.ok()) << c.value;
    EXPECT_EQ(*got, c.want) << c.value;
  }
  for (const char* bad : {"", "S", "1", "1x", "-1S", "123456789S", "1.5S", " 1S"}) {
    EXPECT_EQ(ParseGrpcTimeout(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(StatusMessageTest, PercentEncodesAndTruncatesOnACharacterBoundary) {
  EXPECT_EQ(EncodeStatusMessage("plain text"), "plain text");
  EXPECT_EQ(EncodeStatusMessage("50% \n\xC3\xA9"), "50%25 %0A%C3%A9");
  EXPECT_EQ(DecodeStatusMessage("50%25 %0A%C3%A9"), "50% \n\xC3\xA9");
  EXPECT_EQ(DecodeStatusMessage("bad %G1 %4"), "bad %G1 %4");

  // 1023 ASCII bytes then a two-byte character straddling the limit: the character goes whole.
  const std::string long_message = std::string(1023, 'a') + "\xC3\xA9" + std::string(40000, 'b');
  const std::string encoded = EncodeStatusMessage(long_message);
  EXPECT_EQ(encoded, std::string(1023, 'a') + "...(truncated)");
}

TEST(StatusFieldsTest, CodeMessageAndRetryAfter) {
  auto ok = StatusFields(Status::Ok());
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0], (std::pair<std::string, std::string>{"grpc-status", "0"}));

  auto refused =
      StatusFields(Status(StatusCode::kResourceExhausted, "queue full; retry after 3 s"));
  ASSERT_EQ(refused.size(), 3u);
  EXPECT_EQ(refused[0].second, "8");
  EXPECT_EQ(refused[1].first, "grpc-message");
  EXPECT_EQ(refused[2], (std::pair<std::string, std::string>{"retry-after", "3"}));

  auto missing = StatusFields(Status(StatusCode::kNotFound, "no model 'x'"));
  ASSERT_EQ(missing.size(), 2u);
  EXPECT_EQ(missing[0].second, "5");
}

TEST(StatusFieldsTest, TransportRefusalsMapAsGrpcSaysThem) {
  EXPECT_EQ(GrpcCodeForHttpStatus(400), GrpcCode::kInternal);
  EXPECT_EQ(GrpcCodeForHttpStatus(404), GrpcCode::kUnimplemented);
  EXPECT_EQ(GrpcCodeForHttpStatus(408), GrpcCode::kDeadlineExceeded);
  EXPECT_EQ(GrpcCodeForHttpStatus(413), GrpcCode::kResourceExhausted);
  EXPECT_EQ(GrpcCodeForHttpStatus(431), GrpcCode::kResourceExhausted);
  EXPECT_EQ(GrpcCodeForHttpStatus(503), GrpcCode::kUnavailable);
  EXPECT_EQ(GrpcCodeForHttpStatus(418), GrpcCode::kUnknown);
}

}  // namespace
}  // namespace harrier::grpc_frontend
