#include "backends/llamacpp/stop_matcher.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace harrier {
namespace {

struct StopCase {
  const char* name;
  std::vector<std::string> stops;
  std::vector<std::string> pieces;    // one token's bytes each
  std::vector<std::string> released;  // what each Append releases
  bool stopped;
  std::string flushed;  // what Flush releases at the end
};

class StopMatcherTable : public ::testing::TestWithParam<StopCase> {};

TEST_P(StopMatcherTable, ReleasesWhatCanNoLongerBecomeAStopString) {
  const StopCase& c = GetParam();
  StopMatcher matcher(c.stops);
  ASSERT_EQ(c.pieces.size(), c.released.size());
  for (size_t i = 0; i < c.pieces.size(); ++i) {
    EXPECT_EQ(matcher.Append(c.pieces[i]), c.released[i]) << "piece " << i;
  }
  EXPECT_EQ(matcher.stopped(), c.stopped);
  EXPECT_EQ(matcher.Flush(), c.flushed);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, StopMatcherTable,
    ::testing::Values(
        StopCase{"no_stop_strings", {}, {"Hello", " world"}, {"Hello", " world"}, false, ""},
        StopCase{"inside_one_piece", {"STOP"}, {"abSTOPcd"}, {"ab"}, true, ""},
        StopCase{"across_pieces", {"</s>"}, {"one <", "/", "s> two"}, {"one ", "", ""}, true, ""},
        StopCase{"held_then_released", {"ab"}, {"xa", "c"}, {"x", "ac"}, false, ""},
        StopCase{"held_until_flush", {"END"}, {"the E", "N"}, {"the ", ""}, false, "EN"},
        // "aab" ends with "a" and with "aab"'s prefix... the longest proper prefix is kept.
        StopCase{"overlapping_prefix", {"aac"}, {"aa", "aa", "c"}, {"", "aa", ""}, true, ""},
        StopCase{"earliest_of_two", {"yz", "x"}, {"ab", "xyz"}, {"ab", ""}, true, ""},
        StopCase{"nothing_after_stop", {"."}, {"a.b", "c"}, {"a", ""}, true, ""},
        StopCase{"stop_is_the_first_text", {"Q:"}, {"Q", ":"}, {"", ""}, true, ""},
        // UTF-8: "é" is C3 A9, "€" is E2 82 AC; a character split over tokens is held.
        StopCase{"split_character", {}, {"caf\xC3", "\xA9!"}, {"caf", "\xC3\xA9!"}, false, ""},
        StopCase{
            "three_way_split", {}, {"\xE2", "\x82", "\xAC"}, {"", "", "\xE2\x82\xAC"}, false, ""},
        StopCase{"incomplete_at_end", {}, {"ok\xE2\x82"}, {"ok"}, false, "\xEF\xBF\xBD"},
        StopCase{"invalid_byte_replaced",
                 {},
                 {"a\xFF"
                  "b"},
                 {"a\xEF\xBF\xBD"
                  "b"},
                 false,
                 ""},
        StopCase{"stray_continuation",
                 {},
                 {"\x80"
                  "x"},
                 {"\xEF\xBF\xBD"
                  "x"},
                 false,
                 ""},
        StopCase{"split_character_then_stop",
                 {"STOP"},
                 {"caf\xC3", "\xA9STOP!"},
                 {"caf", "\xC3\xA9"},
                 true,
                 ""},
        // The stop string cuts a character short: what was held of it can never complete.
        StopCase{"stop_after_a_lead_byte",
                 {"STOP"},
                 {"ab\xC3", "STOP"},
                 {"ab", "\xEF\xBF\xBD"},
                 true,
                 ""},
        // A stop string is matched against the text as sent: bytes that form no character are
        // U+FFFD by then, which a stop string may hold (probe 45 F2).
        StopCase{"stop_is_a_replaced_byte", {"\xEF\xBF\xBD"}, {"a\xFF", "b"}, {"a", ""}, true, ""},
        StopCase{"stop_is_a_lead_byte_left_alone",
                 {"\xEF\xBF\xBD"},
                 {"x\xC3", "y"},
                 {"x", ""},
                 true,
                 ""},
        StopCase{"stop_completed_by_the_flush", {"\xEF\xBF\xBD"}, {"ok\xE2"}, {"ok"}, false, ""},
        StopCase{"stop_with_replacement_across_pieces",
                 {"!\xEF\xBF\xBD"},
                 {"hi!", "\x80", "more"},
                 {"hi", "", ""},
                 true,
                 ""},
        StopCase{
            "multibyte_stop", {"\xE2\x82\xAC"}, {"5 \xE2\x82", "\xAC and"}, {"5 ", ""}, true, ""}),
    [](const ::testing::TestParamInfo<StopCase>& info) { return std::string(info.param.name); });

TEST(StopMatcher, AppendAfterStopReleasesNothing) {
  StopMatcher matcher({"#"});
  EXPECT_EQ(matcher.Append("a#b"), "a");
  EXPECT_EQ(matcher.Append("more"), "");
  EXPECT_EQ(matcher.Flush(), "");
}

// The engine reads stopped() after a flush at the length limit: a stop string the flush
// completed ends the text there, and the generation reports a stop.
TEST(StopMatcher, AFlushThatCompletesAStopStringStops) {
  StopMatcher matcher({"\xEF\xBF\xBD"});
  EXPECT_EQ(matcher.Append("ok\xE2\x82"), "ok");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.Flush(), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.Flush(), "");
}

}  // namespace
}  // namespace harrier
