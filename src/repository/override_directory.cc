#include "repository/override_directory.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string_view>

#include "repository/repository_scan.h"

namespace harrier {

namespace {

constexpr size_t kMaxPathBytes = 1024;
constexpr size_t kMaxSegmentBytes = 255;  // NAME_MAX: a longer name cannot be created
constexpr std::string_view kDirectoryPrefix = "harrier-override-";

std::string ParentOrTmp(const std::string& parent) {
  if (!parent.empty()) return parent;
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir != nullptr && tmpdir[0] != '\0' ? tmpdir : "/tmp";
}

// The <pid> of "harrier-override-<pid>-XXXXXX", or -1 when `name` is not such a name.
pid_t PidInName(std::string_view name) {
  if (!name.starts_with(kDirectoryPrefix)) return -1;
  name.remove_prefix(kDirectoryPrefix.size());
  const size_t dash = name.find('-');
  if (dash == 0 || dash == std::string_view::npos || name.size() - dash - 1 != 6) return -1;
  pid_t pid = 0;
  for (char c : name.substr(0, dash)) {
    if (c < '0' || c > '9' || pid > 100'000'000) return -1;
    pid = pid * 10 + (c - '0');
  }
  return pid;
}

std::string ErrnoText(int error) {
  return std::strerror(error);
}

Status PathError(const std::string& path, std::string_view rule) {
  // The path as given, cut short: it comes from the client and goes back into a log line.
  // Triton's words first ("Invalid file path"), which its model-control example matches.
  return InvalidArgument("Invalid file path: file override 'file:" + path.substr(0, 128) +
                         "': " + std::string(rule));
}

// The segments of `path` split on '/', or an error naming the rule it breaks.
StatusOr<std::vector<std::string_view>> Segments(const std::string& path) {
  if (path.empty()) return PathError(path, "the path is empty (expected <version>/<file>)");
  if (path.size() > kMaxPathBytes) return PathError(path, "the path is longer than 1024 bytes");
  if (path.find('\0') != std::string::npos) return PathError(path, "the path holds a NUL byte");
  if (path.front() == '/') return PathError(path, "absolute paths are refused");
  std::vector<std::string_view> segments;
  std::string_view rest = path;
  for (;;) {
    const size_t slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    if (segment.empty()) return PathError(path, "empty path segments are refused");
    if (segment == "." || segment == "..")
      return PathError(path, "'.' and '..' segments are refused");
    if (segment.size() > kMaxSegmentBytes)
      return PathError(path, "a path segment is longer than 255 bytes (NAME_MAX)");
    segments.push_back(segment);
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  if (segments.size() == 1) {  // a file at the model's top level, beside its versions
    if (ParseVersionDirectoryName(segments.front()) > 0)
      return PathError(path, "a version number names a directory: expected <version>/<file>");
    if (segments.front() == "config.pbtxt")
      return PathError(path, "the config comes as parameters.config, not as a file");
    return segments;
  }
  if (ParseVersionDirectoryName(segments.front()) <= 0)
    return PathError(path,
                     "the first segment must be a version number (1, 2, ...; no leading zero)");
  return segments;
}

// A failure to write the overrides: the client reads the file's name as it gave it
// ('file:1/model.onnx') and why; the server's own path is for its log only (probe 68: a full
// disk's error showed the client the temporary directory).
Status WriteFailure(std::string_view what, std::string_view given, const std::string& path,
                    int error) {
  spdlog::error("file overrides: {} {}: {}", what, path, ErrnoText(error));
  return Internal(std::string(what) + " 'file:" + std::string(given) + "': " + ErrnoText(error));
}

// Writes `content` to a new file `path` (which must not exist), mode 0600; `given` is its name
// in the request.
Status WriteNewFile(const std::string& path, std::string_view given, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return WriteFailure("cannot create", given, path, errno);
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return WriteFailure("cannot write", given, path, error);
    }
    written += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return WriteFailure("cannot write", given, path, errno);
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<int64_t>> ValidateFileOverrides(const std::vector<ModelFileOverride>& files,
                                                     bool has_config) {
  if (files.empty()) return std::vector<int64_t>();
  if (!has_config) {
    return InvalidArgument(
        "file overrides ('file:" + files.front().path.substr(0, 128) +
        "') need the model's config in the same request: parameters.config must be given with "
        "'file:' parameters");
  }
  if (files.size() > kMaxFileOverrides) {
    return InvalidArgument("a load request may carry at most " + std::to_string(kMaxFileOverrides) +
                           " file overrides, this one has " + std::to_string(files.size()));
  }
  std::set<std::string> paths;
  std::set<std::string> directories;  // every proper prefix of a path, e.g. "1", "1/sub"
  std::set<int64_t> versions;
  for (const ModelFileOverride& file : files) {
    ASSIGN_OR_RETURN(std::vector<std::string_view> segments, Segments(file.path));
    if (!paths.insert(file.path).second) return PathError(file.path, "the path is given twice");
    if (segments.size() > 1) versions.insert(ParseVersionDirectoryName(segments.front()));
    std::string prefix;
    for (size_t i = 0; i + 1 < segments.size(); ++i) {
      if (i > 0) prefix += '/';
      prefix += segments[i];
      directories.insert(prefix);
    }
  }
  for (const std::string& path : paths) {
    if (directories.contains(path))
      return PathError(path, "the path is a file and also the directory of another file");
  }
  if (versions.empty()) {
    return PathError(files.front().path,
                     "the files name no version: at least one must be <version>/<file>, e.g. "
                     "'file:1/model.onnx'");
  }
  return std::vector<int64_t>(versions.begin(), versions.end());
}

StatusOr<std::unique_ptr<OverrideDirectory>> OverrideDirectory::Create(
    const std::string& parent, const std::vector<ModelFileOverride>& files) {
  ASSIGN_OR_RETURN(std::vector<int64_t> versions, ValidateFileOverrides(files, true));
  const std::string base = ParentOrTmp(parent);
  std::string pattern =
      base + "/" + std::string(kDirectoryPrefix) + std::to_string(::getpid()) + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {  // mode 0700
    const int error = errno;
    spdlog::error("file overrides: cannot make a directory under {}: {}", base, ErrnoText(error));
    return Internal(
        "cannot make a directory for the file overrides (the server's log says "
        "where): " +
        ErrnoText(error));
  }
  // Owned from here: any failure below removes what was written.
  std::unique_ptr<OverrideDirectory> dir(new OverrideDirectory(pattern, std::move(versions)));
  for (const ModelFileOverride& file : files) {
    // Validated above: relative, no '.' or '..', inside `pattern`. The directories are made
    // one segment at a time, each new or one this loop made.
    size_t slash = file.path.find('/');
    while (slash != std::string::npos) {
      const std::string sub = dir->path_ + "/" + file.path.substr(0, slash);
      if (::mkdir(sub.c_str(), 0700) != 0 && errno != EEXIST)
        return WriteFailure("cannot make", std::string_view(file.path).substr(0, slash), sub,
                            errno);
      slash = file.path.find('/', slash + 1);
    }
    RETURN_IF_ERROR(WriteNewFile(dir->path_ + "/" + file.path, file.path, file.content));
  }
  return dir;
}

int RemoveAbandonedOverrideDirectories(const std::string& parent,
                                       const std::function<bool(pid_t)>& alive) {
  const std::string base = ParentOrTmp(parent);
  auto exists = [&alive](pid_t pid) {
    if (alive) return alive(pid);
    return ::kill(pid, 0) == 0 || errno == EPERM;
  };
  std::error_code error;
  std::filesystem::directory_iterator it(base, error);
  if (error) return 0;  // no such parent yet: nothing was left there
  int removed = 0;
  for (const std::filesystem::directory_entry& entry : it) {
    const std::string name = entry.path().filename().string();
    const pid_t pid = PidInName(name);
    if (pid <= 0) continue;
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid())
      continue;
    if (pid != ::getpid() && exists(pid)) continue;
    std::filesystem::remove_all(entry.path(), error);  // does not follow symbolic links
    if (error) {
      spdlog::warn("cannot remove {}, left by a server (pid {}) no longer running: {}",
                   entry.path().string(), pid, error.message());
      continue;
    }
    spdlog::info("removed {}: file overrides left by a server (pid {}) no longer running",
                 entry.path().string(), pid);
    ++removed;
  }
  return removed;
}

OverrideDirectory::~OverrideDirectory() {
  std::error_code error;
  std::filesystem::remove_all(path_, error);  // does not follow symbolic links
  if (error) {
    spdlog::error("cannot remove the file overrides' directory {}: {}", path_, error.message());
  } else {
    spdlog::info("removed the file overrides' directory {}", path_);
  }
}

}  // namespace harrier
