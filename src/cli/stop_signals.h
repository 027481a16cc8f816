// The stop signals of `harrier serve`: SIGINT and SIGTERM, blocked in every thread and taken
// only by sigwait() here, so that no I/O or model thread is ever interrupted by one.
//
// Before the server serves, SignalsBeforeServing watches for them through the start's steps;
// once the server serves, AwaitStop follows the drain's order (core/shutdown_timeline.h) and
// returns when the listeners should close. After either, one more signal exits the process at once
// with 1.
#pragma once

#include <signal.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
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

// The stop signals before the server serves, from the start until AwaitStop takes over (probe
// 39: they waited, blocked, until every model had loaded and every port had opened; probe 44:
// a start blocked opening a file, such as a FIFO no one writes, ignored them for good).
//
// The start is a sequence of steps. A SIGTERM or SIGINT during one stops the start:
// - while the models load (Loading), at once: `stop` begins the manager's shutdown (the loads
//   not begun are skipped, a configured warm-up stops between runs, the load in progress
//   finishes), however long that takes;
// - during any other step (Step), when the step ends: the caller reads stop_signal() then.
//   Those steps open files and ports and end within moments; one before any port opens that
//   has not ended kStepGrace after the signal is blocked (a file that does not open), and the
//   process exits 0 at once, logging which step, since nothing serves yet.
// Another signal exits the process at once with 1. A thread polls the blocked signals every
// 100 ms until Finish(); a signal after that stays pending for AwaitStop.
class SignalsBeforeServing {
 public:
  static constexpr std::chrono::seconds kStepGrace{5};

  explicit SignalsBeforeServing(const sigset_t& signals);
  ~SignalsBeforeServing() { Finish(); }
  SignalsBeforeServing(const SignalsBeforeServing&) = delete;
  SignalsBeforeServing& operator=(const SignalsBeforeServing&) = delete;

  // The start enters step `what` ("checking the flags' files", ...). `bounded`: no port is open
  // during it, and it is given up on kStepGrace after a signal; a step during which a port
  // opens is not (a forced exit would drop what the port accepted): a second signal ends it.
  void Step(std::string what, bool bounded);
  // The start enters the models' loads: a signal calls `stop` (at once, if one came already).
  void Loading(std::function<void()> stop);
  // The signal that asked the start to stop (SIGINT or SIGTERM); 0 while none did.
  int stop_signal() const { return signal_.load(); }
  // Stops watching (joins the thread).
  void Finish();

 private:
  void Watch(sigset_t signals);

  std::mutex mu_;
  std::string step_;                             // guarded by mu_
  bool loading_ = false;                         // guarded by mu_
  bool bounded_ = false;                         // guarded by mu_
  std::function<void()> stop_;                   // guarded by mu_
  std::chrono::steady_clock::time_point asked_;  // guarded by mu_: when the signal came
  std::atomic<bool> done_{false};
  std::atomic<int> signal_{0};
  std::thread thread_;  // last: it reads the members above from its first instruction
};

}  // namespace harrier
