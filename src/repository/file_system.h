// FileSystem: the few file operations the model repository needs, behind an interface so that
// tests can inject faults (an unreadable directory, a file that vanishes) without touching the
// real disk. LocalFileSystem() is the real one, over std::filesystem.
//
// Thread safety: implementations are stateless or internally synchronized; every method may be
// called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harrier/status.h"

namespace harrier {

enum class FileType {
  kNotFound,   // nothing at that path
  kRegular,    // a regular file (symlinks are followed)
  kDirectory,  // a directory (symlinks are followed)
  kOther,      // a socket, device, fifo, ...
};

struct DirectoryEntry {
  std::string name;  // the entry's name, not its full path
  FileType type = FileType::kNotFound;
  // Not OK when the entry's type could not be found out, `type` being kOther then: a symbolic
  // link loop (ELOOP), or a link target that cannot be inspected (permission denied). A
  // dangling symbolic link is not an error: its type is kNotFound.
  Status error;
  // A regular file's size and last modification (nanoseconds since the epoch, of the link's
  // target); zero for anything else. For noticing that a model's files changed.
  uint64_t size_bytes = 0;
  int64_t modified_ns = 0;
  // Who may read a regular file or a directory (of the link's target): AccessStamp; zero for
  // anything else.
  uint64_t access = 0;
};

// Fills `entry`'s size, modification time and access from `path` (following links) for a
// regular file or a directory (`entry->type`); false when `path` cannot be inspected. `access`
// is a digest of who may read it: permission bits, owner, group and POSIX ACL. A chmod, chown or
// setfacl that repairs a failed load changes neither size nor modification time (probes 68 and
// 71); the status change time would, but also changes with a hard link or a chmod to the same
// mode, each a needless reload of a serving model.
bool StampEntry(const std::string& path, DirectoryEntry* entry);

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // What is at `path`. kNotFound is a value, not an error. Errors: kInternal when the path
  // cannot be inspected (permission denied on a parent, I/O error), naming the path.
  virtual StatusOr<FileType> GetFileType(const std::string& path) const = 0;

  // The entries of a directory, in no particular order. Errors: kNotFound when `path` does not
  // exist, kInvalidArgument when it is not a directory, kInternal when it cannot be read. An
  // entry that cannot be inspected is listed with its own `error` (kInternal, naming its path).
  virtual StatusOr<std::vector<DirectoryEntry>> ListDirectory(const std::string& path) const = 0;

  // The whole content of a file (a config, a labels file: at most kMaxReadFileBytes). Errors:
  // kNotFound when it does not exist; kInvalidArgument when it is not a regular file, is over
  // the bound, or cannot be read (a read error, one that would block); kInternal when it cannot
  // be opened.
  virtual StatusOr<std::string> ReadFile(const std::string& path) const = 0;
};

inline constexpr size_t kMaxReadFileBytes = size_t{64} << 20;

// The file `relative` names under `dir`, links followed, when it is inside `dir` too: a labels
// or warm-up data file whose name stays inside (config_validation's check) can still be a link
// to anywhere, and a labels.txt linked to /etc/shadow sent it to clients (probe 29). Errors:
// kInvalidArgument when it resolves outside `dir`, or cannot be resolved (missing, a loop).
StatusOr<std::string> ResolveInside(const std::string& dir, const std::string& relative);

// The real file system. The returned object lives for the whole process.
const FileSystem& LocalFileSystem();

}  // namespace harrier
