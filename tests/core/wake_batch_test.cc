#include "harrier/wake_batch.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace harrier {
namespace {

TEST(WakeBatchTest, WithoutABatchAWakeRunsAtOnce) {
  EXPECT_FALSE(WakeBatch::Active());
  int runs = 0;
  WakeBatch::RunOrDefer([&] { ++runs; });
  EXPECT_EQ(runs, 1);
}

TEST(WakeBatchTest, InsideABatchWakesWaitForItsEndAndRunInOrder) {
  std::vector<std::string> ran;
  {
    WakeBatch batch;
    EXPECT_TRUE(WakeBatch::Active());
    WakeBatch::RunOrDefer([&] { ran.push_back("a"); });
    WakeBatch::RunOrDefer([&] { ran.push_back("b"); });
    EXPECT_TRUE(ran.empty());
  }
  EXPECT_EQ(ran, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(WakeBatch::Active());
}

TEST(WakeBatchTest, OnlyTheOutermostBatchRunsWhatWasDeferred) {
  int runs = 0;
  {
    WakeBatch outer;
    {
      WakeBatch inner;
      WakeBatch::RunOrDefer([&] { ++runs; });
    }
    EXPECT_EQ(runs, 0);  // the inner batch's end is not the step's end
    EXPECT_TRUE(WakeBatch::Active());
  }
  EXPECT_EQ(runs, 1);
}

TEST(WakeBatchTest, AWakeDeferredWhileTheBatchEndsRunsInTheSameEnd) {
  std::vector<int> ran;
  {
    WakeBatch batch;
    WakeBatch::RunOrDefer([&] {
      ran.push_back(1);
      WakeBatch::RunOrDefer([&] { ran.push_back(2); });
    });
  }
  EXPECT_EQ(ran, (std::vector<int>{1, 2}));
  EXPECT_FALSE(WakeBatch::Active());
}

TEST(WakeBatchTest, ABatchCoversOnlyItsOwnThread) {
  WakeBatch batch;
  int runs = 0;
  std::thread other([&] {
    EXPECT_FALSE(WakeBatch::Active());
    WakeBatch::RunOrDefer([&] { ++runs; });  // no batch there: at once
  });
  other.join();
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace harrier
