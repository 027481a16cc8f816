// How far a TCP peer has read what was sent to it: the bytes it acknowledged (TCP_INFO's
// tcpi_bytes_acked, Linux 4.1+). The write timeouts ask it before closing a connection whose
// write has not completed for the timeout: a client that reads slowly but steadily keeps
// acknowledging, while the kernel wakes a blocked writer only once about half of its send
// buffer (up to 4 MiB, autotuned) has drained, which at 20 KB/s takes longer than the timeout
// (probe 33: such a client could not download more than about 600 KB).
//
// Thread safety: a system call on the descriptor; any thread.
#pragma once

#include <cstdint>
#include <optional>

namespace harrier::server_internal {

// The bytes the peer of TCP socket `fd` has acknowledged; nullopt when the kernel cannot say
// (not a TCP socket, an old kernel).
std::optional<uint64_t> BytesAcked(int fd);

}  // namespace harrier::server_internal
