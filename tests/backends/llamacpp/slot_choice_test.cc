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
};

class SlotChoiceTable : public ::testing::TestWithParam<ChoiceCase> {};

TEST_P(SlotChoiceTable, Chooses) {
  const ChoiceCase& c = GetParam();
  std::vector<SlotState> states;
  for (const SlotRow& row : c.slots) states.push_back({row.free, row.cached, row.last_used});
  const SlotChoice choice = ChooseSlot(states, c.prompt, c.min_reused);
  EXPECT_EQ(choice.slot, c.slot);
  EXPECT_EQ(choice.reused_tokens, c.reused);
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
                   0}),
    [](const ::testing::TestParamInfo<ChoiceCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace harrier
