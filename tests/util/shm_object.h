// ShmObject: a POSIX shared-memory object (/dev/shm) for a test, with a name unique to the
// process and test, unlinked when it goes out of scope. Its bytes are mapped for the test to
// fill and read, as a client would.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>

namespace harrier::testing {

class ShmObject {
 public:
  explicit ShmObject(size_t size_bytes) : size_(size_bytes) {
    static std::atomic<int> counter{0};
    key_ = "/harrier_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
    const int fd = shm_open(key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) throw std::runtime_error("shm_open " + key_ + ": " + std::strerror(errno));
    if (ftruncate(fd, static_cast<off_t>(size_)) != 0 ||
        (size_ > 0 && (data_ = static_cast<std::byte*>(mmap(nullptr, size_, PROT_READ | PROT_WRITE,
                                                            MAP_SHARED, fd, 0))) == MAP_FAILED)) {
      close(fd);
      shm_unlink(key_.c_str());
      throw std::runtime_error("ftruncate/mmap " + key_);
    }
    close(fd);
  }
  ~ShmObject() {
    if (data_ != nullptr && size_ > 0) munmap(data_, size_);
    shm_unlink(key_.c_str());
  }
  ShmObject(const ShmObject&) = delete;
  ShmObject& operator=(const ShmObject&) = delete;

  const std::string& key() const { return key_; }
  std::byte* data() { return data_; }
  size_t size() const { return size_; }

 private:
  std::string key_;
  size_t size_;
  std::byte* data_ = nullptr;
};

}  // namespace harrier::testing
