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

// Deterministic: the callback is held until Unregister() is seen blocked on it (or, when it
// does not wait, until it has returned), so a broken Unregister() fails every run, not only
// when its thread wins a race.
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
  std::atomic<bool> returned{false};
  bool finished_at_return = false;
  std::thread unregisterer([&] {
    t.Unregister(id);
    finished_at_return = finished.load();
    returned = true;
  });
  while (t.waiting_unregisters() == 0 && !returned.load()) std::this_thread::yield();
  EXPECT_FALSE(returned.load()) << "Unregister() returned while its callback was still running";
  EXPECT_EQ(t.waiting_unregisters(), 1);
  release.set_value();
  unregisterer.join();
  canceller.join();
  EXPECT_TRUE(finished_at_return) << "Unregister() returned before its callback finished";
  EXPECT_EQ(t.waiting_unregisters(), 0);
}

}  // namespace
}  // namespace harrier
