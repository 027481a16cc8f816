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

SignalsWhileLoading::SignalsWhileLoading(const sigset_t& signals, std::function<void()> stop)
    : thread_([this, signals, stop = std::move(stop)] {
        while (!done_.load()) {
          timespec tick{0, 100'000'000};
          const int signal_number = sigtimedwait(&signals, nullptr, &tick);
          if (signal_number <= 0) continue;
          if (signal_.exchange(signal_number) != 0) {
            spdlog::warn("another signal: exiting without waiting for the load in progress");
            spdlog::default_logger()->flush();
            std::_Exit(1);
          }
          spdlog::info(
              "received {} while the models load: skipping the loads not begun, finishing "
              "the one in progress, then exiting",
              SignalName(signal_number));
          stop();
        }
      }) {}

bool SignalsWhileLoading::Finish() {
  done_ = true;
  if (thread_.joinable()) thread_.join();
  return signal_.load() != 0;
}

}  // namespace harrier
