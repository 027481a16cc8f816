// Reading a small file whole, safely: the model repository's configs and label files, and the
// API key file. Whoever names the file may name anything -- a FIFO, /dev/zero, a proc file that
// never ends, a kernel file that blocks -- and each of those once hung or filled the process.
//
// Thread safety: a free function; call from any thread.
#pragma once

#include <cstddef>
#include <string>

#include "harrier/status.h"

namespace harrier {

// The whole of the regular file at `path` (links followed), at most `max_bytes`. POSIX reads
// with O_NONBLOCK, not an ifstream: a read error (a link to /proc/self/pagemap) threw from
// istreambuf_iterator and ended the process; a kernel file that looks regular but blocks
// (tracefs' trace_pipe) hung its reader forever; a proc file can be endless (probe 29).
// Errors: kNotFound when nothing is there; kInvalidArgument when it is not a regular file
// (naming what it is), is over `max_bytes`, or cannot be read (a read error, one that would
// block); kInternal when it cannot be inspected or opened.
StatusOr<std::string> ReadRegularFile(const std::string& path, std::size_t max_bytes);

}  // namespace harrier
