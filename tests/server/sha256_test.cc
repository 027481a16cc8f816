#include "server/sha256.h"

#include <gtest/gtest.h>

namespace harrier {
namespace {

TEST(Sha256Test, KnownDigests) {
  // FIPS 180-2's examples.
  EXPECT_EQ(Sha256Hex(Sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(Sha256("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256Test, HexRoundTripsInEitherCase) {
  const Sha256Digest d = Sha256("key");
  EXPECT_EQ(ParseSha256Hex(Sha256Hex(d)), d);
  std::string upper = Sha256Hex(d);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(ParseSha256Hex(upper), d);
}

TEST(Sha256Test, HexOfTheWrongLengthOrDigitsIsRefused) {
  const std::string good = Sha256Hex(Sha256("key"));
  EXPECT_FALSE(ParseSha256Hex(good.substr(1)));
  EXPECT_FALSE(ParseSha256Hex(good + "0"));
  EXPECT_FALSE(ParseSha256Hex(""));
  std::string bad = good;
  bad[10] = 'g';
  EXPECT_FALSE(ParseSha256Hex(bad));
  bad = good;
  bad[63] = ' ';
  EXPECT_FALSE(ParseSha256Hex(bad));
}

TEST(Sha256Test, DigestsEqualComparesEveryByte) {
  const Sha256Digest a = Sha256("key");
  Sha256Digest first = a, last = a;
  first[0] ^= 1;
  last[31] ^= 0x80;
  EXPECT_TRUE(DigestsEqual(a, a));
  EXPECT_FALSE(DigestsEqual(a, first));
  EXPECT_FALSE(DigestsEqual(a, last));
}

}  // namespace
}  // namespace harrier
