// ThreadGovernor: how many of its threads a llama.cpp engine gives its next decode step.
//
// ggml's threads meet a busy-waiting barrier at every operation of a graph. When the machine
// has more runnable threads than cores (another process, a neighbour on a shared host), a
// preempted thread keeps every other one spinning at the next barrier for the rest of a
// scheduler time slice. On two cores with two busy processes beside it, the 134M-parameter
// test model generated 8-16 tokens/s with 2 threads against 22-26 with 1 (74 alone), and the
// tiny one 134-193 against about 1,000 (docs/benchmarks.md, "A busy machine", session 27). ComputeCores keeps the process's own pools from doing this to each other; this
// answers the rest of the machine.
//
// The signal is the share of the steps' wall time that the engine's own thread spent off its
// core (wall time minus its CPU time, which counts spinning). That thread is one of the step's
// threads, preempted as often as any, and reading its CPU clock costs one system call a step.
// The rule is TCP's: additive increase, multiplicative decrease.
//   - Steps are judged in windows of at least kWindow of their wall time.
//   - A window that spent more than kContendedShare off-core halves the count (at least 1).
//   - After kFirstTryAfter of windows that are not contended, one more thread is tried (up to
//     the configured count).
//   - A try whose first window is contended goes back to the count before it, and doubles the
//     wait before the next try (up to kLongestTryAfter); one that holds resets the wait. (Halving
//     there put 3 threads on 2 free cores back to 1, and the climb back to 2 reset the wait: the
//     failed count was tried again every few seconds for good; probe 37.)
//   - With one thread, a contended window restarts the wait: the machine is busy, and a try
//     would only cost a slow window.
// A pure function of the samples it is given, so its policy is a table test
// (tests/backends/llamacpp/thread_governor_test.cc). Not thread-safe: the engine thread's own.
#pragma once

#include <chrono>

namespace harrier {

class ThreadGovernor {
 public:
  using Duration = std::chrono::nanoseconds;
  using TimePoint = std::chrono::steady_clock::time_point;

  static constexpr Duration kWindow = std::chrono::milliseconds(25);
  static constexpr double kContendedShare = 0.2;
  static constexpr Duration kFirstTryAfter = std::chrono::seconds(1);
  static constexpr Duration kLongestTryAfter = std::chrono::seconds(16);

  // At most `most` threads (at least 1), all of them to begin with; `now` starts the first wait.
  ThreadGovernor(int most, TimePoint now);

  // The threads for a step starting at `now`. After an idle spell longer than kLongestTryAfter
  // the count starts again from the most: what the machine did before the spell says nothing
  // of it now (a contended first window halves at once anyway), and a model idle after a busy
  // spell stayed at its reduced count, then climbed one thread a second (probe 37).
  int StepThreads(TimePoint now);
  // The count of the last step (the gauge's).
  int threads() const { return threads_; }
  // How many times the count was lowered (for the tests).
  int decreases() const { return decreases_; }

  // A step run with threads() threads ended at `now`, after `wall`, of which the engine's
  // thread spent `cpu` on a core.
  void Record(Duration wall, Duration cpu, TimePoint now);

  // The calling thread's CPU time so far (CLOCK_THREAD_CPUTIME_ID), for Record's `cpu`.
  static Duration ThreadCpuTime();

 private:
  void Judge(bool contended, TimePoint now);

  int most_;
  int threads_;
  int decreases_ = 0;
  Duration window_wall_{0};
  Duration window_off_{0};
  bool trying_ = false;  // the window under way is the first after a try
  Duration try_after_ = kFirstTryAfter;
  TimePoint calm_since_;  // the wait before the next try counts from here
  TimePoint last_step_;   // when the last recorded step ended
};

}  // namespace harrier
