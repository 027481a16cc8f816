#include "backends/llamacpp/control_text.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace harrier {
namespace {

// Llama-2's control texts and two of ChatML's, one a prefix of another text.
const ControlTexts kControls({"<s>", "</s>", "<unk>", "<|im_start|>", "<|im_end|>", "<|im"});

TEST(ControlTextsTest, FindsTheFirstAndAtAPositionTheLongest) {
  EXPECT_EQ(kControls.Find("a <s> b </s>"), (TextRange{2, 5}));
  EXPECT_EQ(kControls.Find("a <s> b </s>", 3), (TextRange{8, 12}));
  EXPECT_EQ(kControls.Find("x<|im_end|>"), (TextRange{1, 11}));
  EXPECT_EQ(kControls.Find("x<|imx"), (TextRange{1, 5}));
  EXPECT_EQ(kControls.Find("<s"), std::nullopt);
  EXPECT_EQ(kControls.Find(""), std::nullopt);
  EXPECT_EQ(ControlTexts(std::vector<std::string>{}).Find("<s>"), std::nullopt);
  EXPECT_TRUE(ControlTexts(std::vector<std::string>{"", ""}).empty());
  // Bytes over 0x7f sort after ASCII ones, as the search expects.
  const ControlTexts utf8(std::vector<std::string>{"\xc3\xa9t\xc3\xa9", "<a>", "\xc3\xa9"});
  EXPECT_EQ(utf8.Find("x\xc3\xa9t\xc3\xa9"), (TextRange{1, 6}));
  EXPECT_EQ(utf8.Find("x\xc3\xa9t<a>"), (TextRange{1, 3}));
  EXPECT_EQ(utf8.Find("x\xc3t<a>"), (TextRange{3, 6}));
}

struct PlanCase {
  const char* name;
  std::string text;
  std::vector<TextRange> literal;
  std::vector<TokenizePiece> plan;
};

class PlanTable : public ::testing::TestWithParam<PlanCase> {};

TEST_P(PlanTable, ReadsControlTextInLiteralRangesAsTextAndChangesNothingElse) {
  const PlanCase& c = GetParam();
  EXPECT_EQ(PlanTokenization(c.text, c.literal, kControls), c.plan);
}

// ChatML as llama.cpp writes it: "<|im_start|>user\n" CONTENT "<|im_end|>\n".
INSTANTIATE_TEST_SUITE_P(
    Cases, PlanTable,
    ::testing::Values(
        PlanCase{"no_literal_ranges", "<s>a</s>", {}, {{{0, 8}, true}}},
        PlanCase{"no_control_text_in_a_content",
                 "<|im_start|>user\nhello<|im_end|>\n",
                 {{17, 22}},
                 {{{0, 33}, true}}},
        // The content "a</s>b" (17..23): the stretch between the two control tokens around it,
        // "user\na</s>b", is read as text; the rest as before.
        PlanCase{"a_control_text_in_a_content",
                 "<|im_start|>user\na</s>b<|im_end|>\n<|im_start|>assistant\n",
                 {{17, 23}},
                 {{{0, 12}, true}, {{12, 23}, false}, {{23, 56}, true}}},
        // Two in one content: one stretch.
        PlanCase{"two_in_one_content",
                 "<|im_start|>user\n<s></s><|im_end|>\n",
                 {{17, 24}},
                 {{{0, 12}, true}, {{12, 24}, false}, {{24, 35}, true}}},
        // The first of two contents is clean; the second holds one.
        PlanCase{"only_the_stretch_that_holds_one",
                 "<|im_start|>system\nok<|im_end|>\n<|im_start|>user\n<unk><|im_end|>\n",
                 {{19, 21}, {49, 54}},
                 {{{0, 44}, true}, {{44, 54}, false}, {{54, 65}, true}}},
        // A content at the very start and end, with no control token around it.
        PlanCase{"the_whole_text", "x</s>y", {{0, 6}}, {{{0, 6}, false}}},
        // A control text that only starts in the content (the template's "s>" ends it) is
        // still read as text.
        PlanCase{"straddling_a_range_end", "[INST] </s> [/INST]", {{7, 9}}, {{{0, 19}, false}}},
        // Ranges past the end are clipped; empty ones ignored.
        PlanCase{"range_past_the_end", "a<s>", {{3, 99}, {1, 1}}, {{{0, 4}, false}}},
        PlanCase{"overlapping_ranges",
                 "<s>ab</s>cd<s>",
                 {{3, 6}, {4, 5}, {9, 11}},
                 {{{0, 3}, true}, {{3, 11}, false}, {{11, 14}, true}}}),
    [](const ::testing::TestParamInfo<PlanCase>& info) { return std::string(info.param.name); });

TEST(LocateContentsTest, FindsEachContentWhereItsMarkerWas) {
  const std::vector<std::string_view> contents = {"be brief", "hi </s>"};
  const std::string rendered = "[INST] <<SYS>>\nbe brief\n<</SYS>>\n\nhi </s> [/INST]";
  const std::string marked =
      "[INST] <<SYS>>\n" + ContentMarker(0) + "\n<</SYS>>\n\n" + ContentMarker(1) + " [/INST]";
  const auto ranges = LocateContents(rendered, marked, contents);
  ASSERT_TRUE(ranges.ok()) << ranges.status().ToString();
  EXPECT_EQ(ranges.value(), (std::vector<TextRange>{{15, 23}, {34, 41}}));
}

TEST(LocateContentsTest, AContentTheTemplateTrimmedIsFoundTrimmed) {
  const std::vector<std::string_view> contents = {"  hi </s> \n"};
  const auto ranges =
      LocateContents("[INST] hi </s> [/INST]", "[INST] " + ContentMarker(0) + " [/INST]", contents);
  ASSERT_TRUE(ranges.ok()) << ranges.status().ToString();
  EXPECT_EQ(ranges.value(), (std::vector<TextRange>{{7, 14}}));
}

TEST(LocateContentsTest, TheWholeOrTheTrimmedContentIsChosenByWhatFollowsIt) {
  // "hi " is there whole both times; only what follows tells whether the template kept its space.
  const std::vector<std::string_view> contents = {"hi "};
  const auto kept = LocateContents("<u>hi </u>", "<u>" + ContentMarker(0) + "</u>", contents);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept.value(), (std::vector<TextRange>{{3, 6}}));
  const auto trimmed = LocateContents("<u>hi </u>", "<u>" + ContentMarker(0) + " </u>", contents);
  ASSERT_TRUE(trimmed.ok());
  EXPECT_EQ(trimmed.value(), (std::vector<TextRange>{{3, 5}}));
}

TEST(LocateContentsTest, ADroppedOrRepeatedMessageIsFollowed) {
  const std::vector<std::string_view> contents = {"a", "b"};
  const auto ranges =
      LocateContents("[b|b]", "[" + ContentMarker(1) + "|" + ContentMarker(1) + "]", contents);
  ASSERT_TRUE(ranges.ok());
  EXPECT_EQ(ranges.value(), (std::vector<TextRange>{{1, 2}, {3, 4}}));
}

struct LocateCase {
  const char* name;
  std::string rendered;
  std::string marked;
  std::vector<std::string_view> contents;
  std::vector<TextRange> ranges;
};

class LocateTable : public ::testing::TestWithParam<LocateCase> {};

TEST_P(LocateTable, FindsContentsWholeOrTrimmedWhereverARenderingHasThem) {
  const LocateCase& c = GetParam();
  const auto ranges = LocateContents(c.rendered, c.marked, c.contents);
  ASSERT_TRUE(ranges.ok()) << ranges.status().ToString();
  EXPECT_EQ(ranges.value(), c.ranges);
}

// Whether the template trimmed a content can show only after the markup that follows it: "x "
// then " " reads as "x " whole until the next content does not fit (found by
// tests/fuzz/control_text_fuzzer.cc).
INSTANTIATE_TEST_SUITE_P(
    Cases, LocateTable,
    ::testing::Values(
        // "x" trimmed, " " markup, " y " whole: "x " whole would leave "y ]" for " y ".
        LocateCase{"trimmed_before_blank_markup",
                   "x  y ]",
                   ContentMarker(0) + " " + ContentMarker(1) + "]",
                   {"x ", " y "},
                   {{0, 1}, {2, 5}}},
        // The same with no markup between: "x " whole would leave "y " for " y ".
        LocateCase{"trimmed_before_the_next_content",
                   "x y ",
                   ContentMarker(0) + ContentMarker(1),
                   {"x ", " y "},
                   {{0, 1}, {1, 4}}},
        LocateCase{"the_whole_content_where_it_fits",
                   "<u>x </u>",
                   "<u>" + ContentMarker(0) + "</u>",
                   {"x "},
                   {{3, 5}}}),
    [](const ::testing::TestParamInfo<LocateCase>& info) { return std::string(info.param.name); });

TEST(LocateContentsTest, ManyBlankContentsDoNotTakeExponentialTime) {
  // 200 blank contents, whole or trimmed, over 100 blanks and then a byte no choice reaches:
  // 2^200 ways to choose, each (marker, position) tried once.
  const std::vector<std::string_view> contents = {" "};
  std::string marked;
  for (int i = 0; i < 200; ++i) marked += ContentMarker(0);
  EXPECT_FALSE(LocateContents(std::string(100, ' ') + "!", marked + "?", contents).ok());
  const auto ranges = LocateContents(std::string(100, ' ') + "?", marked + "?", contents);
  ASSERT_TRUE(ranges.ok()) << ranges.status().ToString();
  EXPECT_EQ(ranges.value().size(), 200u);
}

TEST(LocateContentsTest, WhatCannotBeTracedIsRefused) {
  const std::vector<std::string_view> contents = {"hi"};
  const std::string marked = "<u>" + ContentMarker(0) + "</u>";
  for (const std::string& rendered :
       {std::string("<u>HI</u>"), std::string("<u>hi</u>!"), std::string("<v>hi</u>"),
        std::string("<u>hi"), std::string("")}) {
    const auto ranges = LocateContents(rendered, marked, contents);
    EXPECT_EQ(ranges.status().code(), StatusCode::kInvalidArgument) << rendered;
  }
  // A marker with no such message, or cut short.
  EXPECT_FALSE(LocateContents("<u>hi</u>", "<u>" + ContentMarker(1) + "</u>", contents).ok());
  EXPECT_FALSE(LocateContents("<u>hi", "<u>\x1eharrier-content-0", contents).ok());
}

}  // namespace
}  // namespace harrier
