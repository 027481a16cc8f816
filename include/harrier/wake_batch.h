// WakeBatch: holds back the wake-ups that a producer of streamed responses sends to transports,
// and sends them together when it ends.
//
// A producer that writes to many streams in one go — the generation engine after a decode
// step, with a token for every sequence — would otherwise wake a transport's I/O thread for
// each write while it is still producing the next one: the thread wakes, sends one event,
// sleeps, and is woken again microseconds later, and every cross-thread post contends for the
// thread's lock (most of the server's cost per streamed token was that). The transport queues
// each stream's wake-up at once and defers its post to the batch (server/io_thread.h,
// IoThread::PostCoalesced): when the batch ends, each I/O thread is woken once and sends
// everything of the step that is on it.
//
// A batch covers the thread that made it, from construction to destruction; batches nest (only
// the outermost sends). Without a batch, RunOrDefer runs at once, so producers and transports
// need not know whether one is active. Not copyable or movable; a thread's batch must end on
// that thread.
#pragma once

#include <functional>
#include <vector>

namespace harrier {

class WakeBatch {
 public:
  WakeBatch();
  // Runs the wake-ups deferred to this batch, in the order they came, if it is the outermost.
  ~WakeBatch();
  WakeBatch(const WakeBatch&) = delete;
  WakeBatch& operator=(const WakeBatch&) = delete;

  // Runs `wake` now when the calling thread has no batch; otherwise when its outermost batch
  // ends. `wake` must only hand work to another thread (post it), as transports' wakes do.
  static void RunOrDefer(std::function<void()> wake);

  // True when the calling thread is inside a batch.
  static bool Active();

 private:
  WakeBatch* const outer_;
  std::vector<std::function<void()>> deferred_;  // the outermost batch's only
};

}  // namespace harrier
