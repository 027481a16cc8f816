#include "observability/log_writer_thread.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <utility>

namespace harrier {
namespace {

constexpr int kInterruptSignal = SIGUSR2;

void Interrupted(int) {}  // its only effect: the blocked write(2) returns EINTR

void InstallInterruptHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_handler = Interrupted;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: the interrupted write returns
    sigaction(kInterruptSignal, &action, nullptr);
  });
}

}  // namespace

void LogWriterThread::Start(std::function<void()> loop) {
  InstallInterruptHandler();
  thread_ = std::thread([this, loop = std::move(loop)] {
    loop();
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_ = true;
    }
    finished_cv_.notify_all();
  });
}

LogWriterThread::~LogWriterThread() {
  Join(std::chrono::milliseconds(0));
}

size_t LogWriterThread::Write(int fd, std::string_view text, bool regular_file) {
  constexpr size_t kPipeBuf = 4096;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.size();
    if (!regular_file && end - start > kPipeBuf) {
      size_t cut = text.rfind('\n', start + kPipeBuf - 1);
      if (cut == std::string_view::npos || cut < start) cut = text.find('\n', start);  // long
      end = cut == std::string_view::npos ? text.size() : cut + 1;
    }
    while (start < end) {
      if (abandoned()) {
        errno = ETIMEDOUT;
        return start;
      }
      const ssize_t n = ::write(fd, text.data() + start, end - start);
      if (n < 0 && errno == EINTR) continue;  // abandoned, or another signal: see above
      if (n <= 0) return start;
      start += static_cast<size_t>(n);
    }
  }
  return start;
}

bool LogWriterThread::Join(std::chrono::milliseconds grace) {
  if (!thread_.joinable()) return !abandoned();
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!finished_cv_.wait_for(lock, grace, [this] { return finished_; })) {
      abandon_.store(true, std::memory_order_relaxed);
      // Repeated: a signal that lands just before the thread enters write(2) interrupts nothing.
      // The thread is not joined yet, so its id stays valid after it returns.
      while (!finished_) {
        pthread_kill(thread_.native_handle(), kInterruptSignal);
        finished_cv_.wait_for(lock, std::chrono::milliseconds(10), [this] { return finished_; });
      }
    }
  }
  thread_.join();
  return !abandoned();
}

}  // namespace harrier
