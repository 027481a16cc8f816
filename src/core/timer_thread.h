// TimerThread: one thread that runs callbacks at given times — the heartbeats and grace
// periods of streamed responses, which must not wait on an I/O or engine thread. Callbacks run
// one at a time on the timer's thread, in time order; they must be short and must not block.
//
// Thread safety: every method may be called from any thread, including from a callback. The
// TimerThread may even be destroyed inside one of its callbacks (its last owner let go there):
// the thread then finishes that callback and ends on its own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

namespace harrier {

class TimerThread {
 public:
  using Clock = std::chrono::steady_clock;

  TimerThread();
  // Stops the thread; callbacks not yet due never run (they are destroyed on the thread).
  ~TimerThread();
  TimerThread(const TimerThread&) = delete;
  TimerThread& operator=(const TimerThread&) = delete;

  // Runs `fn` at `at` (at once if it has passed). Returns an id for Cancel().
  uint64_t Schedule(Clock::time_point at, std::function<void()> fn);
  // Drops a callback that has not started; false when it has run, is running or is unknown.
  bool Cancel(uint64_t id);
  // Callbacks waiting.
  std::size_t pending() const;

 private:
  // Shared with the thread, which may outlive this object (see above).
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    // Keyed by (time, id): ordered by time, ties in scheduling order.
    std::map<std::pair<Clock::time_point, uint64_t>, std::function<void()>> due;  // guarded by mu
    std::map<uint64_t, Clock::time_point> when;                                   // guarded by mu
    uint64_t next_id = 1;                                                         // guarded by mu
    bool stop = false;                                                            // guarded by mu
  };
  static void Run(std::shared_ptr<State> state);

  const std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace harrier
