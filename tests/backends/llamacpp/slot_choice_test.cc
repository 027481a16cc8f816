#include "backends/llamacpp/slot_choice.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace harrier {
namespace {

struct SlotRow {
  bool free;
  std::vector<int32_t> cached;
  uint64_t last_used;
};

struct ChoiceCase {
  const char* name;
  std::vector<SlotRow> slots;
  std::vector<int32_t> prompt;
  size_t min_reused;
  int slot;
  size_t reused;
  bool share = false;   // ChooseSlot's `share`
  int share_from = -1;  // the expected SlotChoice::share_from
};

class SlotChoiceTable : public ::testing::TestWithParam<ChoiceCase> {};

TEST_P(SlotChoiceTable, Chooses) {
  const ChoiceCase& c = GetParam();
  std::vector<SlotState> states;
  for (const SlotRow& row : c.slots) states.push_back({row.free, row.cached, row.last_used});
  const SlotChoice choice = ChooseSlot(states, c.prompt, c.min_reused, c.share);
  EXPECT_EQ(choice.slot, c.slot);
  EXPECT_EQ(choice.reused_tokens, c.reused);
  EXPECT_EQ(choice.share_from, c.share_from);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SlotChoiceTable,
    ::testing::Values(
        ChoiceCase{"none_free", {{false, {}, 0}, {false, {}, 0}}, {1, 2}, 2, -1, 0},
        ChoiceCase{"empty_slot_first", {{true, {1, 9}, 5}, {true, {}, 7}}, {1, 2, 3}, 2, 1, 0},
        ChoiceCase{"longest_prefix",
                   {{true, {1, 2, 7}, 1}, {true, {1, 2, 3, 4}, 2}, {true, {}, 0}},
                   {1, 2, 3, 4, 5},
                   2,
                   1,
                   4},
        ChoiceCase{"busy_slot_skipped",
                   {{false, {1, 2, 3, 4}, 0}, {true, {1, 2, 3}, 0}},
                   {1, 2, 3, 4, 5},
                   2,
                   1,
                   3},
        // A prefix below the threshold does not outweigh an empty slot...
        ChoiceCase{"short_prefix_prefers_empty",
                   {{true, {1, 2, 8}, 0}, {true, {}, 0}},
                   {1, 2, 3},
                   3,
                   1,
                   0},
        // ...but is reused when the slot is taken anyway (the least recently used).
        ChoiceCase{
            "lru_keeps_its_prefix", {{true, {1, 5}, 9}, {true, {1, 2, 8}, 3}}, {1, 2, 3}, 3, 1, 2},
        // The last prompt token is always decoded, even when the slot caches all of it.
        ChoiceCase{"whole_prompt_cached", {{true, {1, 2, 3, 4}, 0}}, {1, 2, 3}, 2, 0, 2},
        ChoiceCase{
            "tie_goes_to_lru", {{true, {1, 2, 3}, 8}, {true, {1, 2, 3}, 4}}, {1, 2, 3, 4}, 2, 1, 3},
        ChoiceCase{"threshold_zero_still_needs_a_match",
                   {{true, {7}, 0}, {true, {}, 1}},
                   {1, 2},
                   0,
                   1,
                   0},
        // Sharing: a prefix below the threshold still goes to the empty slot, and now comes
        // with it, the other slot's cache left whole.
        ChoiceCase{"short_prefix_shared_into_empty",
                   {{true, {1, 2, 8}, 0}, {true, {}, 0}},
                   {1, 2, 3},
                   3,
                   1,
                   2,
                   true,
                   0},
        // A busy slot's prefix is shared too, when longer than the best free slot's.
        ChoiceCase{"busy_slot_prefix_shared",
                   {{false, {1, 2, 3, 4}, 0}, {true, {1, 2, 3}, 0}, {true, {}, 0}},
                   {1, 2, 3, 4, 5},
                   2,
                   2,
                   4,
                   true,
                   0},
        // No empty slot: the least recently used one is taken and the prefix shared into it.
        ChoiceCase{"shared_into_lru",
                   {{false, {1, 2, 3, 4}, 0}, {true, {1, 9}, 5}, {true, {1, 2, 9}, 2}},
                   {1, 2, 3, 4, 5},
                   3,
                   2,
                   4,
                   true,
                   0},
        // A free slot whose own prefix is long enough and no shorter than any other is taken
        // over, as without sharing.
        ChoiceCase{"own_long_prefix_taken_over",
                   {{false, {1, 2, 3}, 0}, {true, {1, 2, 3}, 4}, {true, {}, 0}},
                   {1, 2, 3, 4},
                   2,
                   1,
                   3,
                   true,
                   -1},
        // The slot taken anyway holding the longest prefix itself: nothing to share.
        ChoiceCase{"lru_holds_the_longest",
                   {{false, {1, 5}, 0}, {true, {1, 2, 8}, 3}, {true, {1, 4}, 9}},
                   {1, 2, 3},
                   3,
                   1,
                   2,
                   true,
                   -1},
        // Shared or not, the last prompt token is decoded.
        ChoiceCase{"shared_stops_before_the_last_token",
                   {{false, {1, 2, 3}, 0}, {true, {}, 0}},
                   {1, 2, 3},
                   16,
                   1,
                   2,
                   true,
                   0},
        ChoiceCase{"no_prefix_anywhere",
                   {{false, {7}, 0}, {true, {}, 0}},
                   {1, 2},
                   2,
                   1,
                   0,
                   true,
                   -1}),
    [](const ::testing::TestParamInfo<ChoiceCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace harrier
