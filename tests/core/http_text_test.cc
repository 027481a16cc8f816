#include "core/http_text.h"

#include <gtest/gtest.h>

namespace harrier {
namespace {

TEST(HttpTextTest, TrimOwsDropsSpacesAndTabsAtBothEndsOnly) {
  EXPECT_EQ(TrimOws(" \tgzip \t"), "gzip");
  EXPECT_EQ(TrimOws("a b"), "a b");
  EXPECT_EQ(TrimOws(" \t "), "");
  EXPECT_EQ(TrimOws(""), "");
  EXPECT_EQ(TrimOws("\nx"), "\nx");  // only OWS: a line break is not whitespace here
}

TEST(HttpTextTest, IEqualsIgnoresAsciiCaseOnly) {
  EXPECT_TRUE(IEquals("Content-Length", "content-length"));
  EXPECT_TRUE(IEquals("", ""));
  EXPECT_FALSE(IEquals("gzip", "gzi"));
  EXPECT_FALSE(IEquals("gzip", "gzjp"));
  EXPECT_FALSE(IEquals("\xc3\x89", "\xc3\xa9"));  // no folding beyond ASCII
  EXPECT_FALSE(IEquals("[", "{"));                // 0x5b vs 0x7b: not letters
}

}  // namespace
}  // namespace harrier
