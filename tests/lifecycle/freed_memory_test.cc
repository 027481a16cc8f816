#include "lifecycle/freed_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace harrier {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// A heap whose resident and allocated bytes the test sets; a trim gives back every free
// resident byte above `floor` (what is not malloc's: code, stacks).
struct FakeHeap {
  uint64_t resident = 0;
  uint64_t allocated = 0;
  uint64_t floor = 0;
  int trims = 0;
  FreedMemory::Hooks Hooks() {
    return {[this] {
              return FreedMemory::Usage{resident, allocated};
            },
            [this] {
              ++trims;
              resident = allocated + floor;
            }};
  }
};

TEST(FreedMemoryTest, TheFirstLoadTrimsToLearnTheBaseline) {
  FakeHeap heap{300 * kMiB, 100 * kMiB, 40 * kMiB};
  FreedMemory memory(512 * kMiB, heap.Hooks());
  EXPECT_TRUE(memory.AfterLoad());
  EXPECT_EQ(heap.trims, 1);
  EXPECT_EQ(heap.resident, 140 * kMiB);
}

TEST(FreedMemoryTest, LoadsKeepFreeMemoryUpToTheBudgetAndTrimPastIt) {
  struct Step {
    std::string what;
    uint64_t resident_mib;
    uint64_t allocated_mib;
    bool trims;
    uint64_t kept_mib;  // after the step
  };
  // Baseline after the first trim: resident 140, allocated 100 -> 40 not malloc's.
  const std::vector<Step> steps = {
      {"a reload's temporaries and the old weights, freed: 300 kept", 440, 100, false, 300},
      {"a new model (allocated grows with resident): still 300", 640, 300, false, 300},
      {"another reload frees 212 more: 512, the budget itself", 852, 300, false, 512},
      {"one MiB past the budget: trimmed", 853, 300, true, 0},
      {"nothing freed since", 340, 300, false, 0},
      {"allocated above resident (untouched pages): nothing kept", 350, 400, false, 0},
  };
  FakeHeap heap{300 * kMiB, 100 * kMiB, 40 * kMiB};
  FreedMemory memory(512 * kMiB, heap.Hooks());
  ASSERT_TRUE(memory.AfterLoad());
  for (const Step& s : steps) {
    SCOPED_TRACE(s.what);
    heap.resident = s.resident_mib * kMiB;
    heap.allocated = s.allocated_mib * kMiB;
    const int trims = heap.trims;
    EXPECT_EQ(memory.AfterLoad(), s.trims);
    EXPECT_EQ(heap.trims - trims, s.trims ? 1 : 0);
    EXPECT_EQ(memory.kept_bytes(), s.kept_mib * kMiB);
  }
}

TEST(FreedMemoryTest, ABudgetOfZeroTrimsAfterEveryLoad) {
  FakeHeap heap{300 * kMiB, 100 * kMiB, 40 * kMiB};
  FreedMemory memory(0, heap.Hooks());
  for (int i = 0; i < 3; ++i) {
    heap.resident += kMiB;
    EXPECT_TRUE(memory.AfterLoad());
  }
  EXPECT_EQ(heap.trims, 3);
}

TEST(FreedMemoryTest, AnUnloadAlwaysTrims) {
  FakeHeap heap{300 * kMiB, 100 * kMiB, 40 * kMiB};
  FreedMemory memory(512 * kMiB, heap.Hooks());
  ASSERT_TRUE(memory.AfterLoad());
  heap.resident += 10 * kMiB;
  EXPECT_FALSE(memory.AfterLoad());
  EXPECT_TRUE(memory.AfterUnload());
  EXPECT_TRUE(memory.AfterUnload());
  EXPECT_EQ(heap.trims, 3);
}

TEST(FreedMemoryTest, SettleTrimsOnlyWhatLoadsKeptSinceTheLastTrim) {
  FakeHeap heap{300 * kMiB, 100 * kMiB, 40 * kMiB};
  FreedMemory memory(512 * kMiB, heap.Hooks());
  EXPECT_FALSE(memory.Settle()) << "nothing loaded yet";
  ASSERT_TRUE(memory.AfterLoad());
  EXPECT_FALSE(memory.Settle()) << "the load trimmed";
  heap.resident += 200 * kMiB;
  EXPECT_FALSE(memory.AfterLoad());
  EXPECT_TRUE(memory.Settle());
  EXPECT_EQ(heap.resident, 140 * kMiB);
  EXPECT_FALSE(memory.Settle()) << "settled already";
  EXPECT_EQ(heap.trims, 2);
}

TEST(FreedMemoryTest, GlibcHooksReadThisProcess) {
  const FreedMemory::Usage usage = FreedMemory::Glibc().usage();
  EXPECT_GT(usage.resident, 0u);
  FreedMemory::Glibc().trim();  // runs (nothing under AddressSanitizer)
}

}  // namespace
}  // namespace harrier
