#include "core/fatal_signal.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>
#include <string>

#include "core/sanitizers.h"

namespace harrier {
namespace {

TEST(FatalSignalTest, FirstLineNamesSignalCodeAddressAndThread) {
  char line[160];
  int n =
      FormatFatalSignalLine(line, SIGSEGV, 1, reinterpret_cast<const void*>(0x10), 4242, "io-1");
  EXPECT_EQ(std::string(line, n),
            "harrier: fatal signal 11 (SIGSEGV), code 1, address 0x10, thread 4242 (io-1)\n");
  n = FormatFatalSignalLine(line, SIGABRT, -6, nullptr, 7, "");
  EXPECT_EQ(std::string(line, n),
            "harrier: fatal signal 6 (SIGABRT), code -6, address 0x0, thread 7 ()\n");
}

TEST(FatalSignalTest, FirstLineStaysInsideItsBuffer) {
  char line[161];
  line[160] = 'x';
  const std::string long_name(400, 'n');
  const int n = FormatFatalSignalLine(line, SIGBUS, 2, nullptr, 1, long_name.c_str());
  EXPECT_EQ(n, 160);
  EXPECT_EQ(line[160], 'x');
}

// Read through a volatile, so that the compiler cannot see the address it writes to.
volatile uintptr_t g_fault_address = 0x10;

void FaultAt0x10() {
  InstallFatalSignalReport();
  *reinterpret_cast<volatile int*>(g_fault_address) = 1;
}

TEST(FatalSignalDeathTest, AFaultIsReportedWithABacktraceAndStillEndsTheProcess) {
  if (kUnderAddressSanitizer) GTEST_SKIP() << "AddressSanitizer reports faults itself";
  EXPECT_EXIT(FaultAt0x10(), ::testing::KilledBySignal(SIGSEGV),
              "harrier: fatal signal 11 \\(SIGSEGV\\), code 1, address 0x10, thread [0-9]+ "
              "\\([^)]*\\)\nharrier: backtrace .*\\(\\+0x[0-9a-f]+\\).*harrier: end of backtrace");
}

TEST(FatalSignalDeathTest, AnAbortIsReportedAndEndsTheProcessWithSIGABRT) {
  if (kUnderAddressSanitizer) GTEST_SKIP() << "AddressSanitizer reports faults itself";
  EXPECT_EXIT(
      {
        InstallFatalSignalReport();
        std::abort();
      },
      ::testing::KilledBySignal(SIGABRT),
      "harrier: fatal signal 6 \\(SIGABRT\\).*harrier: end of backtrace");
}

}  // namespace
}  // namespace harrier
