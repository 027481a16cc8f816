#include "harrier/cancellation.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

namespace harrier {
namespace {

TEST(CancellationTokenTest, CallbacksRunOnceOnCancel) {
  CancellationToken t;
  int runs = 0;
  t.OnCancel([&] { ++runs; });
  EXPECT_FALSE(t.cancelled());
  t.Cancel();
  t.Cancel();
  EXPECT_TRUE(t.cancelled());
  EXPECT_EQ(runs, 1);
}

TEST(CancellationTokenTest, RegisteringAfterCancelRunsNow) {
  CancellationToken t;
  t.Cancel();
  bool ran = false;
  t.OnCancel([&] { ran = true; });
  EXPECT_TRUE(ran);
}

TEST(CancellationTokenTest, UnregisteredCallbackNeverRuns) {
  CancellationToken t;
  bool ran = false;
  uint64_t id = t.OnCancel([&] { ran = true; });
  t.Unregister(id);
  t.Cancel();
  EXPECT_FALSE(ran);
}

TEST(CancellationTokenTest, UnregisterWaitsForARunningCallback) {
  CancellationToken t;
  std::promise<void> entered, release;
  std::atomic<bool> finished{false};
  auto release_future = release.get_future();
  uint64_t id = t.OnCancel([&] {
    entered.set_value();
    release_future.wait();
    finished = true;
  });
  std::thread canceller([&] { t.Cancel(); });
  entered.get_future().wait();
  std::thread unregisterer([&] {
    t.Unregister(id);
    EXPECT_TRUE(finished.load());  // returned only after the callback finished
  });
  release.set_value();
  unregisterer.join();
  canceller.join();
}

}  // namespace
}  // namespace harrier
