#include "core/thread_spawner.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

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
    std::thread t = SpawnThread([&] { spawned = ThisThreadNice(); }).value();
    t.join();
  });
  low.join();
  std::thread same = SpawnThread([&] { direct = ThisThreadNice(); }).value();
  same.join();
  EXPECT_EQ(inherited, normal + 5);
  EXPECT_EQ(spawned, normal);
  EXPECT_EQ(direct, normal);
}

// In a child: leaves no address space for another thread's stack, spawns, and exits 0 when the
// spawn failed as it should.
void SpawnWithNoRoomForAStack() {
  long pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  const rlim_t in_use = static_cast<rlim_t>(pages) * static_cast<rlim_t>(getpagesize());
  rlimit limit{};
  limit.rlim_cur = limit.rlim_max = in_use + (rlim_t{1} << 20);
  if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(2);
  // glibc keeps the stacks of threads that ended for reuse: a few may still start.
  std::atomic<bool> release{false};
  std::vector<std::thread> running;
  for (int i = 0; i < 1000; ++i) {
    StatusOr<std::thread> t = SpawnThread([&release] {
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    if (t.ok()) {
      running.push_back(std::move(t).value());
      continue;
    }
    release = true;
    for (auto& r : running) r.join();
    const bool named = t.status().message().find("cannot start a thread") != std::string::npos;
    _exit(t.status().code() == StatusCode::kResourceExhausted && named ? 0 : 4);
  }
  _exit(3);
}

// A thread the system will not give (here: no address space left for its stack; in production
// the thread limit, ulimit -u or a pids cgroup, which root is exempt from) is an error returned,
// never an exception that ends the process (probe 53).
TEST(ThreadSpawnerTest, AThreadTheSystemWillNotGiveIsResourceExhausted) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers' shadow memory needs more address space than the limit leaves";
#endif
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_EXIT(SpawnWithNoRoomForAStack(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace harrier
