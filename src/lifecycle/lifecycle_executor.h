// LifecycleExecutor: the threads the model repository manager runs its loads, unloads and
// repository polls on (docs/model-lifecycle.md, "Threads").
//
// `threads` threads (--model-load-thread-count), each named `model-lifecycle` and at nice +10,
// below the I/O and model worker threads. Every task is posted under a key (the model's name):
// tasks of one key run one at a time, in the order they were posted; tasks of different keys
// run concurrently, up to `threads` at once. One queue in posting order, and a thread takes the
// first task whose key is not running: with one thread that is always the first task, so one
// thread runs everything in posting order, as the single lifecycle thread did.
//
// A periodic task (the repository poll; outside poll mode, FreedMemory::Settle) is posted, under
// its own key, only when the executor is idle (nothing queued, nothing running), and next becomes
// due `interval` after the executor is idle again: a poll and the work it posts never overlap
// the next poll.
//
// Thread safety: Post() and Stop() from any thread, a task included (a task may post more).
// Start() once, before or after the first Post() (tasks posted before it wait).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace harrier {

class LifecycleExecutor {
 public:
  struct Options {
    int threads = 1;  // at least 1
    // Posted under `periodic_key` every `interval` when set, the first one interval after
    // Start(), each when the executor is idle.
    std::function<void()> periodic;
    std::string periodic_key;
    std::chrono::milliseconds interval{0};
  };

  LifecycleExecutor() = default;
  LifecycleExecutor(const LifecycleExecutor&) = delete;
  LifecycleExecutor& operator=(const LifecycleExecutor&) = delete;
  ~LifecycleExecutor() { Stop(); }

  void Start(Options options);
  // Queues `task` behind every task already posted under `key`. `dropped`, if any, runs instead
  // when the executor stops before the task started (a load's client is told so). False once
  // stopping: neither runs (both are destroyed before Post returns).
  bool Post(std::string key, std::function<void()> task, std::function<void()> dropped = {});
  // How many tasks posted under `key` have not started.
  size_t Queued(std::string_view key);
  // Refuses new tasks and drops the queued ones (their `dropped` run, on this thread); the tasks
  // in progress go on. Returns at once. Each queued load used to run after the front ends had
  // closed its client's connection: the stop took the sum of their load times (probe 28).
  void Close();
  // Close(), then waits for the tasks in progress and joins the threads. Idempotent; not from a
  // task, nor from two threads at once. Before Start(): the tasks posted never run.
  void Stop();

 private:
  struct Task {
    std::string key;
    std::function<void()> run;
    std::function<void()> dropped;  // may be empty
  };
  void Run();
  // The first queued task whose key is not running, or end(). REQUIRES: mu_ held.
  std::list<Task>::iterator NextRunnable();

  Options options_;  // constant after Start()
  std::vector<std::thread> threads_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::list<Task> queue_;          // guarded by mu_; in posting order
  std::set<std::string> running_;  // guarded by mu_; the keys of the tasks running
  bool stopping_ = false;          // guarded by mu_
  // The periodic task was posted and the executor has not been idle since (guarded by mu_).
  bool periodic_round_open_ = false;
  std::chrono::steady_clock::time_point next_periodic_;  // guarded by mu_
};

}  // namespace harrier
