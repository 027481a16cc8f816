// Crash reports: what a process killed by a fault says on its way out.
//
// InstallFatalSignalReport() sets a handler for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT
// that writes to stderr, with async-signal-safe calls only:
//
//   harrier: fatal signal 11 (SIGSEGV), code 1, address 0x10, thread 4242 (io-1)
//   harrier: backtrace (symbolize a +0x offset with: addr2line -f -C -i -e <binary> <offset>):
//   /usr/local/bin/harrier(+0x3c5a1f) [0x55d0c83c5a1f]
//   ...
//   harrier: end of backtrace
//
// then restores the default action and raises the signal again, so the exit status (and a core
// dump, where the system keeps them) is what it would have been without the report. The
// integration harness symbolizes the binary's frames with addr2line (tests/integration/harness.py).
//
// A fault that overflows a thread's stack leaves no room for the handler except on the main
// thread, which gets an alternate signal stack; on other threads the kernel's default action
// ends the process without a report. Under AddressSanitizer the install does nothing: its own
// report is better. Call once, early in main(), before any thread starts (threads inherit the
// handlers; the alternate stack is the main thread's only).
#pragma once

namespace harrier {

void InstallFatalSignalReport();

// The report's first line for `signal_number` etc., into `out` (at least 160 bytes); returns its
// length. Exposed for tests; async-signal-safe.
int FormatFatalSignalLine(char* out, int signal_number, int code, const void* address, long tid,
                          const char* thread_name);

}  // namespace harrier
