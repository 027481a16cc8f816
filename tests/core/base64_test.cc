#include "core/base64.h"

#include <gtest/gtest.h>

namespace harrier {
namespace {

TEST(Base64Test, DecodesTheStandardAlphabetWithPadding) {
  EXPECT_EQ(DecodeBase64(""), "");
  EXPECT_EQ(DecodeBase64("Zg=="), "f");
  EXPECT_EQ(DecodeBase64("Zm8="), "fo");
  EXPECT_EQ(DecodeBase64("Zm9v"), "foo");
  EXPECT_EQ(DecodeBase64("Zm9vYmFy"), "foobar");
  EXPECT_EQ(DecodeBase64("AP8+/w=="), std::string("\x00\xff\x3e\xff", 4));
}

TEST(Base64Test, RefusesWhatNoEncoderWrites) {
  for (const char* bad : {"Zg", "Zg=", "Zm9", "Z===", "=Zg=", "Zg=a", "Zm 9v", "Zm9v\n", "Zm-v",
                          "Zm_v", "Zh==", "Zm9=", "!!!!"}) {
    EXPECT_EQ(DecodeBase64(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace harrier
