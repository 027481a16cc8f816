#include "core/utf8_holdback.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/utf8.h"

namespace harrier {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8HoldbackTest, HoldsBackSplitCharacters) {
  struct Case {
    std::vector<std::string> pieces;
    std::vector<std::string> out;  // Push's answer for each piece
    std::string flushed;
  } cases[] = {
      {{"plain", " text"}, {"plain", " text"}, ""},
      // "é" (C3 A9) over two tokens.
      {{"caf\xC3", "\xA9!"}, {"caf", "\xC3\xA9!"}, ""},
      // An emoji (F0 9F 98 80) one byte per token.
      {{"\xF0", "\x9F", "\x98", "\x80"}, {"", "", "", "\xF0\x9F\x98\x80"}, ""},
      // "€" (E2 82 AC) split after one byte, then after two.
      {{"a\xE2", "\x82\xAC\xE2\x82", "\xAC"}, {"a", "\xE2\x82\xAC", "\xE2\x82\xAC"}, ""},
      // The sequence never completes: the end replaces it.
      {{"x\xE2\x82"}, {"x"}, kFffd},
      // A held lead byte followed by something that is not its continuation.
      {{"\xE2", "b"}, {"", kFffd + "b"}, ""},
      {{"\xC3", "\xC3\xA9"}, {"", kFffd + "\xC3\xA9"}, ""},
      // Bytes that are never valid are replaced at once, one U+FFFD per maximal subpart.
      {{"a\xFF"
        "b"},
       {"a" + kFffd + "b"},
       ""},
      {{"\x80\x80"}, {kFffd + kFffd}, ""},
      {{"\xC0\xAF"}, {kFffd + kFffd}, ""},                          // overlong
      {{"\xED\xA0\x80"}, {kFffd + kFffd + kFffd}, ""},              // surrogate
      {{"\xF4\x90\x80\x80"}, {kFffd + kFffd + kFffd + kFffd}, ""},  // past U+10FFFF
      {{"\xE2\x82"
        "z"},
       {kFffd + "z"},
       ""},  // truncated inside the text
      {{"\xF0\x9F\x98"
        "\xF0\x9F"},
       {kFffd},
       kFffd},  // then held, then flushed
      {{"", "\xE2", ""}, {"", "", ""}, kFffd},
  };
  for (const Case& c : cases) {
    Utf8Holdback holdback;
    for (size_t i = 0; i < c.pieces.size(); ++i) {
      const std::string out = holdback.Push(c.pieces[i]);
      EXPECT_EQ(out, c.out[i]) << "piece " << i << " of case starting '" << c.pieces[0] << "'";
      EXPECT_TRUE(IsValidUtf8(out));
      EXPECT_LE(holdback.held_bytes(), 3u);
    }
    EXPECT_EQ(holdback.Flush(), c.flushed);
    EXPECT_EQ(holdback.held_bytes(), 0u);
    EXPECT_EQ(holdback.Flush(), "");
  }
}

TEST(Utf8HoldbackTest, EveryByteSplitOfValidTextComesBackWhole) {
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    Utf8Holdback holdback;
    std::string out = holdback.Push(text.substr(0, cut));
    EXPECT_TRUE(IsValidUtf8(out)) << cut;
    out += holdback.Push(text.substr(cut));
    out += holdback.Flush();
    EXPECT_EQ(out, text) << cut;
  }
}

TEST(Utf8HoldbackTest, ReplaceInvalidUtf8) {
  EXPECT_EQ(ReplaceInvalidUtf8(""), "");
  EXPECT_EQ(ReplaceInvalidUtf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(ReplaceInvalidUtf8("end\xC3"), "end" + kFffd);
  EXPECT_EQ(ReplaceInvalidUtf8("\xFE\xFF"), kFffd + kFffd);
  EXPECT_EQ(ReplaceInvalidUtf8("\xE0\x80\x80"), kFffd + kFffd + kFffd);   // overlong 3-byte
  EXPECT_EQ(ReplaceInvalidUtf8("\xE0\xA0\x80"), "\xE0\xA0\x80");          // U+0800, valid
  EXPECT_EQ(ReplaceInvalidUtf8("\xF4\x8F\xBF\xBF"), "\xF4\x8F\xBF\xBF");  // U+10FFFF, valid
  // Every single byte, alone: valid ASCII or one replacement.
  for (int b = 0; b < 256; ++b) {
    const std::string in(1, static_cast<char>(b));
    const std::string out = ReplaceInvalidUtf8(in);
    EXPECT_EQ(out, b < 0x80 ? in : kFffd) << b;
  }
}

}  // namespace
}  // namespace harrier
