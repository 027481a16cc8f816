#include "core/fatal_signal.h"

#include <execinfo.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>

#include "core/sanitizers.h"

namespace harrier {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kMaxFrames = 64;

const char* SignalName(int signal_number) {
  switch (signal_number) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    default: return "signal";
  }
}

// A bounded writer into a caller's buffer; snprintf is not async-signal-safe.
class LineWriter {
 public:
  LineWriter(char* out, int capacity) : out_(out), capacity_(capacity) {}
  LineWriter& Text(const char* s) {
    while (*s != '\0' && length_ < capacity_) out_[length_++] = *s++;
    return *this;
  }
  LineWriter& Decimal(long value) {
    char digits[24];
    int n = 0;
    unsigned long magnitude = value < 0 ? 0UL - static_cast<unsigned long>(value) : value;
    do {
      digits[n++] = static_cast<char>('0' + magnitude % 10);
      magnitude /= 10;
    } while (magnitude != 0);
    if (value < 0) digits[n++] = '-';
    while (n > 0 && length_ < capacity_) out_[length_++] = digits[--n];
    return *this;
  }
  LineWriter& Hex(uintptr_t value) {
    Text("0x");
    char digits[2 * sizeof(uintptr_t)];
    int n = 0;
    do {
      digits[n++] = "0123456789abcdef"[value & 0xf];
      value >>= 4;
    } while (value != 0);
    while (n > 0 && length_ < capacity_) out_[length_++] = digits[--n];
    return *this;
  }
  int length() const { return length_; }

 private:
  char* out_;
  int capacity_;
  int length_ = 0;
};

void WriteAll(const char* data, size_t length) {
  while (length > 0) {
    ssize_t n = write(STDERR_FILENO, data, length);
    if (n <= 0) return;
    data += n;
    length -= static_cast<size_t>(n);
  }
}

void WriteText(const char* text) {
  WriteAll(text, strlen(text));
}

void OnFatalSignal(int signal_number, siginfo_t* info, void*) {
  const int saved_errno = errno;
  char name[17] = {};
  prctl(PR_GET_NAME, name);
  char line[256];
  const int length =
      FormatFatalSignalLine(line, signal_number, info != nullptr ? info->si_code : 0,
                            info != nullptr ? info->si_addr : nullptr, syscall(SYS_gettid), name);
  WriteAll(line, static_cast<size_t>(length));
  WriteText(
      "harrier: backtrace (symbolize a +0x offset with: addr2line -f -C -i -e <binary> "
      "<offset>):\n");
  void* frames[kMaxFrames];
  const int count = backtrace(frames, kMaxFrames);
  backtrace_symbols_fd(frames, count, STDERR_FILENO);
  WriteText("harrier: end of backtrace\n");
  // SA_RESETHAND put the default action back; the signal raised here is delivered when the
  // handler returns (it is blocked until then), so the process ends as it would have.
  errno = saved_errno;
  raise(signal_number);
}

}  // namespace

int FormatFatalSignalLine(char* out, int signal_number, int code, const void* address, long tid,
                          const char* thread_name) {
  LineWriter w(out, 160);
  w.Text("harrier: fatal signal ")
      .Decimal(signal_number)
      .Text(" (")
      .Text(SignalName(signal_number))
      .Text("), code ")
      .Decimal(code)
      .Text(", address ")
      .Hex(reinterpret_cast<uintptr_t>(address))
      .Text(", thread ")
      .Decimal(tid)
      .Text(" (")
      .Text(thread_name)
      .Text(")\n");
  return w.length();
}

void InstallFatalSignalReport() {
  if (kUnderAddressSanitizer) return;
  // The first backtrace() loads libgcc's unwinder, which allocates: not in the handler.
  void* warm[1];
  backtrace(warm, 1);
  static char alternate_stack[64 * 1024];
  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof(alternate_stack);
  sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_sigaction = OnFatalSignal;
  action.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int signal_number : kSignals) sigaction(signal_number, &action, nullptr);
}

}  // namespace harrier
