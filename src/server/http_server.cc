#include "server/http_server.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <exception>
#include <functional>
#include <future>
#include <string>
#include <utility>

#include "core/cpu_quota.h"
#include "server/http_connection.h"
#include "server/io_thread.h"

namespace harrier {
namespace server_internal {

namespace asio = boost::asio;
using boost::system::error_code;

// Listens on the first I/O thread and deals accepted sockets round-robin to all threads.
//
// Why one acceptor and round-robin rather than an SO_REUSEPORT acceptor per thread: with
// keep-alive clients (every load generator and SDK) accepting is rare and off the request path,
// and round-robin gives each thread exactly its share of a handful of long-lived connections,
// where the kernel's 4-tuple hash often puts two of them on one thread while another idles —
// a latency cost on every later request. A connection never changes thread after the accept.
class Acceptor {
 public:
  Acceptor(std::vector<std::shared_ptr<IoThread>>* threads, ServerShared* shared)
      : threads_(threads),
        shared_(shared),
        acceptor_((*threads)[0]->ioc),
        retry_timer_((*threads)[0]->ioc) {}

  Status Listen(const asio::ip::tcp::endpoint& endpoint) {
    error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Unavailable("cannot listen on " + endpoint.address().to_string() + ":" +
                         std::to_string(endpoint.port()) + ": " + ec.message());
    }
    return Status::Ok();
  }

  uint16_t port() const {
    error_code ec;
    return acceptor_.local_endpoint(ec).port();
  }

  void Accept() {
    IoThread* target = (*threads_)[next_++ % threads_->size()].get();
    acceptor_.async_accept(
        target->ioc, [this, target](const error_code& ec, HttpConnection::Socket socket) {
          if (ec == asio::error::operation_aborted || !acceptor_.is_open() ||
              shared_->stopping.load(std::memory_order_relaxed))
            return;
          if (ec) {
            spdlog::warn("http: accept failed: {}", ec.message());
            if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space ||
                ec == asio::error::no_memory) {
              // Out of file descriptors or memory: accepting again at once would spin.
              retry_timer_.expires_after(std::chrono::milliseconds(100));
              retry_timer_.async_wait([this](const error_code& wait_ec) {
                if (!wait_ec && acceptor_.is_open()) Accept();
              });
              return;
            }
            Accept();
            return;
          }
          error_code ignored;
          socket.set_option(asio::ip::tcp::no_delay(true), ignored);
          auto connection = std::make_shared<HttpConnection>(std::move(socket), target, shared_);
          asio::post(target->ioc, [connection] { connection->Start(); });
          Accept();
        });
  }

  void Close() {
    error_code ignored;
    acceptor_.close(ignored);
    retry_timer_.cancel();
  }

 private:
  std::vector<std::shared_ptr<IoThread>>* threads_;
  ServerShared* shared_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  std::size_t next_ = 0;
};

namespace {

// Runs `fn` on `io`'s thread and waits for it.
void RunOn(IoThread& io, const std::function<void()>& fn) {
  if (io.ioc.get_executor().running_in_this_thread()) {
    fn();
    return;
  }
  std::promise<void> done;
  asio::post(io.ioc, [&] {
    fn();
    done.set_value();
  });
  done.get_future().wait();
}

void RunIoThread(IoThread* io, int index) {
  const std::string name = "harrier-io-" + std::to_string(index);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  for (;;) {
    try {
      io->ioc.run();
      return;
    } catch (const std::exception& e) {
      // A handler threw (allocation failure): log it and keep serving the other connections.
      spdlog::error("http: I/O thread {}: {}", index, e.what());
    }
  }
}

}  // namespace
}  // namespace server_internal

using server_internal::IoThread;
using server_internal::RunOn;

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Create(const Options& options,
                                                         HttpHandler* handler) {
  if (handler == nullptr) return InvalidArgument("HttpServer needs a handler");
  boost::system::error_code ec;
  boost::asio::ip::make_address(options.address, ec);
  if (ec) return InvalidArgument("not an IP address: '" + options.address + "'");
  if (options.io_threads < 0) return InvalidArgument("io_threads must be >= 0");
  if (options.max_body_bytes == 0) return InvalidArgument("max_body_bytes must be > 0");
  if (options.max_header_bytes < 64) return InvalidArgument("max_header_bytes must be >= 64");
  using std::chrono::milliseconds;
  for (milliseconds t : {options.header_timeout, options.body_timeout, options.keepalive_timeout,
                         options.write_timeout}) {
    if (t <= milliseconds(0)) return InvalidArgument("HTTP timeouts must be > 0");
  }
  if (options.linger_timeout < milliseconds(0) || options.shutdown_timeout < milliseconds(0))
    return InvalidArgument("linger_timeout and shutdown_timeout must be >= 0");
  return std::unique_ptr<HttpServer>(new HttpServer(options, handler));
}

HttpServer::HttpServer(const Options& options, HttpHandler* handler)
    : options_(options), shared_(std::make_shared<server_internal::ServerShared>()) {
  shared_->options = options;
  shared_->handler = handler;
}

HttpServer::~HttpServer() {
  Stop();
  acceptor_.reset();
  for (auto& io : io_) io->connections.clear();  // threads are joined (or never started)
}

Status HttpServer::Start() {
  if (started_ || stopped_) return InvalidArgument("HttpServer::Start called twice");
  const int threads = options_.io_threads > 0 ? options_.io_threads : UsableCores();
  io_.clear();
  for (int i = 0; i < threads; ++i) io_.push_back(std::make_shared<IoThread>());
  acceptor_ = std::make_unique<server_internal::Acceptor>(&io_, shared_.get());

  const boost::asio::ip::tcp::endpoint endpoint(boost::asio::ip::make_address(options_.address),
                                                options_.port);
  RETURN_IF_ERROR(acceptor_->Listen(endpoint));
  port_ = acceptor_->port();
  acceptor_->Accept();
  for (int i = 0; i < threads; ++i) {
    IoThread* io = io_[i].get();
    io->thread = std::thread(server_internal::RunIoThread, io, i);
  }
  started_ = true;
  return Status::Ok();
}

void HttpServer::Stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  auto& shared = *shared_;
  shared.stopping.store(true);

  // 1. No new connections; idle keep-alive connections close now, busy ones after their
  //    current response (with Connection: close).
  RunOn(*io_[0], [this] { acceptor_->Close(); });
  for (auto& io : io_) {
    RunOn(*io, [&io] {
      auto connections = io->connections;  // Close() edits the list
      for (auto& c : connections) c->OnServerStopping();
    });
  }

  // 2. Wait (bounded) for in-flight requests to be answered.
  {
    std::unique_lock<std::mutex> lock(shared.mu);
    const bool drained = shared.drained.wait_for(
        lock, options_.shutdown_timeout, [&] { return shared.live_connections.load() == 0; });
    if (!drained) {
      spdlog::warn("http: {} connection(s) still busy after {} ms; closing them",
                   shared.live_connections.load(), options_.shutdown_timeout.count());
    }
  }

  // 3. Close whatever is left, then stop the loops and join.
  for (auto& io : io_) {
    RunOn(*io, [&io] {
      auto connections = io->connections;
      for (auto& c : connections) c->Close();
    });
  }
  for (auto& io : io_) {
    io->work.reset();
    io->ioc.stop();
  }
  for (auto& io : io_) {
    if (io->thread.joinable()) io->thread.join();
  }
}

}  // namespace harrier
