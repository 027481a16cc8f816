// A process started with stdin, stdout or stderr closed (`harrier serve >&- 2>&-`, a service
// manager that closes them) would hand those numbers to the next files and sockets it opens:
// the server log, which writes to descriptor 2, would then go into an epoll descriptor, a
// client's socket or the access log (probe 68 saw an eventfd and an epoll descriptor take 1
// and 2). OpenClosedStandardDescriptors() points each closed one of the three at /dev/null, as
// daemons do. Call it first in main(), before anything opens a descriptor.
#pragma once

namespace harrier {

// The number of descriptors (0, 1, 2) it opened on /dev/null; -1 if one could not be opened.
int OpenClosedStandardDescriptors();

}  // namespace harrier
