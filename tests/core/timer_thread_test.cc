#include "core/timer_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace harrier {
namespace {

using std::chrono::milliseconds;

TEST(TimerThreadTest, RunsCallbacksInTimeOrderNotSchedulingOrder) {
  TimerThread timer;
  std::mutex mu;
  std::vector<int> order;
  std::promise<void> done;
  const auto now = TimerThread::Clock::now();
  timer.Schedule(now + milliseconds(60), [&] {
    std::lock_guard lock(mu);
    order.push_back(3);
    done.set_value();
  });
  timer.Schedule(now + milliseconds(20), [&] {
    std::lock_guard lock(mu);
    order.push_back(1);
  });
  timer.Schedule(now + milliseconds(40), [&] {
    std::lock_guard lock(mu);
    order.push_back(2);
  });
  ASSERT_EQ(done.get_future().wait_for(milliseconds(5000)), std::future_status::ready);
  std::lock_guard lock(mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_GE(TimerThread::Clock::now() - now, milliseconds(60));
}

TEST(TimerThreadTest, ACancelledCallbackNeverRunsAndAPastTimeRunsAtOnce) {
  TimerThread timer;
  std::atomic<int> ran{0};
  const uint64_t id =
      timer.Schedule(TimerThread::Clock::now() + milliseconds(50), [&] { ran += 100; });
  EXPECT_TRUE(timer.Cancel(id));
  EXPECT_FALSE(timer.Cancel(id));
  std::promise<void> done;
  timer.Schedule(TimerThread::Clock::now() - milliseconds(1), [&] {
    ++ran;
    done.set_value();
  });
  ASSERT_EQ(done.get_future().wait_for(milliseconds(5000)), std::future_status::ready);
  std::this_thread::sleep_for(milliseconds(80));
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(timer.pending(), 0u);
}

TEST(TimerThreadTest, ACallbackMayScheduleAnotherAndDestructionDropsWhatIsNotDue) {
  std::atomic<int> ran{0};
  std::promise<void> second;
  {
    TimerThread timer;
    timer.Schedule(TimerThread::Clock::now(), [&] {
      ++ran;
      timer.Schedule(TimerThread::Clock::now(), [&] {
        ++ran;
        second.set_value();
      });
    });
    ASSERT_EQ(second.get_future().wait_for(milliseconds(5000)), std::future_status::ready);
    timer.Schedule(TimerThread::Clock::now() + std::chrono::hours(1), [&] { ran += 100; });
  }
  EXPECT_EQ(ran.load(), 2);
}

TEST(TimerThreadTest, MayBeDestroyedByItsOwnCallback) {
  auto timer = std::make_shared<TimerThread>();
  std::promise<void> done;
  std::weak_ptr<TimerThread> weak = timer;
  timer->Schedule(TimerThread::Clock::now() + milliseconds(20),
                  [owned = std::move(timer), &done]() mutable {
                    owned.reset();  // the last owner: ~TimerThread on its own thread
                    done.set_value();
                  });
  ASSERT_EQ(done.get_future().wait_for(milliseconds(5000)), std::future_status::ready);
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace harrier
