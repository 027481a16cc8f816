#include "cli/stop_signals.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>

#include "harrier/clock.h"

namespace harrier {
namespace {

const char* SignalName(int signal_number) {
  return signal_number == SIGINT ? "SIGINT" : "SIGTERM";
}

}  // namespace

sigset_t BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  // A log file at the file-size limit (ulimit -f, systemd's LimitFSIZE=) ended the process at
  // once (probe 52); ignored, the write fails with EFBIG and its lines are dropped and counted.
  std::signal(SIGXFSZ, SIG_IGN);
  // It ended the process at once (no drain); the access log follows a rotation by itself
  // (AsyncAccessLog reopens a moved file).
  std::signal(SIGHUP, SIG_IGN);
  return set;
}

void AwaitStop(const sigset_t& signals, const ServeFlags& flags, ShutdownTimeline* timeline) {
  for (;;) {
    int signal_number = 0;
    ShutdownTimeline::Action action;
    if (timeline->phase() == ShutdownTimeline::Phase::kServing) {
      sigwait(&signals, &signal_number);
      action = timeline->OnSignal(SteadyClock().Now());
    } else {
      const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
          timeline->DelayLeft(SteadyClock().Now()));
      timespec wait{static_cast<time_t>(left.count() / 1'000'000'000),
                    static_cast<long>(left.count() % 1'000'000'000)};
      signal_number = sigtimedwait(&signals, nullptr, &wait);
      if (signal_number < 0 && errno != EAGAIN) continue;  // EINTR: wait for the rest
      action = signal_number > 0 ? timeline->OnSignal(SteadyClock().Now())
                                 : timeline->OnTime(SteadyClock().Now());
    }
    if (action == ShutdownTimeline::Action::kDrain) {
      spdlog::info(
          "received {}; readiness off, still serving for {} s (--shutdown-delay-secs), then "
          "finishing in-flight requests (at most {} s) and exiting",
          SignalName(signal_number), flags.shutdown_delay_secs, flags.exit_timeout_secs);
    } else if (action == ShutdownTimeline::Action::kStop) {
      if (signal_number <= 0) {
        spdlog::info(
            "shutdown delay over; finishing in-flight requests (at most {} s), then "
            "exiting",
            flags.exit_timeout_secs);
      } else if (timeline->delay() > Clock::duration::zero()) {
        spdlog::info(
            "second signal ({}): skipping the rest of the shutdown delay; finishing "
            "in-flight requests (at most {} s), then exiting",
            SignalName(signal_number), flags.exit_timeout_secs);
      } else {
        spdlog::info("received {}; finishing in-flight requests (at most {} s), then exiting",
                     SignalName(signal_number), flags.exit_timeout_secs);
      }
      break;
    }
  }
  // Once stopping, a further signal means "now" (the timeline's kExitNow): do not wait for the
  // drain. The thread does not ask the timeline, which the caller destroys before the process
  // ends.
  std::thread([signals] {
    int again = 0;
    sigwait(&signals, &again);
    spdlog::warn("another signal: exiting without waiting for in-flight requests");
    spdlog::default_logger()->flush();  // the line above, written (at most 1 s): no destructors
    std::_Exit(1);
  }).detach();
}

SignalsBeforeServing::SignalsBeforeServing(const sigset_t& signals)
    : thread_([this, signals] { Watch(signals); }) {}

void SignalsBeforeServing::Step(std::string what, bool bounded) {
  std::lock_guard lock(mu_);
  step_ = std::move(what);
  bounded_ = bounded;
  loading_ = false;
  stop_ = nullptr;
}

void SignalsBeforeServing::Loading(std::function<void()> stop) {
  {
    std::lock_guard lock(mu_);
    step_ = "loading the models";
    bounded_ = false;
    loading_ = true;
    stop_ = stop;
  }
  // A signal that came just before: the loads stop too.
  if (signal_.load() != 0) stop();
}

void SignalsBeforeServing::Watch(sigset_t signals) {
  while (!done_.load()) {
    timespec tick{0, 100'000'000};
    const int signal_number = sigtimedwait(&signals, nullptr, &tick);
    std::unique_lock lock(mu_);
    if (signal_number <= 0) {
      // A bounded step (no port open) still running kStepGrace after the signal is blocked.
      if (signal_.load() != 0 && bounded_ &&
          std::chrono::steady_clock::now() - asked_ >= kStepGrace) {
        spdlog::warn(
            "the start is still {} {} s after {}: blocked (on a file that does not open, such "
            "as a FIFO that no one writes?); exiting, since nothing serves yet",
            step_, kStepGrace.count(), SignalName(signal_.load()));
        spdlog::default_logger()->flush();
        std::_Exit(0);
      }
      continue;
    }
    if (signal_.exchange(signal_number) != 0) {
      spdlog::warn("another signal: exiting without waiting for the start to stop");
      spdlog::default_logger()->flush();
      std::_Exit(1);
    }
    asked_ = std::chrono::steady_clock::now();
    if (loading_) {
      spdlog::info(
          "received {} while the models load: skipping the loads not begun, finishing the one "
          "in progress, then exiting",
          SignalName(signal_number));
      std::function<void()> stop = stop_;
      lock.unlock();
      if (stop) stop();
    } else {
      spdlog::info("received {} while {}: stopping once that is done", SignalName(signal_number),
                   step_);
    }
  }
}

void SignalsBeforeServing::Finish() {
  done_ = true;
  if (thread_.joinable()) thread_.join();
}

}  // namespace harrier
