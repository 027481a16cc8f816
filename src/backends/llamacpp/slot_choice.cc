#include "backends/llamacpp/slot_choice.h"

#include <algorithm>

namespace harrier {
namespace {

size_t ReusablePrefix(std::span<const int32_t> cached, std::span<const int32_t> prompt) {
  const auto [c, p] = std::mismatch(cached.begin(), cached.end(), prompt.begin(), prompt.end());
  const auto common = static_cast<size_t>(p - prompt.begin());
  return prompt.empty() ? 0 : std::min(common, prompt.size() - 1);
}

}  // namespace

SlotChoice ChooseSlot(const std::vector<SlotState>& slots, std::span<const int32_t> prompt,
                      size_t min_reused_tokens, bool share) {
  SlotChoice best_reuse;  // the longest shared prefix of a free slot
  SlotChoice shared;      // the longest prefix of any slot, free or busy, when sharing
  int empty = -1;
  int least_recent = -1;
  for (int i = 0; i < static_cast<int>(slots.size()); ++i) {
    const SlotState& slot = slots[i];
    const size_t reused = ReusablePrefix(slot.cached, prompt);
    if (share && reused > shared.reused_tokens) shared = {i, reused};
    if (!slot.free) continue;
    if (best_reuse.slot < 0 || reused > best_reuse.reused_tokens ||
        (reused == best_reuse.reused_tokens && slot.last_used < slots[best_reuse.slot].last_used)) {
      best_reuse = {i, reused};
    }
    if (slot.cached.empty() && empty < 0) empty = i;
    if (least_recent < 0 || slot.last_used < slots[least_recent].last_used) least_recent = i;
  }
  if (best_reuse.slot < 0) return {};
  if (best_reuse.reused_tokens > 0 && best_reuse.reused_tokens >= min_reused_tokens &&
      best_reuse.reused_tokens >= shared.reused_tokens) {
    return best_reuse;
  }
  const int chosen = empty >= 0 ? empty : least_recent;
  const size_t own = ReusablePrefix(slots[chosen].cached, prompt);
  if (shared.reused_tokens > own) return {chosen, shared.reused_tokens, shared.slot};
  return {chosen, own};
}

}  // namespace harrier
