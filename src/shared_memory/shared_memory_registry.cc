#include "shared_memory/shared_memory_registry.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "core/cpu_quota.h"
#include "core/utf8.h"

namespace harrier {

// One mapped region. Immutable once built; unmapped by its destructor, which runs when the
// registry and every request pinning it have let go.
struct SharedMemoryRegistry::Region {
  SharedMemoryRegionStatus status;
  void* mapping = nullptr;    // page-aligned start of the mmap
  size_t mapping_bytes = 0;   // byte_size + the offset's distance into its page
  std::byte* data = nullptr;  // the region's first byte (mapping + that distance)

  Region() = default;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region() {
    if (mapping != nullptr) munmap(mapping, mapping_bytes);
  }
};

namespace {

std::string Quoted(std::string_view s) {
  return "'" + std::string(s) + "'";
}

// Closes a descriptor when it goes out of scope.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

SharedMemoryRegistry::SharedMemoryRegistry() : SharedMemoryRegistry(Limits{}) {}

SharedMemoryRegistry::SharedMemoryRegistry(Limits limits)
    : max_regions_(limits.max_regions),
      max_mapped_bytes_(limits.max_mapped_bytes > 0 ? limits.max_mapped_bytes
                                                    : UsableMemoryBytes()) {}

Status SharedMemoryRegistry::CheckRoom(std::string_view name, uint64_t byte_size) const {
  if (regions_.count(name)) {
    return InvalidArgument("shared memory region " + Quoted(name) + " already in manager");
  }
  const std::string failed = "failed to register shared memory region " + Quoted(name);
  if (regions_.size() >= max_regions_) {
    return InvalidArgument(failed + ": the server holds " + std::to_string(regions_.size()) +
                           " regions, its limit: unregister one first");
  }
  if (byte_size > max_mapped_bytes_ - std::min(mapped_bytes_, max_mapped_bytes_)) {
    return InvalidArgument(
        failed + ": its " + std::to_string(byte_size) + " bytes would pass the server's limit of " +
        std::to_string(max_mapped_bytes_) + " bytes of registered regions in all (" +
        std::to_string(mapped_bytes_) + " registered now)");
  }
  return Status::Ok();
}

SharedMemoryRegistry::~SharedMemoryRegistry() {
  UnregisterAll();
}

Status SharedMemoryRegistry::Register(std::string_view name, std::string_view key, uint64_t offset,
                                      uint64_t byte_size) {
  const std::string failed = "failed to register shared memory region " + Quoted(name);
  // An empty key first, in Triton's words: it tries to open it before anything else, and its
  // QA test (python_grpc_aio_test.py) registers ("", "", 0) and matches them.
  if (key.empty())
    return InvalidArgument("Unable to open shared memory region: '' (the key is empty)");
  if (name.empty()) return InvalidArgument("failed to register shared memory region: empty name");
  // Status answers carry the name as a JSON and a protobuf string, which must be UTF-8 (probe
  // 62: one such name made every client's status answer unreadable).
  if (!IsValidUtf8(name)) {
    return InvalidArgument("failed to register shared memory region: its name is not UTF-8");
  }
  // A POSIX shared-memory name is one path component under /dev/shm: a key such as
  // "/../etc/x" must never reach a file outside it (glibc refuses it too; say so clearly).
  const size_t first = key.find_first_not_of('/');
  const std::string_view bare = first == std::string_view::npos ? "" : key.substr(first);
  if (bare.empty() || bare == "." || bare == ".." || bare.find('/') != std::string_view::npos ||
      key.find('\0') != std::string_view::npos) {
    return InvalidArgument(failed + ": invalid args: key " + Quoted(key) +
                           " is not a shared-memory object name (\"/name\", no other '/')");
  }
  if (byte_size == 0) return InvalidArgument(failed + ": invalid args: byte_size is 0");
  if (byte_size > std::numeric_limits<uint64_t>::max() - offset) {
    return InvalidArgument(failed + ": invalid args: offset + byte_size overflows");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(CheckRoom(name, byte_size));
  }

  const std::string key_string(key);
  FdCloser fd{shm_open(key_string.c_str(), O_RDWR, 0)};
  if (fd.fd < 0) {
    const int err = errno;
    return InvalidArgument("Unable to open shared memory region: " + Quoted(key) + " (" +
                           std::strerror(err) + ")");
  }
  struct stat st {};
  if (fstat(fd.fd, &st) != 0 || st.st_size < 0) {
    const int err = errno;
    return InvalidArgument("Invalid shared memory region: " + Quoted(key) +
                           " (fstat: " + std::strerror(err) + ")");
  }
  const uint64_t object_bytes = static_cast<uint64_t>(st.st_size);
  if (offset + byte_size > object_bytes) {
    return InvalidArgument(failed + ": invalid args: offset " + std::to_string(offset) +
                           " + byte_size " + std::to_string(byte_size) + " is past the end of " +
                           Quoted(key) + " (" + std::to_string(object_bytes) + " bytes)");
  }

  const long page = sysconf(_SC_PAGESIZE);
  const uint64_t page_bytes = page > 0 ? static_cast<uint64_t>(page) : 4096;
  const uint64_t into_page = offset % page_bytes;
  auto region = std::make_shared<Region>();
  region->mapping_bytes = static_cast<size_t>(byte_size + into_page);
  void* mapped = mmap(nullptr, region->mapping_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.fd,
                      static_cast<off_t>(offset - into_page));
  if (mapped == MAP_FAILED) {
    const int err = errno;
    return InvalidArgument(failed + ": mmap: " + std::strerror(err));
  }
  region->mapping = mapped;
  region->data = static_cast<std::byte*>(mapped) + into_page;
  region->status = {std::string(name), key_string, offset, byte_size};

  std::lock_guard<std::mutex> lock(mu_);
  // Checked again: another thread may have registered meanwhile. `region` then unmaps itself
  // on return.
  RETURN_IF_ERROR(CheckRoom(name, byte_size));
  regions_.emplace(std::string(name), std::move(region));
  mapped_bytes_ += byte_size;
  return Status::Ok();
}

void SharedMemoryRegistry::Unregister(std::string_view name) {
  std::shared_ptr<const Region> dropped;  // unmapped (if last) after the lock is released
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = regions_.find(name); it != regions_.end()) {
    mapped_bytes_ -= it->second->status.byte_size;
    dropped = std::move(it->second);
    regions_.erase(it);
  }
}

void SharedMemoryRegistry::UnregisterAll() {
  std::map<std::string, std::shared_ptr<const Region>, std::less<>> dropped;
  std::lock_guard<std::mutex> lock(mu_);
  dropped.swap(regions_);
  mapped_bytes_ = 0;
}

StatusOr<std::vector<SharedMemoryRegionStatus>> SharedMemoryRegistry::Regions(
    std::string_view name) const {
  std::vector<SharedMemoryRegionStatus> out;
  std::lock_guard<std::mutex> lock(mu_);
  if (name.empty()) {
    out.reserve(regions_.size());
    for (const auto& [n, region] : regions_) out.push_back(region->status);
    return out;
  }
  auto it = regions_.find(name);
  if (it == regions_.end()) {
    return InvalidArgument("Unable to find system shared memory region: " + Quoted(name));
  }
  out.push_back(it->second->status);
  return out;
}

StatusOr<SharedMemoryWindow> SharedMemoryRegistry::Window(std::string_view name, uint64_t offset,
                                                          uint64_t byte_size) const {
  std::shared_ptr<const Region> region;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.find(name);
    if (it == regions_.end()) {
      return InvalidArgument("Unable to find shared memory region: " + Quoted(name));
    }
    region = it->second;
  }
  const uint64_t size = region->status.byte_size;
  if (offset > size || byte_size > size - offset) {
    return InvalidArgument("Invalid offset + byte size for shared memory region: " + Quoted(name) +
                           " (offset " + std::to_string(offset) + " + byte size " +
                           std::to_string(byte_size) + " > the region's " + std::to_string(size) +
                           " bytes)");
  }
  SharedMemoryWindow window;
  window.region = std::string(name);
  window.offset = offset;
  window.byte_size = byte_size;
  window.data = region->data + offset;
  window.pin = std::move(region);
  return window;
}

Status PopulateWindow(std::byte* data, uint64_t size, bool for_write) {
  if (size == 0) return Status::Ok();
  const long page = sysconf(_SC_PAGESIZE);
  const uintptr_t page_bytes = page > 0 ? static_cast<uintptr_t>(page) : 4096;
  const uintptr_t start = reinterpret_cast<uintptr_t>(data) & ~(page_bytes - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + size;
  if (madvise(reinterpret_cast<void*>(start), end - start,
              for_write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0) {
    return Status::Ok();
  }
  const int err = errno;
  if (err == EINVAL) return Status::Ok();  // a kernel before 5.14: accessed unchecked, as before
  return InvalidArgument(
      std::string(for_write ? "cannot write" : "cannot read") +
      " its shared memory window: the object no longer has those pages (shrunk after it was "
      "registered)" +
      (for_write ? ", or /dev/shm has no room for them" : "") + " (madvise: " + std::strerror(err) +
      ")");
}

size_t SharedMemoryRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return regions_.size();
}

}  // namespace harrier
