#include "protocol/common/content_coding.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

namespace harrier {
namespace {

// zlib's own compressor, independent of EncodeContent: `window_bits` 15 zlib, 31 gzip, -15 raw.
std::string Compress(std::string_view data, int window_bits, int level = 6) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, static_cast<uLong>(data.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string Sample() {
  std::string s;
  for (int i = 0; i < 5000; ++i) s += "{\"data\":[" + std::to_string(i * 7919 % 1000) + "]},";
  return s;
}

TEST(ContentCodingTest, ParsesTheCodingsItDecodes) {
  EXPECT_EQ(ParseContentEncoding(""), ContentCoding::kIdentity);
  EXPECT_EQ(ParseContentEncoding("identity"), ContentCoding::kIdentity);
  EXPECT_EQ(ParseContentEncoding(" GZip "), ContentCoding::kGzip);
  EXPECT_EQ(ParseContentEncoding("x-gzip"), ContentCoding::kGzip);
  EXPECT_EQ(ParseContentEncoding("Deflate"), ContentCoding::kDeflate);
  EXPECT_EQ(ParseContentEncoding("br"), std::nullopt);
  EXPECT_EQ(ParseContentEncoding("gzip, gzip"), std::nullopt);  // stacked codings: not decoded
}

TEST(ContentCodingTest, NegotiatesFromAcceptEncoding) {
  EXPECT_EQ(NegotiateContentCoding(""), ContentCoding::kIdentity);
  EXPECT_EQ(NegotiateContentCoding("gzip"), ContentCoding::kGzip);
  EXPECT_EQ(NegotiateContentCoding("deflate"), ContentCoding::kDeflate);
  EXPECT_EQ(NegotiateContentCoding("gzip, deflate, br"), ContentCoding::kGzip);
  EXPECT_EQ(NegotiateContentCoding("deflate;q=1.0, gzip;q=0.5"), ContentCoding::kDeflate);
  EXPECT_EQ(NegotiateContentCoding("gzip;q=0, deflate"), ContentCoding::kDeflate);
  EXPECT_EQ(NegotiateContentCoding("gzip;q=0"), ContentCoding::kIdentity);
  EXPECT_EQ(NegotiateContentCoding("*"), ContentCoding::kGzip);
  EXPECT_EQ(NegotiateContentCoding("*, gzip;q=0"), ContentCoding::kDeflate);
  EXPECT_EQ(NegotiateContentCoding("*;q=0"), ContentCoding::kIdentity);
  EXPECT_EQ(NegotiateContentCoding("br, identity"), ContentCoding::kIdentity);
  EXPECT_EQ(NegotiateContentCoding("gzip;q=banana"), ContentCoding::kIdentity);
}

TEST(ContentCodingTest, DecodesWhatZlibEncodes) {
  const std::string data = Sample();
  for (auto [coding, bits] :
       {std::pair{ContentCoding::kGzip, 31}, std::pair{ContentCoding::kDeflate, 15},
        std::pair{ContentCoding::kDeflate, -15}}) {
    auto decoded = DecodeContent(Compress(data, bits), coding, data.size(), 64);
    ASSERT_TRUE(decoded.ok()) << bits << ": " << decoded.status().ToString();
    EXPECT_EQ(*decoded, data) << bits;
    EXPECT_GE(decoded->capacity(), decoded->size() + 64);  // room for the JSON parser's padding
  }
  // gzip members one after the other are one body (RFC 1952).
  auto two = DecodeContent(Compress("abc", 31) + Compress("def", 31), ContentCoding::kGzip, 100, 0);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(*two, "abcdef");
}

TEST(ContentCodingTest, EncodesWhatZlibDecodes) {
  const std::string data = Sample();
  for (ContentCoding coding : {ContentCoding::kGzip, ContentCoding::kDeflate}) {
    std::optional<std::string> encoded = EncodeContent(data, coding);
    ASSERT_TRUE(encoded.has_value());
    EXPECT_LT(encoded->size(), data.size() / 3);
    std::string back(data.size(), '\0');
    z_stream z{};
    ASSERT_EQ(inflateInit2(&z, coding == ContentCoding::kGzip ? 31 : 15), Z_OK);
    z.next_in = reinterpret_cast<Bytef*>(encoded->data());
    z.avail_in = static_cast<uInt>(encoded->size());
    z.next_out = reinterpret_cast<Bytef*>(back.data());
    z.avail_out = static_cast<uInt>(back.size());
    EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
    EXPECT_EQ(z.total_out, data.size());
    inflateEnd(&z);
    EXPECT_EQ(back, data);
  }
  EXPECT_EQ(ContentCodingName(ContentCoding::kGzip), "gzip");
  EXPECT_EQ(ContentCodingName(ContentCoding::kDeflate), "deflate");
}

// A bomb: 64 MiB of zeros in ~64 KiB. Decoding stops at the limit.
TEST(ContentCodingTest, ABombStopsAtTheLimit) {
  const std::string zeros(64u << 20, '\0');
  const std::string bomb = Compress(zeros, 31, 9);
  ASSERT_LT(bomb.size(), 100u << 10);
  auto decoded = DecodeContent(bomb, ContentCoding::kGzip, 1u << 20, 64);
  EXPECT_EQ(decoded.status().code(), StatusCode::kPayloadTooLarge);
  EXPECT_NE(decoded.status().message().find("more than 1048576 bytes"), std::string::npos)
      << decoded.status().ToString();
  // Exactly at the limit is fine.
  auto at_limit =
      DecodeContent(Compress(std::string(1000, 'x'), 31), ContentCoding::kGzip, 1000, 0);
  ASSERT_TRUE(at_limit.ok()) << at_limit.status().ToString();
  EXPECT_EQ(at_limit->size(), 1000u);
  EXPECT_EQ(DecodeContent(Compress(std::string(1001, 'x'), 31), ContentCoding::kGzip, 1000, 0)
                .status()
                .code(),
            StatusCode::kPayloadTooLarge);
}

TEST(ContentCodingTest, RejectsWhatIsNotAWholeStream) {
  const std::string gz = Compress(Sample(), 31);
  const std::string zl = Compress(Sample(), 15);
  struct Case {
    const char* what;
    std::string data;
    ContentCoding coding;
  };
  for (const Case& c :
       {Case{"truncated gzip", gz.substr(0, gz.size() / 2), ContentCoding::kGzip},
        Case{"gzip without its trailer", gz.substr(0, gz.size() - 4), ContentCoding::kGzip},
        Case{"garbage after gzip", gz + "junk", ContentCoding::kGzip},
        Case{"not gzip at all", "hello, world", ContentCoding::kGzip},
        Case{"truncated deflate", zl.substr(0, zl.size() - 1), ContentCoding::kDeflate},
        Case{"garbage after deflate", zl + "x", ContentCoding::kDeflate},
        Case{"bad checksum",
             [&] {
               std::string bad = zl;
               bad.back() ^= 0x55;
               return bad;
             }(),
             ContentCoding::kDeflate}}) {
    auto decoded = DecodeContent(c.data, c.coding, 1u << 20, 0);
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument) << c.what;
  }
}

}  // namespace
}  // namespace harrier
