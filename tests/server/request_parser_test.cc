#include "server/request_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace harrier::server_internal {
namespace {

TEST(SpareHeaderFieldsTest, TakesBackFieldsAndLendsTheirRoom) {
  SpareHeaderFields spare;
  EXPECT_EQ(spare.Take(), HeaderField());  // none kept: a new one

  std::vector<HeaderField> fields = {{"inference-header-content-length", "123"},
                                     {"content-type", "application/octet-stream"}};
  const char* kept_name = fields[0].first.data();  // past the inline 15 bytes: on the heap
  spare.Reclaim(&fields);
  EXPECT_TRUE(fields.empty());
  EXPECT_EQ(spare.size(), 2u);

  HeaderField second = spare.Take();  // the last reclaimed first
  EXPECT_EQ(second.first, "content-type");
  HeaderField first = spare.Take();
  EXPECT_EQ(first.first.data(), kept_name);  // the same room, not a copy
  EXPECT_EQ(spare.size(), 0u);
}

TEST(SpareHeaderFieldsTest, KeepsAtMostItsBoundsWorthOfFields) {
  SpareHeaderFields spare;
  std::vector<HeaderField> fields(SpareHeaderFields::kMaxFields + 5, {"x-name", "value"});
  fields.push_back({"x-big", std::string(SpareHeaderFields::kMaxBytes + 1, 'v')});
  spare.Reclaim(&fields);
  EXPECT_EQ(spare.size(), SpareHeaderFields::kMaxFields);

  SpareHeaderFields other;
  std::vector<HeaderField> big = {{"x-big", std::string(SpareHeaderFields::kMaxBytes + 1, 'v')},
                                  {"x-small", "v"}};
  other.Reclaim(&big);
  EXPECT_EQ(other.size(), 1u);  // a string with more room than kMaxBytes is freed
  EXPECT_EQ(other.Take().first, "x-small");
}

}  // namespace
}  // namespace harrier::server_internal
