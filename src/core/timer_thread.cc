#include "core/timer_thread.h"

#include <pthread.h>

namespace harrier {

TimerThread::TimerThread() : state_(std::make_shared<State>()), thread_(Run, state_) {}

TimerThread::~TimerThread() {
  {
    std::lock_guard lock(state_->mu);
    state_->stop = true;
  }
  state_->cv.notify_all();
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // destroyed by one of our callbacks: the thread ends when it returns
  } else {
    thread_.join();
  }
}

uint64_t TimerThread::Schedule(Clock::time_point at, std::function<void()> fn) {
  // Notified under the lock: once it is released, `fn` may already have run and destroyed this
  // TimerThread and its state (a caller that owns the timer only through `fn`), so nothing here
  // may touch either after that (ThreadSanitizer saw the notify race the state's destruction).
  std::lock_guard lock(state_->mu);
  const uint64_t id = state_->next_id++;
  const bool earliest = state_->due.empty() || at < state_->due.begin()->first.first;
  state_->due.emplace(std::make_pair(at, id), std::move(fn));
  state_->when.emplace(id, at);
  if (earliest) state_->cv.notify_all();
  return id;
}

bool TimerThread::Cancel(uint64_t id) {
  std::function<void()> dropped;  // destroyed after the lock: it may own anything
  std::lock_guard lock(state_->mu);
  auto it = state_->when.find(id);
  if (it == state_->when.end()) return false;
  auto node = state_->due.extract(std::make_pair(it->second, id));
  state_->when.erase(it);
  dropped = std::move(node.mapped());
  return true;
}

std::size_t TimerThread::pending() const {
  std::lock_guard lock(state_->mu);
  return state_->due.size();
}

void TimerThread::Run(std::shared_ptr<State> state) {
  pthread_setname_np(pthread_self(), "harrier-timer");
  std::unique_lock lock(state->mu);
  while (!state->stop) {
    if (state->due.empty()) {
      state->cv.wait(lock);
      continue;
    }
    const auto at = state->due.begin()->first.first;
    if (Clock::now() < at) {
      state->cv.wait_until(lock, at);
      continue;
    }
    auto node = state->due.extract(state->due.begin());
    state->when.erase(node.key().second);
    lock.unlock();
    node.mapped()();
    node.mapped() = nullptr;  // its captures are released outside the lock
    lock.lock();
  }
  // What was never due goes with the thread, outside the lock.
  auto left = std::move(state->due);
  lock.unlock();
}

}  // namespace harrier
