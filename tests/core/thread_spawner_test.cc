#include "core/thread_spawner.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace harrier {
namespace {

int ThisThreadNice() { return getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())); }

// A thread started from a lowered-priority thread still runs at the normal priority (a plain
// std::thread would inherit the lowered one: checked too, so the test can fail).
TEST(ThreadSpawnerTest, AThreadStartedFromALowPriorityThreadRunsAtTheNormalOne) {
  InitThreadSpawner();
  const int normal = ThisThreadNice();
  int inherited = -100, spawned = -100, direct = -100;
  std::thread low([&] {
    ASSERT_EQ(setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), normal + 5), 0);
    std::thread plain([&] { inherited = ThisThreadNice(); });
    plain.join();
    std::thread t = SpawnThread([&] { spawned = ThisThreadNice(); });
    t.join();
  });
  low.join();
  std::thread same = SpawnThread([&] { direct = ThisThreadNice(); });
  same.join();
  EXPECT_EQ(inherited, normal + 5);
  EXPECT_EQ(spawned, normal);
  EXPECT_EQ(direct, normal);
}

}  // namespace
}  // namespace harrier
