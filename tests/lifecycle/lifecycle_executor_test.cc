#include "lifecycle/lifecycle_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace harrier {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

LifecycleExecutor::Options Threads(int n) {
  LifecycleExecutor::Options o;
  o.threads = n;
  return o;
}

// Two tasks of different keys that each wait for the other to have started: they can only both
// finish if they run at the same time.
TEST(LifecycleExecutorTest, TasksOfDifferentKeysRunAtOnceOnTwoThreads) {
  LifecycleExecutor executor;
  executor.Start(Threads(2));
  std::promise<void> a_started, b_started;
  std::shared_future<void> a_seen = a_started.get_future().share();
  std::shared_future<void> b_seen = b_started.get_future().share();
  std::promise<bool> a_met, b_met;
  auto a_result = a_met.get_future(), b_result = b_met.get_future();
  ASSERT_TRUE(executor.Post("a", [&] {
    a_started.set_value();
    a_met.set_value(b_seen.wait_for(seconds(10)) == std::future_status::ready);
  }));
  ASSERT_TRUE(executor.Post("b", [&] {
    b_started.set_value();
    b_met.set_value(a_seen.wait_for(seconds(10)) == std::future_status::ready);
  }));
  EXPECT_TRUE(a_result.get());
  EXPECT_TRUE(b_result.get());
  executor.Stop();
}

// One thread: everything in posting order, whatever the keys (as the single lifecycle thread
// ran it), and never two tasks at once: while the first waits for the second to start, it does
// not.
TEST(LifecycleExecutorTest, OneThreadRunsEveryTaskInPostingOrderOneAtATime) {
  LifecycleExecutor executor;
  std::mutex mu;
  std::vector<std::string> order;
  std::promise<void> second_started;
  auto second_seen = second_started.get_future();
  std::atomic<bool> overlapped{false};
  auto record = [&](std::string what) {
    std::lock_guard l(mu);
    order.push_back(std::move(what));
  };
  ASSERT_TRUE(executor.Post("a", [&] {
    record("a1");
    // Bounded: with one thread the second cannot start, so this waits the whole 200 ms.
    overlapped = second_seen.wait_for(milliseconds(200)) == std::future_status::ready;
  }));
  ASSERT_TRUE(executor.Post("b", [&] {
    second_started.set_value();
    record("b1");
  }));
  ASSERT_TRUE(executor.Post("a", [&] { record("a2"); }));
  ASSERT_TRUE(executor.Post("c", [&] { record("c1"); }));
  ASSERT_TRUE(executor.Post("a", [&] { record("a3"); }));
  std::promise<void> all_ran;
  ASSERT_TRUE(executor.Post("d", [&] { all_ran.set_value(); }));  // last: one thread, in order
  executor.Start(Threads(1));  // posted before Start(): they wait for it
  ASSERT_EQ(all_ran.get_future().wait_for(seconds(10)), std::future_status::ready);
  executor.Stop();
  EXPECT_FALSE(overlapped);
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "b1", "a2", "c1", "a3"}));
}

// Four threads: while a's first task is held, b's tasks all run, and none of a's later tasks
// starts; each key's tasks run in posting order, never two of one key at once.
TEST(LifecycleExecutorTest, TasksOfOneKeyKeepTheirOrderWhileOtherKeysPass) {
  LifecycleExecutor executor;
  executor.Start(Threads(4));
  std::mutex mu;
  std::map<std::string, std::vector<int>> order;
  std::map<std::string, int> running;
  bool overlap = false;
  auto task = [&](std::string key, int i) {
    return [&, key, i] {
      {
        std::lock_guard l(mu);
        if (++running[key] > 1) overlap = true;
        order[key].push_back(i);
      }
      std::this_thread::yield();
      std::lock_guard l(mu);
      --running[key];
    };
  };
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> b_done;
  ASSERT_TRUE(executor.Post("a", [&] {
    {
      std::lock_guard l(mu);
      order["a"].push_back(0);
    }
    released.wait();
  }));
  for (int i = 1; i <= 50; ++i) {
    ASSERT_TRUE(executor.Post("a", task("a", i)));
    ASSERT_TRUE(executor.Post("b", task("b", i)));
    ASSERT_TRUE(executor.Post("c", task("c", i)));
  }
  ASSERT_TRUE(executor.Post("b", [&] { b_done.set_value(); }));
  // b's fifty ran while a's first task held its key.
  ASSERT_EQ(b_done.get_future().wait_for(seconds(10)), std::future_status::ready);
  {
    std::lock_guard l(mu);
    EXPECT_EQ(order["a"], std::vector<int>{0});  // none of a's later tasks started
    EXPECT_EQ(order["b"].size(), 50u);
  }
  std::promise<void> a_done, c_done;  // behind each key's fifty
  ASSERT_TRUE(executor.Post("a", [&] { a_done.set_value(); }));
  ASSERT_TRUE(executor.Post("c", [&] { c_done.set_value(); }));
  release.set_value();
  ASSERT_EQ(a_done.get_future().wait_for(seconds(10)), std::future_status::ready);
  ASSERT_EQ(c_done.get_future().wait_for(seconds(10)), std::future_status::ready);
  executor.Stop();
  std::vector<int> expected(50);
  for (int i = 0; i < 50; ++i) expected[i] = i + 1;
  EXPECT_FALSE(overlap);
  EXPECT_EQ(order["b"], expected);
  EXPECT_EQ(order["c"], expected);
  expected.insert(expected.begin(), 0);
  EXPECT_EQ(order["a"], expected);
}

// The stop: the task in progress finishes; the queued ones are dropped at once, each told
// (a queued load answers 503 while its client is still there), instead of running one after
// the other after the front ends had stopped (probe 28).
TEST(LifecycleExecutorTest, CloseDropsWhatIsQueuedAndTellsItThenStopWaitsForTheRunningOne) {
  LifecycleExecutor executor;
  executor.Start(Threads(1));
  std::promise<void> started, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> ran{0}, dropped{0};
  ASSERT_TRUE(executor.Post("a", [&] {
    started.set_value();
    released.wait();
    ++ran;
  }));
  started.get_future().wait();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(executor.Post(
        i % 2 ? "a" : "b", [&] { ++ran; }, [&] { ++dropped; }));
  }
  executor.Close();  // returns at once, the running task still held
  EXPECT_EQ(dropped.load(), 20);
  EXPECT_EQ(ran.load(), 0);
  EXPECT_FALSE(executor.Post(
      "a", [&] { ++ran; }, [&] { ++dropped; }));
  EXPECT_EQ(dropped.load(), 20);  // refused: neither runs
  release.set_value();
  executor.Stop();
  EXPECT_EQ(ran.load(), 1);
  executor.Stop();  // idempotent
  EXPECT_EQ(ran.load(), 1);
}

// Queued(key) counts the tasks of a key that wait, not the one running nor other keys'.
TEST(LifecycleExecutorTest, QueuedCountsAKeysWaitingTasks) {
  LifecycleExecutor executor;
  executor.Start(Threads(1));
  std::promise<void> started, release;
  std::shared_future<void> released = release.get_future().share();
  ASSERT_TRUE(executor.Post("a", [&] {
    started.set_value();
    released.wait();
  }));
  started.get_future().wait();
  EXPECT_EQ(executor.Queued("a"), 0u);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(executor.Post("a", [] {}));
  ASSERT_TRUE(executor.Post("b", [] {}));
  EXPECT_EQ(executor.Queued("a"), 3u);
  EXPECT_EQ(executor.Queued("b"), 1u);
  EXPECT_EQ(executor.Queued("c"), 0u);
  release.set_value();
  executor.Stop();
  EXPECT_EQ(executor.Queued("a"), 0u);
}

TEST(LifecycleExecutorTest, StoppedBeforeStartRunsNothing) {
  LifecycleExecutor executor;
  std::atomic<int> ran{0};
  ASSERT_TRUE(executor.Post("a", [&] { ++ran; }));
  executor.Stop();
  executor.Start(Threads(2));
  executor.Stop();
  EXPECT_EQ(ran.load(), 0);
}

// The periodic task (the poll) is posted only when nothing else is queued or running, and the
// work it posts is done before the next one is due.
TEST(LifecycleExecutorTest, ThePeriodicTaskRunsOnlyWhenIdle) {
  LifecycleExecutor executor;
  std::mutex mu;
  std::vector<std::string> order;
  std::promise<void> twice;
  int periodic_runs = 0;
  auto record = [&](std::string what) {
    std::lock_guard l(mu);
    order.push_back(std::move(what));
  };
  LifecycleExecutor::Options o = Threads(2);
  o.interval = milliseconds(1);
  o.periodic_key = "/poll";
  o.periodic = [&] {
    record("poll");
    // What a poll posts (a model's reconcile) runs before the next poll.
    executor.Post("m", [&] {
      record("reconcile");
      std::lock_guard l(mu);
      if (++periodic_runs == 2) twice.set_value();
    });
  };
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  ASSERT_TRUE(executor.Post("a", [&] {
    record("load");
    released.wait();
  }));
  executor.Start(std::move(o));
  // The interval passes many times over while the load runs: no poll meanwhile.
  std::this_thread::sleep_for(milliseconds(50));
  {
    std::lock_guard l(mu);
    EXPECT_EQ(order, std::vector<std::string>{"load"});
  }
  release.set_value();
  ASSERT_EQ(twice.get_future().wait_for(seconds(10)), std::future_status::ready);
  executor.Stop();
  ASSERT_GE(order.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(order.begin(), order.begin() + 5),
            (std::vector<std::string>{"load", "poll", "reconcile", "poll", "reconcile"}));
}

}  // namespace
}  // namespace harrier
