#include "protocol/openai/random_id.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace harrier::openai {
namespace {

using ::testing::MatchesRegex;

class FixedRandom : public RandomSource {
 public:
  explicit FixedRandom(std::byte value) : value_(value) {}
  void Fill(std::span<std::byte> out) override {
    for (std::byte& b : out) b = value_;
  }

 private:
  std::byte value_;
};

TEST(RandomIdTest, ThirtyTwoHexDigitsOfSixteenBytes) {
  FixedRandom ab(std::byte{0xAB});
  EXPECT_EQ(RandomHexId128(ab), "abababababababababababababababab");
  FixedRandom zero(std::byte{0x00});
  EXPECT_EQ(RandomHexId128(zero), std::string(32, '0'));
}

TEST(RandomIdTest, SystemIdsAreWellFormedAndDistinct) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = RandomHexId128(SystemRandom());
    ASSERT_THAT(id, MatchesRegex("[0-9a-f]{32}"));
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 1000u);
}

}  // namespace
}  // namespace harrier::openai
