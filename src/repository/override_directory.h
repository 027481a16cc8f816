// The files of a load request's file overrides (Triton's "file:<version>/<name>" parameters),
// checked, then written into a private temporary model directory that lives as long as the
// versions loaded from it (docs/model-lifecycle.md, "File overrides").
//
//   <parent>/harrier-override-<pid>-XXXXXX/          mkdtemp(3), mode 0700
//   <parent>/harrier-override-<pid>-XXXXXX/1/model.onnx   each file 0600, directories 0700
//
// <pid> is the server's process id: a directory left behind by a server that did not get to
// remove it (killed, crashed) is found by the next start and removed
// (RemoveAbandonedOverrideDirectories).
//
// <parent> is $TMPDIR when set, else /tmp (or the one the caller names). The server writes
// nothing else: every file is created new (O_EXCL, O_NOFOLLOW) inside the directory it just
// made, and a path that could leave it is refused before anything is written.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harrier/model_file_override.h"
#include "harrier/status.h"

namespace harrier {

// The most files one load request may carry. Their total size is bounded by the request's own
// limit: --max-body-bytes, for REST and gRPC alike (base64 makes REST's files 3/4 of it).
inline constexpr size_t kMaxFileOverrides = 64;

// Checks a load request's file overrides, changing nothing. kInvalidArgument, naming the rule
// and the path: files without `has_config` (Triton's rule: a model loaded from files needs its
// config in the request), more than kMaxFileOverrides files, a path that is neither
// "<version>/<name>[/<name>...]" with a version directory name as the repository scan reads it
// (a positive decimal number without a leading zero) nor one top-level "<name>" (a labels file,
// say; not a version number, not config.pbtxt), files that name no version, an absolute path,
// an empty, "." or ".." segment, a NUL byte, a path longer than 1024 bytes, the same path
// twice, or a path that is a directory of another. Returns the version numbers the files name,
// ascending, distinct.
StatusOr<std::vector<int64_t>> ValidateFileOverrides(const std::vector<ModelFileOverride>& files,
                                                     bool has_config);

// Removes the override directories under `parent` ($TMPDIR, else /tmp, when empty) that servers
// no longer running left behind: directories (not symbolic links) named
// harrier-override-<pid>-XXXXXX, owned by this process's user, whose <pid> is not `alive` or is
// this process's own (a server at start has made none yet: one with its own id comes from an
// earlier server that had the same id, as in a container restarted with the same /tmp). Call
// it before the first Create(). Logs and returns how many it removed; errors are logged and
// skipped. `alive` defaults to kill(pid, 0) (a process that exists, even another user's).
int RemoveAbandonedOverrideDirectories(const std::string& parent,
                                       const std::function<bool(pid_t)>& alive = {});

// A temporary model directory holding a load request's files; removed, with everything in it,
// when the object is destroyed. Not copyable. Thread safety: const methods from any thread.
class OverrideDirectory {
 public:
  // Makes the directory under `parent` ($TMPDIR, else /tmp, when empty) and writes `files`
  // into it. Errors: what ValidateFileOverrides() refuses (kInvalidArgument), kInternal when
  // the directory or a file cannot be made or written (nothing is left behind then).
  static StatusOr<std::unique_ptr<OverrideDirectory>> Create(
      const std::string& parent, const std::vector<ModelFileOverride>& files);
  ~OverrideDirectory();
  OverrideDirectory(const OverrideDirectory&) = delete;
  OverrideDirectory& operator=(const OverrideDirectory&) = delete;

  // The directory: a model directory as the loader reads it (<path>/<version>/<file>).
  const std::string& path() const { return path_; }
  // The version numbers the files name, ascending.
  const std::vector<int64_t>& versions() const { return versions_; }

 private:
  OverrideDirectory(std::string path, std::vector<int64_t> versions)
      : path_(std::move(path)), versions_(std::move(versions)) {}

  const std::string path_;
  const std::vector<int64_t> versions_;
};

}  // namespace harrier
