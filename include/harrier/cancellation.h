// CancellationToken: how a transport tells the layers below that nobody waits for a request any
// more (the client disconnected, the gRPC call was cancelled), so that the scheduler drops it
// from its queue and a backend stops a run in progress.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "harrier/inline_vector.h"

namespace harrier {

class CancellationToken {
 public:
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // Marks the token cancelled and runs every registered callback once, on the calling thread.
  // Idempotent: later calls do nothing.
  void Cancel();

  // Registers `fn` to run on Cancel(); when the token is already cancelled, runs it now, on the
  // calling thread. Returns an id for Unregister(). `fn` must not block and must not call
  // Unregister() on this token.
  uint64_t OnCancel(std::function<void()> fn);

  // Removes a callback. When it returns, the callback is not running and will never run again
  // (if Cancel() is running it on another thread, this waits for it to finish), so the caller
  // may free what the callback touches.
  void Unregister(uint64_t id);

  // How many Unregister() calls are blocked now, waiting for a callback that Cancel() is running
  // on another thread. For tests, which must know that Unregister() waits before they let the
  // callback finish.
  int waiting_unregisters() const;

 private:
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  // Guarded by mu_. Inline: a request registers one or two (the scheduler's queue, the backend's
  // run), and a registration must not cost an allocation per request (issue 10).
  InlineVector<std::pair<uint64_t, std::function<void()>>, 4> callbacks_;
  uint64_t next_id_ = 1;     // guarded by mu_
  uint64_t running_id_ = 0;  // the callback Cancel() is running now; guarded by mu_
  // Unregister() calls blocked in done_cv_.wait (waiting_unregisters()); guarded by mu_.
  int waiting_unregisters_ = 0;
};

}  // namespace harrier
