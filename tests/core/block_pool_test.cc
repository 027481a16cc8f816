#include "core/block_pool.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

namespace harrier {
namespace {

TEST(BlockPoolTest, ReusesFreedBlocksUpToItsBound) {
  auto pool = BlockPool::Make(64, 2);
  void* a = pool->Allocate(64);
  void* b = pool->Allocate(32);
  void* c = pool->Allocate(64);
  pool->Free(a, 64);
  pool->Free(b, 32);
  pool->Free(c, 64);  // beyond the two kept: deleted
  if (!kBlockPoolsKeepBlocks) {
    EXPECT_EQ(pool->free_blocks(), 0u);  // AddressSanitizer: nothing kept
    return;
  }
  EXPECT_EQ(pool->free_blocks(), 2u);
  void* again = pool->Allocate(16);
  EXPECT_TRUE(again == a || again == b);
  pool->Free(again, 16);
  void* big = pool->Allocate(65);  // over the block size: operator new, never kept
  pool->Free(big, 65);
  EXPECT_EQ(pool->free_blocks(), 2u);
}

// Counts its destructions, so that a test sees each value destroyed exactly once.
struct Counted {
  explicit Counted(int* destroyed, std::string text)
      : destroyed(destroyed), text(std::move(text)) {}
  Counted(Counted&&) = delete;
  ~Counted() { ++*destroyed; }
  int* destroyed;
  std::string text;
};

TEST(PoolBoxTest, HoldsOneValueInAPoolBlockAndGivesItBack) {
  auto pool = BlockPool::Make(sizeof(Counted), 4);
  int destroyed = 0;
  {
    auto box = PoolBox<Counted>::Make(pool, &destroyed, "a value past the inline fifteen bytes");
    const Counted* where = &*box;
    auto moved = std::move(box);  // the pointer moves; the value stays where it was
    EXPECT_EQ(&*moved, where);
    EXPECT_EQ(moved->text, "a value past the inline fifteen bytes");
    auto assigned = PoolBox<Counted>::Make(pool, &destroyed, "another");
    assigned = std::move(moved);  // destroys "another"
    EXPECT_EQ(destroyed, 1);
    EXPECT_EQ(&*assigned, where);
  }
  EXPECT_EQ(destroyed, 2);
  if (kBlockPoolsKeepBlocks) {
    EXPECT_EQ(pool->free_blocks(), 2u);
  }
}

TEST(PoolBoxTest, OutlivesTheLastOtherHolderOfItsPool) {
  int destroyed = 0;
  auto pool = BlockPool::Make(sizeof(Counted), 4);
  auto box = PoolBox<Counted>::Make(pool, &destroyed, "x");
  pool.reset();  // the box keeps the pool alive until it frees its block
  box = PoolBox<Counted>::Make(BlockPool::Make(sizeof(Counted), 1), &destroyed, "y");
  EXPECT_EQ(destroyed, 1);
}

}  // namespace
}  // namespace harrier
