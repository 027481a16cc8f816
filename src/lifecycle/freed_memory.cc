#include "lifecycle/freed_memory.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/sanitizers.h"

namespace harrier {

namespace {

// The process's anonymous resident bytes: statm's resident minus its shared (file-backed and
// shared-memory) pages, so that a mapped model file or the code does not count as heap.
uint64_t AnonymousResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0, shared = 0;
  const int read = std::fscanf(f, "%llu %llu %llu", &size, &resident, &shared);
  std::fclose(f);
  if (read != 3 || shared > resident) return 0;
  return (resident - shared) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

FreedMemory::Hooks FreedMemory::Glibc() {
  Hooks hooks;
  hooks.usage = [] {
    Usage usage;
    usage.resident = AnonymousResidentBytes();
    if constexpr (!kUnderAddressSanitizer) {
      const struct mallinfo2 info = mallinfo2();
      usage.allocated = info.uordblks + info.hblkhd;
    }
    return usage;
  };
  hooks.trim = [] {
    if constexpr (!kUnderAddressSanitizer) malloc_trim(0);
  };
  return hooks;
}

FreedMemory::FreedMemory(uint64_t retain_bytes, Hooks hooks)
    : retain_(retain_bytes), hooks_(std::move(hooks)) {}

bool FreedMemory::AfterLoad() {
  std::lock_guard lock(mu_);
  if (retain_ == 0 || !baseline_) return TrimLocked();
  const Usage usage = hooks_.usage();
  const int64_t free_resident =
      static_cast<int64_t>(usage.resident) - static_cast<int64_t>(usage.allocated) - *baseline_;
  kept_ = static_cast<uint64_t>(std::max<int64_t>(0, free_resident));
  if (kept_ <= retain_) {
    kept_since_trim_ = true;
    return false;
  }
  return TrimLocked();
}

bool FreedMemory::Settle() {
  std::lock_guard lock(mu_);
  if (!kept_since_trim_) return false;
  return TrimLocked();
}

bool FreedMemory::AfterUnload() {
  std::lock_guard lock(mu_);
  return TrimLocked();
}

uint64_t FreedMemory::kept_bytes() const {
  std::lock_guard lock(mu_);
  return kept_;
}

bool FreedMemory::TrimLocked() {
  hooks_.trim();
  const Usage usage = hooks_.usage();
  baseline_ = static_cast<int64_t>(usage.resident) - static_cast<int64_t>(usage.allocated);
  kept_ = 0;
  kept_since_trim_ = false;
  return true;
}

}  // namespace harrier
