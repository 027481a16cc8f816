#include "core/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace harrier {

StatusOr<std::string> ReadRegularFile(const std::string& path, std::size_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return NotFound("no such file '" + path + "'");
    return Internal("cannot inspect '" + path + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "a device";
    return InvalidArgument("'" + path + "' is not a file (it is " + what + ")");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Internal("cannot open '" + path + "': " + std::strerror(errno));
  std::string content;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      content.append(buf, static_cast<size_t>(n));
      if (content.size() > max_bytes) {
        ::close(fd);
        return InvalidArgument("'" + path + "' is over " + std::to_string(max_bytes) +
                               " bytes, the most a file read whole may have");
      }
      continue;
    }
    if (n == 0) break;
    if (errno == EINTR) continue;
    const int error = errno;
    ::close(fd);
    return InvalidArgument("cannot read '" + path + "': " +
                           (error == EAGAIN ? std::string("it would block (not a plain file)")
                                            : std::string(std::strerror(error))));
  }
  ::close(fd);
  return content;
}

}  // namespace harrier
