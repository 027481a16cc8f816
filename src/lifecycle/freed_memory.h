// When the memory that loads and unloads free goes back to the system.
//
// A load frees ONNX Runtime's temporaries (the parsed model, the initializers before
// optimisation: about twice a model's size) into glibc's arenas, and a retired version frees
// its weights. Giving all of it back after every load (malloc_trim) keeps the RSS flat, but the
// next load then faults every page in again: on the development VM that was 87k page faults,
// 0.9 s of a 1.05 s ResNet-50 reload, and the page-table changes in the serving process slowed
// its other threads (docs/model-lifecycle.md, "Memory"). So after a load, or the retire that
// ends a reload, the freed memory stays for the next load until the heap's free resident part
// passes a budget; an unload, after which nothing may come to reuse it, always gives it back,
// and so does Settle() once loads have stopped for a while (the manager calls it when its
// lifecycle threads have been idle kSettleAfter), so that a reload's memory does not stay with
// the process for the hours before the next one.
//
// The heap's free resident part is estimated as resident - allocated - baseline, where the
// baseline is resident - allocated measured right after the last trim (stacks and the anonymous
// mappings that are not malloc's; file-backed pages are not counted at all). Until the first trim
// there is no baseline, and the first call trims.
//
// Thread safety: every method may be called from any thread.

#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>

namespace harrier {

class FreedMemory {
 public:
  // The process's resident bytes (anonymous ones, for glibc's) and the bytes malloc has handed
  // out and not had back.
  struct Usage {
    uint64_t resident = 0;
    uint64_t allocated = 0;
  };
  struct Hooks {
    std::function<Usage()> usage;
    std::function<void()> trim;
  };
  // glibc's: /proc/self/statm's resident minus shared pages, and mallinfo2(); malloc_trim(0)
  // (nothing under AddressSanitizer, whose allocator replaces glibc's).
  static Hooks Glibc();

  // retain_bytes: the free resident heap kept for the next load; 0 gives it all back every time.
  explicit FreedMemory(uint64_t retain_bytes, Hooks hooks = Glibc());

  // After a load, or the retire that ends a reload: trims when the free resident heap passed
  // the budget. Returns whether it trimmed.
  bool AfterLoad();
  // After an unload: always trims.
  bool AfterUnload();
  // When no load has run for a while: trims when a load kept memory since the last trim.
  bool Settle();
  // How long the lifecycle threads stay idle before the manager calls Settle().
  static constexpr std::chrono::seconds kSettleAfter{30};

  // The free resident heap as last estimated (0 right after a trim; for logs and tests).
  uint64_t kept_bytes() const;

 private:
  bool TrimLocked();

  const uint64_t retain_;
  const Hooks hooks_;
  mutable std::mutex mu_;
  std::optional<int64_t> baseline_;  // resident - allocated after the last trim
  uint64_t kept_ = 0;
  bool kept_since_trim_ = false;
};

}  // namespace harrier
