#include "core/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace harrier {
namespace {

TEST(Utf8PrefixTest, ACharacterThatStraddlesTheCutGoesWhole) {
  EXPECT_EQ(Utf8Prefix("abc", 5), "abc");
  EXPECT_EQ(Utf8Prefix("abcdef", 3), "abc");
  const std::string e = "ab\xc3\xa9z";  // é: two bytes at 2..3
  EXPECT_EQ(Utf8Prefix(e, 3), "ab");
  EXPECT_EQ(Utf8Prefix(e, 4), "ab\xc3\xa9");
  const std::string euro = "a\xe2\x82\xac";  // €: three bytes at 1..3
  EXPECT_EQ(Utf8Prefix(euro + "z", 2), "a");
  EXPECT_EQ(Utf8Prefix(euro + "z", 3), "a");
  EXPECT_EQ(Utf8Prefix(euro + "z", 4), euro);
  const std::string emoji = "a\xf0\x9f\x98\x80";  // 😀: four bytes at 1..4
  EXPECT_EQ(Utf8Prefix(emoji + "z", 4), "a");
  EXPECT_EQ(Utf8Prefix(emoji + "z", 5), emoji);
}

// Bytes that belong to no character are not UTF-8: the cut is the bound, not a step back over
// all of them (probe 79: 5,000 of them were cut to nothing; probe 80: after an ASCII byte, two
// bytes short).
TEST(Utf8PrefixTest, StrayContinuationBytesAreCutAtTheBound) {
  const std::string run(5000, '\x80');
  EXPECT_EQ(Utf8Prefix(run, 4096).size(), 4096u);
  const std::string after_ascii = std::string("abc") + "\x80\x80\x80";
  EXPECT_EQ(Utf8Prefix(after_ascii, 5), after_ascii.substr(0, 5));
  const std::string after_character = std::string("a\xc3\xa9") + "\x80\x80";
  EXPECT_EQ(Utf8Prefix(after_character, 4), after_character.substr(0, 4));
}

}  // namespace
}  // namespace harrier
