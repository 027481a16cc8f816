// ChooseSlot: which free sequence slot a new request takes, and how much of its prompt that
// slot's KV cache already holds. A pure function of the slots' state, so its policy is a table
// test (tests/backends/llamacpp/slot_choice_test.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace harrier {

struct SlotState {
  bool free = true;                 // no request holds it
  std::span<const int32_t> cached;  // the tokens whose KV cells it holds, from position 0
  uint64_t last_used = 0;           // when a request last left it (larger = more recent)
};

struct SlotChoice {
  int slot = -1;             // index into the slots; -1 when none is free
  size_t reused_tokens = 0;  // prompt tokens the slot's cache already holds
};

// Among the free slots: the one whose cache shares the longest prefix with `prompt`, when that
// prefix is at least `min_reused_tokens` long (ties: the least recently used); otherwise an
// empty slot, or else the least recently used one (whose cache is then dropped, bar whatever
// prefix it happens to share). The reused prefix stops one token short of the whole prompt: the
// last prompt token is always decoded, for the logits the first output token is sampled from.
SlotChoice ChooseSlot(const std::vector<SlotState>& slots, std::span<const int32_t> prompt,
                      size_t min_reused_tokens);

}  // namespace harrier
