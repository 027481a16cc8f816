// TestPipe: a pipe(2) for a test, standing in for stderr: its write end is handed to a log
// writer, and the test reads what arrived (Unread(): what is in it now, without blocking;
// ReadToEnd() after the write end is closed with CloseWrite()). A reader that never reads is a
// stalled log shipper.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace harrier::testing {

class TestPipe {
 public:
  TestPipe() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    read_ = fds[0];
    write_ = fds[1];
  }
  ~TestPipe() {
    ::close(read_);
    CloseWrite();
  }
  TestPipe(const TestPipe&) = delete;
  TestPipe& operator=(const TestPipe&) = delete;

  int read_fd() const { return read_; }
  int write_fd() const { return write_; }
  void CloseWrite() {
    if (write_ >= 0) ::close(write_);
    write_ = -1;
  }
  // What is in the pipe now, read without waiting.
  std::string Unread() const {
    const int flags = ::fcntl(read_, F_GETFL);
    ::fcntl(read_, F_SETFL, flags | O_NONBLOCK);
    std::string out = ReadAll();
    ::fcntl(read_, F_SETFL, flags);
    return out;
  }
  // Everything, to end of file: after CloseWrite() and the writer's end.
  std::string ReadToEnd() const { return ReadAll(); }

 private:
  std::string ReadAll() const {
    std::string out;
    char buf[65536];
    for (ssize_t n; (n = ::read(read_, buf, sizeof(buf))) > 0;) out.append(buf, n);
    return out;
  }
  int read_ = -1;
  int write_ = -1;
};

}  // namespace harrier::testing
