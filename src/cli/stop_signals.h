// The stop signals of `harrier serve`: SIGINT and SIGTERM, blocked in every thread and taken
// only by sigwait() here, so that no I/O or model thread is ever interrupted by one.
//
// Before the ports open, SignalsWhileLoading watches for them while the models load; once the
// server serves, AwaitStop follows the drain's order (core/shutdown_timeline.h) and returns when
// the listeners should close. After either, one more signal exits the process at once with 1.
#pragma once

#include <signal.h>

#include <atomic>
#include <functional>
#include <thread>

#include "cli/serve_flags.h"
#include "core/shutdown_timeline.h"

namespace harrier {

// Blocks SIGINT and SIGTERM in this thread and every thread started after it, so that they are
// only ever received by sigwait(); ignores SIGPIPE (a vanished client is an error code) and
// SIGHUP (logrotate's habit; the access log follows a rotation by itself). Call it first, before
// any thread exists: a thread started before it takes a SIGTERM with the default action, which
// ends the process at once. Returns the blocked set.
sigset_t BlockShutdownSignals();

// Waits for the shutdown signals and the drain's delay as `timeline` orders, logging each step;
// returns when the listeners should close. Then a thread of its own waits for one more signal,
// which exits the process at once with status 1.
void AwaitStop(const sigset_t& signals, const ServeFlags& flags, ShutdownTimeline* timeline);

// A SIGTERM or SIGINT while the models load stops the start: `stop` begins the manager's
// shutdown (the loads not begun are skipped, a configured warm-up stops between runs, the load
// in progress finishes), and the server exits 0 without opening a port; another signal exits at
// once with 1 (probe 39: the signals waited, blocked, until every model had loaded and every
// port had opened). A thread polls the blocked signals every 100 ms until Finish(); a signal
// after that stays pending for AwaitStop.
class SignalsWhileLoading {
 public:
  SignalsWhileLoading(const sigset_t& signals, std::function<void()> stop);
  ~SignalsWhileLoading() { Finish(); }
  SignalsWhileLoading(const SignalsWhileLoading&) = delete;
  SignalsWhileLoading& operator=(const SignalsWhileLoading&) = delete;

  // Stops watching; whether a signal came.
  bool Finish();

 private:
  std::atomic<bool> done_{false};
  std::atomic<int> signal_{0};
  std::thread thread_;  // last: it reads the two above from its first instruction
};

}  // namespace harrier
