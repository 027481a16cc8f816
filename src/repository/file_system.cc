#include "repository/file_system.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "core/file_read.h"

namespace harrier {
namespace {

namespace fs = std::filesystem;

FileType ToFileType(const fs::file_status& status) {
  switch (status.type()) {
    case fs::file_type::not_found: return FileType::kNotFound;
    case fs::file_type::regular: return FileType::kRegular;
    case fs::file_type::directory: return FileType::kDirectory;
    default: return FileType::kOther;
  }
}

Status IoError(std::string_view what, const std::string& path, const std::error_code& ec) {
  std::string message = std::string(what) + " '" + path + "': " + ec.message();
  // Too many levels of symbolic links: almost always links that point at each other.
  if (ec == std::errc::too_many_symbolic_link_levels) message += " (a symbolic link loop)";
  return Internal(std::move(message));
}

class LocalFileSystemImpl final : public FileSystem {
 public:
  StatusOr<FileType> GetFileType(const std::string& path) const override {
    std::error_code ec;
    fs::file_status status = fs::status(path, ec);  // follows symlinks
    if (ec && status.type() != fs::file_type::not_found) {
      return IoError("cannot inspect", path, ec);
    }
    return ToFileType(status);
  }

  StatusOr<std::vector<DirectoryEntry>> ListDirectory(const std::string& path) const override {
    StatusOr<FileType> type = GetFileType(path);
    if (!type.ok()) return type.status();
    if (*type == FileType::kNotFound) return NotFound("no such directory '" + path + "'");
    if (*type != FileType::kDirectory) return InvalidArgument("'" + path + "' is not a directory");

    std::error_code ec;
    fs::directory_iterator it(path, ec);
    if (ec) return IoError("cannot list", path, ec);
    std::vector<DirectoryEntry> entries;
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      std::error_code status_ec;
      // A dangling symlink reads as not_found; it is reported as such and callers skip it.
      fs::file_status status = it->status(status_ec);
      DirectoryEntry entry{it->path().filename().string(), ToFileType(status), Status::Ok()};
      if (status_ec && status.type() != fs::file_type::not_found) {
        entry.type = FileType::kOther;
        entry.error = IoError("cannot inspect", it->path().string(), status_ec);
      }
      if (entry.type == FileType::kRegular || entry.type == FileType::kDirectory)
        StampEntry(it->path().string(), &entry);
      entries.push_back(std::move(entry));
    }
    if (ec) return IoError("cannot list", path, ec);
    return entries;
  }

  StatusOr<std::string> ReadFile(const std::string& path) const override {
    StatusOr<FileType> type = GetFileType(path);
    if (!type.ok()) return type.status();
    if (*type == FileType::kNotFound) return NotFound("no such file '" + path + "'");
    if (*type != FileType::kRegular) return InvalidArgument("'" + path + "' is not a file");
    return ReadRegularFile(path, kMaxReadFileBytes);
  }
};

}  // namespace

namespace {

uint64_t AccessStamp(const std::string& path, const struct stat& st) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a
  auto add = [&hash](const void* bytes, size_t size) {
    for (size_t i = 0; i < size; ++i) {
      hash ^= static_cast<const unsigned char*>(bytes)[i];
      hash *= 1099511628211ull;
    }
  };
  const uint32_t ids[3] = {static_cast<uint32_t>(st.st_mode & 07777), st.st_uid, st.st_gid};
  add(ids, sizeof(ids));
  char acl[4096];
  const ssize_t n = ::getxattr(path.c_str(), "system.posix_acl_access", acl, sizeof(acl));
  if (n > 0) add(acl, static_cast<size_t>(n));
  return hash;
}

}  // namespace

bool StampEntry(const std::string& path, DirectoryEntry* entry) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  if (entry->type == FileType::kRegular) {
    entry->size_bytes = static_cast<uint64_t>(st.st_size);
    entry->modified_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  }
  entry->access = AccessStamp(path, st);
  return true;
}

StatusOr<std::string> ResolveInside(const std::string& dir, const std::string& relative) {
  std::error_code ec;
  const std::filesystem::path base = std::filesystem::canonical(dir, ec);
  if (ec) return InvalidArgument(ec.message());
  const std::filesystem::path file = std::filesystem::canonical(base / relative, ec);
  if (ec) return InvalidArgument(ec.message());
  const auto [outside, rest] = std::mismatch(base.begin(), base.end(), file.begin(), file.end());
  if (outside != base.end()) {
    return InvalidArgument("the file is outside the model's directory (a link?)");
  }
  return file.string();
}

const FileSystem& LocalFileSystem() {
  static const LocalFileSystemImpl* const kInstance = new LocalFileSystemImpl();
  return *kInstance;
}

}  // namespace harrier
