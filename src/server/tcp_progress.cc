#include "server/tcp_progress.h"

// linux/tcp.h's tcp_info has tcpi_bytes_acked, which glibc's netinet/tcp.h lacks; the two
// cannot be included together, so this file includes only the kernel's.
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>

namespace harrier::server_internal {

std::optional<uint64_t> BytesAcked(int fd) {
  tcp_info info{};
  socklen_t size = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) != 0) return std::nullopt;
  // A kernel older than the field fills less of the struct.
  if (size < offsetof(tcp_info, tcpi_bytes_acked) + sizeof(info.tcpi_bytes_acked))
    return std::nullopt;
  return info.tcpi_bytes_acked;
}

}  // namespace harrier::server_internal
