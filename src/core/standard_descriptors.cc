#include "core/standard_descriptors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace harrier {

int OpenClosedStandardDescriptors() {
  int opened = 0;
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // The lowest free number is `fd` itself: the ones below it are open by now.
    const int null = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (null != fd) {
      if (null >= 0) ::close(null);
      return -1;
    }
    ++opened;
  }
  return opened;
}

}  // namespace harrier
