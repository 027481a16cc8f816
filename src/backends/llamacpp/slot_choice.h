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
  size_t reused_tokens = 0;  // prompt tokens whose KV cells the slot starts with
  int share_from = -1;       // >= 0: those cells are another slot's, shared into this one
};

// Among the free slots: the one whose cache shares the longest prefix with `prompt`, when that
// prefix is at least `min_reused_tokens` long (ties: the least recently used); otherwise an
// empty slot, or else the least recently used one (whose cache is then dropped, bar whatever
// prefix it happens to share). The reused prefix stops one token short of the whole prompt: the
// last prompt token is always decoded, for the logits the first output token is sampled from.
//
// With `share`, a slot's cells can also be shared into another (llama_memory_seq_cp: in a
// unified KV cache a cell belongs to a set of sequences, so nothing is copied and the owner
// loses nothing). Then a longer prefix held by any other slot, free or busy, is shared into the
// slot chosen as above, unless that slot's own prefix is at least as long: a short prefix is
// reused without dropping anyone's cache, and a long one without taking its slot.
SlotChoice ChooseSlot(const std::vector<SlotState>& slots, std::span<const int32_t> prompt,
                      size_t min_reused_tokens, bool share = false);

}  // namespace harrier
