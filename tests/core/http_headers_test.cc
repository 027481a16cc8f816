#include "harrier/http_headers.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace harrier {
namespace {

std::vector<std::pair<std::string, std::string>> Fields(const HttpHeaders& h) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, value] : h) out.emplace_back(name, value);
  return out;
}

using Pairs = std::vector<std::pair<std::string, std::string>>;

TEST(HttpHeadersTest, KeepsFieldsInOrderAndCopiesTheirText) {
  HttpHeaders h;
  EXPECT_TRUE(h.empty());
  {
    std::string value = "application/octet-stream";
    h.emplace_back("Content-Type", value);
    value.assign(value.size(), 'x');  // the field holds its own copy
  }
  h.emplace_back("Inference-Header-Content-Length", "123");
  h.push_back(std::pair<std::string, std::string>("X-Request-Id", "abc"));
  h.emplace_back("Empty", "");
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0].name, "Content-Type");
  EXPECT_EQ(h[0].value, "application/octet-stream");
  EXPECT_EQ(Fields(h), (Pairs{{"Content-Type", "application/octet-stream"},
                              {"Inference-Header-Content-Length", "123"},
                              {"X-Request-Id", "abc"},
                              {"Empty", ""}}));
}

// Past the inline fields and text the rest moves to the heap; every field stays readable.
TEST(HttpHeadersTest, GrowsPastItsInlineStorage) {
  HttpHeaders h;
  Pairs expected;
  for (int i = 0; i < 40; ++i) {
    std::string name = "X-Field-" + std::to_string(i);
    std::string value(static_cast<std::size_t>(i) * 7, static_cast<char>('a' + i % 26));
    h.emplace_back(name, value);
    expected.emplace_back(name, value);
  }
  EXPECT_EQ(h.size(), 40u);
  EXPECT_EQ(Fields(h), expected);
}

TEST(HttpHeadersTest, CopiesAndMovesInlineAndSpilled) {
  for (const int n : {3, 30}) {  // inline; spilled
    HttpHeaders h{{"A", "1"}, {"B", "two"}};
    for (int i = 0; i < n; ++i) h.emplace_back("N" + std::to_string(i), std::string(20, 'v'));
    const Pairs expected = Fields(h);

    HttpHeaders copy = h;
    EXPECT_EQ(copy, h);
    EXPECT_EQ(Fields(copy), expected);

    HttpHeaders moved = std::move(copy);
    EXPECT_EQ(Fields(moved), expected);
    EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from object is empty
    copy.emplace_back("Again", "yes");
    EXPECT_EQ(Fields(copy), (Pairs{{"Again", "yes"}}));

    HttpHeaders assigned;
    assigned.emplace_back("Old", "value");
    assigned = std::move(moved);
    EXPECT_EQ(Fields(assigned), expected);
    assigned = h;
    EXPECT_EQ(assigned, h);

    assigned.clear();
    EXPECT_TRUE(assigned.empty());
    assigned.emplace_back("C", "3");
    EXPECT_EQ(Fields(assigned), (Pairs{{"C", "3"}}));
  }
}

TEST(HttpHeadersTest, EqualityIsFieldByField) {
  const HttpHeaders a{{"A", "1"}, {"B", "2"}};
  EXPECT_EQ(a, (HttpHeaders{{"A", "1"}, {"B", "2"}}));
  EXPECT_NE(a, (HttpHeaders{{"B", "2"}, {"A", "1"}}));
  EXPECT_NE(a, (HttpHeaders{{"A", "1"}}));
  EXPECT_NE(a, (HttpHeaders{{"A", "1"}, {"B", "3"}}));
}

}  // namespace
}  // namespace harrier
