// RawHttpClient: a blocking test client on a plain POSIX socket, so tests control every byte
// (half headers, lying lengths, pipelining) and every read has a timeout.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace harrier::testing {

struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;

  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class RawHttpClient {
 public:
  // `source`: the client's address (a loopback one other than 127.0.0.1 stands for another
  // client); null: the kernel's choice.
  explicit RawHttpClient(uint16_t port, const char* source = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (source != nullptr) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      ::inet_pton(AF_INET, source, &from.sin_addr);
      ::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof(from));
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~RawHttpClient() { Close(); }
  RawHttpClient(const RawHttpClient&) = delete;
  RawHttpClient& operator=(const RawHttpClient&) = delete;

  bool connected() const { return connected_; }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // One response (Content-Length framed), or nullopt on close, error or timeout. Interim 1xx
  // responses are returned like any other.
  std::optional<RawResponse> ReadResponse(
      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::size_t head_end;
    while ((head_end = pending_.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadSome(deadline)) return std::nullopt;
    }
    RawResponse r;
    std::string head = pending_.substr(0, head_end);
    pending_.erase(0, head_end + 4);
    std::size_t line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    if (status_line.size() < 12) return std::nullopt;
    r.status = std::stoi(status_line.substr(9, 3));
    std::size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      std::size_t end = head.find("\r\n", pos);
      if (end == std::string::npos) end = head.size();
      std::string line = head.substr(pos, end - pos);
      std::size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::size_t v = line.find_first_not_of(' ', colon + 1);
        r.headers[name] = v == std::string::npos ? "" : line.substr(v);
      }
      pos = end + 2;
    }
    std::size_t length = 0;
    if (auto it = r.headers.find("content-length"); it != r.headers.end())
      length = std::stoul(it->second);
    while (pending_.size() < length) {
      if (!ReadSome(deadline)) return std::nullopt;
    }
    r.body = pending_.substr(0, length);
    pending_.erase(0, length);
    return r;
  }

  // A response's head only (status and headers), its body left to read: for streamed bodies.
  std::optional<RawResponse> ReadHead(
      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::size_t head_end;
    while ((head_end = pending_.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadSome(deadline)) return std::nullopt;
    }
    const std::string head = pending_.substr(0, head_end + 4);
    pending_.erase(0, head_end + 4);
    std::string saved;
    saved.swap(pending_);
    pending_ = head;  // parsed by ReadResponse, which finds no Content-Length
    auto r = ReadResponse(timeout);
    pending_ = std::move(saved);
    return r;
  }

  // The data of the next chunk of a chunked body: empty for the last chunk (its trailer section
  // read too), nullopt on a malformed chunk, close or timeout.
  std::optional<std::string> ReadChunk(
      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::size_t line_end;
    while ((line_end = pending_.find("\r\n")) == std::string::npos) {
      if (!ReadSome(deadline)) return std::nullopt;
    }
    std::size_t size = 0;
    try {
      size = std::stoul(pending_.substr(0, line_end), nullptr, 16);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    pending_.erase(0, line_end + 2);
    if (size == 0) {  // the last chunk: an empty trailer section ends the body
      while (pending_.size() < 2) {
        if (!ReadSome(deadline)) return std::nullopt;
      }
      if (pending_.compare(0, 2, "\r\n") != 0) return std::nullopt;
      pending_.erase(0, 2);
      return std::string();
    }
    while (pending_.size() < size + 2) {
      if (!ReadSome(deadline)) return std::nullopt;
    }
    if (pending_.compare(size, 2, "\r\n") != 0) return std::nullopt;
    std::string data = pending_.substr(0, size);
    pending_.erase(0, size + 2);
    return data;
  }

  // Everything until the peer closes (or `timeout`), after what is already buffered.
  std::string ReadUntilClose(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (ReadSome(deadline)) {
    }
    std::string all;
    all.swap(pending_);
    return all;
  }

  // True when the peer closes (EOF or reset) within `timeout`; unread data is discarded.
  bool WaitClosed(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return true;
    }
  }

  void ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  bool ReadSome(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    pending_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string pending_;
};

}  // namespace harrier::testing
