#include "lifecycle/lifecycle_executor.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

namespace harrier {

void LifecycleExecutor::Start(Options options) {
  options_ = std::move(options);
  options_.threads = std::max(options_.threads, 1);
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;  // stopped first: what was posted never runs
    next_periodic_ = std::chrono::steady_clock::now() + options_.interval;
  }
  // From the caller's thread, at its (normal) priority; each thread lowers its own.
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { Run(); });
}

bool LifecycleExecutor::Post(std::string key, std::function<void()> task,
                             std::function<void()> dropped) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      queue_.push_back({std::move(key), std::move(task), std::move(dropped)});
      cv_.notify_one();
      return true;
    }
  }
  task = nullptr;  // its captures go outside the lock
  dropped = nullptr;
  return false;
}

size_t LifecycleExecutor::Queued(std::string_view key) {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(
      std::count_if(queue_.begin(), queue_.end(), [&](const Task& t) { return t.key == key; }));
}

void LifecycleExecutor::Close() {
  std::list<Task> queued;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    queued.swap(queue_);
    cv_.notify_all();
  }
  for (Task& task : queued) {
    task.run = nullptr;
    if (task.dropped) task.dropped();
  }
}

void LifecycleExecutor::Stop() {
  Close();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

std::list<LifecycleExecutor::Task>::iterator LifecycleExecutor::NextRunnable() {
  // A task whose key runs waits for it; so does every later task of that key, since this takes
  // the first of each key that can run: one key's tasks run in their posting order.
  return std::find_if(queue_.begin(), queue_.end(),
                      [this](const Task& t) { return !running_.contains(t.key); });
}

void LifecycleExecutor::Run() {
  pthread_setname_np(pthread_self(), "model-lifecycle");
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);  // best effort
  using Clock = std::chrono::steady_clock;
  std::unique_lock lock(mu_);
  for (;;) {
    if (auto next = NextRunnable(); next != queue_.end()) {
      Task task = std::move(*next);
      queue_.erase(next);
      running_.insert(task.key);
      lock.unlock();
      task.run();
      task.run = nullptr;  // its captures (a request's callback, a model's handle) go here
      lock.lock();
      running_.erase(task.key);
      if (periodic_round_open_ && queue_.empty() && running_.empty()) {
        periodic_round_open_ = false;  // the poll and all it posted are done
        next_periodic_ = Clock::now() + options_.interval;
      }
      cv_.notify_all();  // the next task of this key may run now, or the executor is idle
      continue;
    }
    if (stopping_) {
      if (queue_.empty()) return;
      cv_.wait(lock);  // what is left waits for a key that is running
      continue;
    }
    const bool periodic_waits = options_.periodic && !periodic_round_open_;
    if (periodic_waits && queue_.empty() && running_.empty() && Clock::now() >= next_periodic_) {
      queue_.push_back({options_.periodic_key, options_.periodic, nullptr});
      periodic_round_open_ = true;
      continue;
    }
    if (periodic_waits && queue_.empty() && running_.empty()) {
      cv_.wait_until(lock, next_periodic_);
    } else {
      cv_.wait(lock);
    }
  }
}

}  // namespace harrier
