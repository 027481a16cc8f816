#include "core/standard_descriptors.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <string>

namespace harrier {
namespace {

std::string Target(int fd) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), buf, sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// In a child: the test process's own descriptors stay as they are. The child's exit status
// says what went wrong (0: all well).
TEST(StandardDescriptorsTest, ClosedOnesPointAtDevNullAndOpenOnesAreLeftAlone) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string err_before = Target(2);
    ::close(0);
    ::close(1);
    if (OpenClosedStandardDescriptors() != 2) ::_exit(1);
    if (Target(0) != "/dev/null" || Target(1) != "/dev/null") ::_exit(2);
    if (Target(2) != err_before) ::_exit(3);  // stderr was open: untouched
    // The next descriptor opened is no longer one of the three.
    const int next = ::open("/dev/null", O_RDONLY);
    if (next <= 2) ::_exit(4);
    if (OpenClosedStandardDescriptors() != 0) ::_exit(5);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace harrier
