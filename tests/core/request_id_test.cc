#include "core/request_id.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace harrier {
namespace {

TEST(RequestIdTest, AcceptsVisibleAsciiUpToTheLimit) {
  EXPECT_TRUE(IsAcceptableRequestId("a"));
  EXPECT_TRUE(IsAcceptableRequestId("0af7651916cd43dd8448eb211c80319c"));
  EXPECT_TRUE(IsAcceptableRequestId("req:42/{x}~!"));
  EXPECT_TRUE(IsAcceptableRequestId(std::string(kMaxRequestIdBytes, 'x')));
}

TEST(RequestIdTest, RejectsEmptyLongSpacesControlAndNonAscii) {
  EXPECT_FALSE(IsAcceptableRequestId(""));
  EXPECT_FALSE(IsAcceptableRequestId(std::string(kMaxRequestIdBytes + 1, 'x')));
  EXPECT_FALSE(IsAcceptableRequestId("a b"));
  EXPECT_FALSE(IsAcceptableRequestId("a\tb"));
  EXPECT_FALSE(IsAcceptableRequestId("a\nb"));
  EXPECT_FALSE(IsAcceptableRequestId(std::string("a\0b", 3)));
  EXPECT_FALSE(IsAcceptableRequestId("caf\xc3\xa9"));
  EXPECT_FALSE(IsAcceptableRequestId("\x7f"));
}

TEST(RequestIdTest, GeneratedIdsArePrefixDashCounterAndDistinct) {
  RequestIdGenerator generator(0xABCDEF12);  // only the low 24 bits count
  EXPECT_EQ(generator.Next(), "cdef12-00000000");
  EXPECT_EQ(generator.Next(), "cdef12-00000001");
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = generator.Next();
    EXPECT_EQ(id.size(), 15u);
    EXPECT_TRUE(IsAcceptableRequestId(id));
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(RequestIdTest, ResolveKeepsAGoodIdAndReplacesABadOne) {
  RequestIdGenerator generator(1);
  EXPECT_EQ(ResolveRequestId("client-7", generator), "client-7");
  EXPECT_EQ(ResolveRequestId("", generator), "000001-00000000");
  EXPECT_EQ(ResolveRequestId("has space", generator), "000001-00000001");
  EXPECT_EQ(ResolveRequestId(std::string(200, 'x'), generator), "000001-00000002");
}

}  // namespace
}  // namespace harrier
