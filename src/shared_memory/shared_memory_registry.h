// SharedMemoryRegistry: the system shared-memory regions that clients have registered
// (Triton's `systemsharedmemory` extension, docs/api.md "System shared memory"), one registry
// per server, shared by the REST and gRPC front ends.
//
// A region is a named window [offset, offset + byte_size) of a POSIX shared-memory object
// (shm_open(key)). Register opens the object read-write (outputs are written into it), checks
// that the window lies inside it (fstat), maps exactly that window (the mapping starts at the
// page that holds `offset`) and closes the descriptor. Each region is mapped once, when it is
// registered, and never again. Nothing is allocated for it: an object made with ftruncate
// alone is sparse, and its pages are charged to whoever first writes them. Before a request
// touches a window, PopulateWindow faults its pages in, so that a page the object lost (shrunk
// after registration) or that a full /dev/shm cannot back is a 400 rather than SIGBUS, which
// ended the server (probe 62).
//
// Limits (Limits): at most max_regions regions, and max_mapped_bytes of windows in all (by
// default the memory the process may use, core/cpu_quota.h): each region is a mapping, and without
// a bound windows of one sparse object filled the address space, or the kernel's mapping count, and
// the next allocation aborted the server (probe 62).
//
// Lifetime: a region's mapping is reference-counted. Window() hands out a pin (a shared_ptr
// holder) that a request keeps in the tensors it reads from or writes to the region.
// Unregister drops the registry's reference only: the name is free at once, and the memory is
// unmapped when the last request using it lets go. The destructor unregisters everything, so
// at shutdown every region is unmapped once its in-flight requests are done.
//
// Errors are kInvalidArgument (HTTP 400 / gRPC INVALID_ARGUMENT), with Triton's wording first
// where Triton's clients and tests match on it, then Harrier's detail:
//   Register: a name already registered ("shared memory region 'x' already in manager"), an
//     empty name or key, a name that is not UTF-8, a limit reached, a key that does not exist or
//     cannot be opened read-write ("Unable to open shared memory region: '/key'"), byte_size 0, a
//     window past the object's end
//     ("failed to register shared memory region 'x': invalid args"), an mmap failure.
//   Regions of a named region / Window: an unknown name ("Unable to find system shared memory
//     region: 'x'"); Window: a span outside the region ("Invalid offset + byte size for shared
//     memory region: 'x'").
// Unregistering a name that is not registered succeeds and changes nothing, as in Triton
// (Triton's own client examples unregister everything before they start).
//
// Thread safety: every method may be called from any number of threads at once (one mutex
// guards the name table; no system call but munmap runs under it, and munmap only when a
// region has no other user).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "harrier/status.h"

namespace harrier {

// What status reports of one region: what the client registered.
struct SharedMemoryRegionStatus {
  std::string name;
  std::string key;
  uint64_t offset = 0;     // into the shared-memory object
  uint64_t byte_size = 0;  // of the region
};

// Faults in every page of [data, data + size), a span of a mapped window, for reading or for
// writing (MADV_POPULATE_READ / MADV_POPULATE_WRITE): kInvalidArgument, saying why, where an
// access would raise SIGBUS (the object shrank, or /dev/shm has no room to back a page about
// to be written). A shrink after this call still raises SIGBUS on the access: the client is
// trusted not to (docs/api.md). Ok without a check on a kernel without them (before 5.14).
Status PopulateWindow(std::byte* data, uint64_t size, bool for_write);

// A span of a registered region that one request reads or writes. `data` stays mapped while
// `pin` (or a copy) is alive, even after the region is unregistered.
struct SharedMemoryWindow {
  std::string region;
  uint64_t offset = 0;  // into the region, as the request gave it
  uint64_t byte_size = 0;
  std::byte* data = nullptr;
  std::shared_ptr<const void> pin;
};

class SharedMemoryRegistry {
 public:
  struct Limits {
    size_t max_regions = 4096;
    uint64_t max_mapped_bytes = 0;  // 0: UsableMemoryBytes()
  };

  SharedMemoryRegistry();  // the default Limits
  explicit SharedMemoryRegistry(Limits limits);
  ~SharedMemoryRegistry();
  SharedMemoryRegistry(const SharedMemoryRegistry&) = delete;
  SharedMemoryRegistry& operator=(const SharedMemoryRegistry&) = delete;

  // Maps [offset, offset + byte_size) of the object `key` as region `name`. On an error nothing
  // is registered and nothing stays mapped or open.
  Status Register(std::string_view name, std::string_view key, uint64_t offset, uint64_t byte_size);

  // Forgets `name` (see the file comment for when it is unmapped). Unknown names: Ok.
  void Unregister(std::string_view name);
  void UnregisterAll();

  // Every region, ordered by name (empty `name`), or the one named.
  StatusOr<std::vector<SharedMemoryRegionStatus>> Regions(std::string_view name) const;

  // [offset, offset + byte_size) of region `name`, pinned.
  StatusOr<SharedMemoryWindow> Window(std::string_view name, uint64_t offset,
                                      uint64_t byte_size) const;

  size_t size() const;

 private:
  struct Region;

  // kInvalidArgument when one more region of `byte_size` bytes would pass a limit. Under mu_.
  Status CheckRoom(std::string_view name, uint64_t byte_size) const;

  const size_t max_regions_;
  const uint64_t max_mapped_bytes_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Region>, std::less<>> regions_;  // guarded by mu_
  uint64_t mapped_bytes_ = 0;  // the registered regions' byte_size summed; guarded by mu_
};

}  // namespace harrier
