#include "server/http_server.h"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
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
#include "core/log_throttle.h"
#include "server/http2_connection.h"
#include "server/http_connection.h"
#include "server/io_thread.h"
#include "server/tls.h"

namespace harrier {
namespace server_internal {

namespace asio = boost::asio;
using boost::system::error_code;

// A TLS connection until its handshake is done (bounded by header_timeout); then ALPN decides:
// "h2" → Http2Connection, anything else → HTTP/1.1. Registered with its IoThread like a
// connection, so that Stop() waits for it (bounded) and closes it if it is still there:
//   - Stop before the client said anything: closed at once, like an idle connection;
//   - Stop in the middle of a handshake: it may finish (within header_timeout and Stop's
//     shutdown_timeout); then, instead of serving, the server sends close_notify and closes
//     (bounded by linger_timeout), as it closes an idle connection.
// Runs only on its I/O thread.
class TlsHandshake : public Connection, public std::enable_shared_from_this<TlsHandshake> {
 public:
  TlsHandshake(TcpStream socket, TlsContext* tls, IoThread* io, ServerShared* shared)
      : stream_(std::move(socket), tls->context()),
        timer_(io->ioc.get_executor()),
        io_(io),
        shared_(shared) {}

  void Start() {
    if (shared_->stopping.load(std::memory_order_relaxed)) {
      error_code ignored;
      stream_.lowest_layer().close(ignored);
      return;
    }
    registry_pos_ = io_->connections.insert(io_->connections.end(), shared_from_this());
    registered_ = true;
    shared_->live_connections.fetch_add(1);
    timer_.expires_after(shared_->options.header_timeout);
    timer_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (ec || self->done_) return;
      spdlog::debug("https: handshake timed out");
      self->shared_->tls_timed_out.fetch_add(1, std::memory_order_relaxed);
      self->Close();
    });
    stream_.async_handshake(
        asio::ssl::stream_base::server,
        [self = shared_from_this()](const error_code& ec) { self->OnDone(ec); });
  }

  void OnServerStopping() override {
    if (done_ || closed_) return;  // finishing already (close_notify), or gone
    if (!TlsContext::HandshakeBegun(stream_)) Close();
    // Else OnDone() sees `stopping` and closes it politely.
  }

  void Close() override {
    if (closed_) return;
    auto self = shared_from_this();  // the registry may hold the last reference
    closed_ = true;
    timer_.cancel();
    error_code ignored;
    stream_.lowest_layer().close(ignored);
    Unregister();
  }

 private:
  void Unregister() {
    if (!registered_) return;
    registered_ = false;
    io_->connections.erase(registry_pos_);
    shared_->OnConnectionClosed();
  }

  void OnDone(const error_code& ec) {
    if (closed_) return;  // timed out or closed by Stop: the socket is gone
    auto self = shared_from_this();
    done_ = true;
    timer_.cancel();
    if (ec) {
      spdlog::debug("https: handshake failed: {}", ec.message());
      if (TlsContext::HandshakeBegun(stream_))
        shared_->tls_failed.fetch_add(1, std::memory_order_relaxed);
      Close();
      return;
    }
    shared_->tls_finished[TlsContext::Version(stream_) == "TLSv1.3" ? 1 : 0].fetch_add(
        1, std::memory_order_relaxed);
    if (TlsContext::Resumed(stream_)) shared_->tls_resumed.fetch_add(1, std::memory_order_relaxed);
    if (shared_->stopping.load(std::memory_order_relaxed)) {
      // Stop came during the handshake: no request will be served now; say goodbye cleanly.
      timer_.expires_after(shared_->options.linger_timeout);
      timer_.async_wait([self](const error_code& wait_ec) {
        if (!wait_ec) self->Close();
      });
      stream_.async_shutdown([self](const error_code&) { self->Close(); });
      return;
    }
    // The connection registers itself before this object leaves the registry, so Stop's count
    // of live connections never passes through zero on the way.
    closed_ = true;  // the stream moves: Close() must not touch it
    // A client that chose http/1.1 by ALPN is held to it (probe 36); one that offered no ALPN
    // may still send the HTTP/2 preface, as h2c's prior knowledge does.
    const std::string_view alpn = TlsContext::Negotiated(stream_);
    if (alpn == "h2") {
      auto h2 = std::make_shared<Http2Connection<TlsStream>>(std::move(stream_), io_, shared_);
      h2->client_slot = std::move(client_slot);
      h2->Start({});
    } else {
      using Connection = BasicHttpConnection<TlsStream>;
      auto http = std::make_shared<Connection>(std::move(stream_), io_, shared_);
      http->client_slot = std::move(client_slot);
      http->Start(alpn.empty() ? Connection::Http2Preface::kAllowed
                               : Connection::Http2Preface::kRefused);
    }
    Unregister();
  }

  TlsStream stream_;
  asio::basic_waitable_timer<std::chrono::steady_clock,
                             asio::wait_traits<std::chrono::steady_clock>,
                             asio::io_context::executor_type>
      timer_;
  IoThread* io_;
  ServerShared* shared_;
  bool registered_ = false;
  std::list<std::shared_ptr<Connection>>::iterator registry_pos_;
  bool done_ = false;    // the handshake finished (well or not)
  bool closed_ = false;  // the socket is closed, or has moved to a connection
};

// While accept() keeps failing (file descriptors exhausted: retried every kAcceptRetry), one
// warning per kAcceptErrorLogInterval, saying how many failed since the previous one.
constexpr std::chrono::milliseconds kAcceptRetry{100};
constexpr std::chrono::seconds kAcceptErrorLogInterval{10};

// Listens on the first I/O thread and deals accepted sockets round-robin to all threads.
//
// Why one acceptor and round-robin rather than an SO_REUSEPORT acceptor per thread: with
// keep-alive clients (every load generator and SDK) accepting is rare and off the request path,
// and round-robin gives each thread exactly its share of a handful of long-lived connections,
// where the kernel's 4-tuple hash often puts two of them on one thread while another idles —
// a latency cost on every later request. A connection never changes thread after the accept.
class Acceptor {
 public:
  // `tls` null: plain TCP (HTTP/1.1 and h2c); else TLS.
  Acceptor(std::vector<std::shared_ptr<IoThread>>* threads, std::shared_ptr<ServerShared> shared,
           TlsContext* tls = nullptr)
      : threads_(threads),
        shared_(shared.get()),
        shared_owner_(std::move(shared)),
        tls_(tls),
        acceptor_((*threads)[0]->ioc),
        retry_timer_((*threads)[0]->ioc),
        logs_(shared_->accept_logs) {}

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
    acceptor_.async_accept(target->ioc, [this, target](const error_code& ec,
                                                       HttpConnection::Socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open() ||
          shared_->stopping.load(std::memory_order_relaxed))
        return;
      if (ec) {
        shared_->failed_accepts.fetch_add(1, std::memory_order_relaxed);
        // Out of file descriptors (EMFILE, ENFILE) or memory: accepting again at once would
        // spin, since the connection is still waiting in the backlog.
        const bool out_of_resources = ec == asio::error::no_descriptors ||
                                      ec == boost::system::errc::too_many_files_open_in_system ||
                                      ec == asio::error::no_buffer_space ||
                                      ec == asio::error::no_memory;
        LogAcceptError(ec, out_of_resources);
        if (out_of_resources) {
          retry_timer_.expires_after(kAcceptRetry);
          retry_timer_.async_wait([this](const error_code& wait_ec) {
            if (!wait_ec && acceptor_.is_open()) Accept();
          });
          return;
        }
        Accept();
        return;
      }
      if (logs_.accept_errors.unreported() > 0) {
        if (const uint64_t failed = logs_.accept_errors.Recovered(std::chrono::steady_clock::now()))
          spdlog::info("{}: accepting again; {} accept(s) failed since the previous line",
                       shared_->options.name, failed);
      }
      error_code ignored;
      // Over the limit: closed at once (nginx does the same when worker_connections run out).
      // Counted from the accept: a connection posted to its thread and not yet started counts.
      const int64_t open = shared_->live_connections.load(std::memory_order_relaxed) +
                           shared_->accepting.load(std::memory_order_relaxed);
      // Compared unsigned: a limit above 2^63 cast to int64_t was negative, and refused all.
      if (static_cast<uint64_t>(std::max<int64_t>(open, 0)) >= shared_->max_connections) {
        shared_->refused_connections.fetch_add(1, std::memory_order_relaxed);
        LogRefusal(open);
        socket.close(ignored);
        Accept();
        return;
      }
      std::shared_ptr<void> client_slot;
      if (shared_->options.max_connections_per_client != 0) {
        error_code peer_ec;
        const auto peer = socket.remote_endpoint(peer_ec);
        if (peer_ec) {  // reset before it was accepted (a TCP health check): no refusal
          socket.close(ignored);
          Accept();
          return;
        }
        client_slot = TakeClientSlot(peer.address());
        if (client_slot == nullptr) {
          shared_->refused_connections.fetch_add(1, std::memory_order_relaxed);
          LogClientRefusal(peer.address());
          socket.close(ignored);
          Accept();
          return;
        }
      }
      const std::string& name = shared_->options.name;
      if (logs_.refusals.unreported() > 0) {
        if (const uint64_t refused = logs_.refusals.Recovered(std::chrono::steady_clock::now()))
          spdlog::info("{}: accepting connections again; {} refused since the previous line", name,
                       refused);
      }
      socket.set_option(asio::ip::tcp::no_delay(true), ignored);
      shared_->accepting.fetch_add(1, std::memory_order_relaxed);
      // Start() registers the connection (live_connections) before `accepting` lets go of it.
      if (tls_ != nullptr) {
        auto handshake = std::make_shared<TlsHandshake>(std::move(socket), tls_, target, shared_);
        handshake->client_slot = std::move(client_slot);
        asio::post(target->ioc, [handshake, shared = shared_] {
          handshake->Start();
          shared->accepting.fetch_sub(1, std::memory_order_relaxed);
        });
      } else {
        auto connection = std::make_shared<HttpConnection>(std::move(socket), target, shared_);
        connection->client_slot = std::move(client_slot);
        asio::post(target->ioc, [connection, shared = shared_] {
          connection->Start();
          shared->accepting.fetch_sub(1, std::memory_order_relaxed);
        });
      }
      Accept();
    });
  }

  void Close() {
    error_code ignored;
    acceptor_.close(ignored);
    retry_timer_.cancel();
  }

 private:
  void LogAcceptError(const error_code& ec, bool retrying) {
    const uint64_t failed = logs_.accept_errors.Event(std::chrono::steady_clock::now());
    if (failed == 0) return;  // counted; reported by a later line
    const char* retry = retrying ? "; retrying every 100 ms" : "";
    if (failed == 1) {
      spdlog::warn("{}: accept failed: {}{} (logged at most once per {} s)", shared_->options.name,
                   ec.message(), retry, kAcceptErrorLogInterval.count());
    } else {
      spdlog::warn("{}: accept failed {} times since the previous line, last: {}{}",
                   shared_->options.name, failed, ec.message(), retry);
    }
  }

  // A share of the per-client limit for a connection from `address`, or null when the address
  // holds every one it may.
  std::shared_ptr<void> TakeClientSlot(const asio::ip::address& address) {
    std::string key;  // the address's bytes
    if (address.is_v4()) {
      const auto bytes = address.to_v4().to_bytes();
      key.assign(bytes.begin(), bytes.end());
    } else {
      const auto bytes = address.to_v6().to_bytes();
      key.assign(bytes.begin(), bytes.end());
    }
    std::shared_ptr<ServerShared> shared = shared_owner_;
    {
      std::lock_guard lock(shared->clients_mu);
      uint32_t& count = shared->clients[key];
      if (count >= shared->options.max_connections_per_client) {
        if (count == 0) shared->clients.erase(key);
        return nullptr;
      }
      ++count;
    }
    // Its deleter gives the share back; it holds the ServerShared, which a connection kept alive
    // by another thread past the server's end could otherwise outlive. (It points at the
    // ServerShared only to be non-null.)
    ServerShared* raw = shared.get();
    return std::shared_ptr<void>(raw, [shared, key = std::move(key)](void*) {
      std::lock_guard lock(shared->clients_mu);
      auto it = shared->clients.find(key);
      if (it != shared->clients.end() && --it->second == 0) shared->clients.erase(it);
    });
  }

  void LogRefusal(int64_t open) {
    const uint64_t refused = logs_.refusals.Event(std::chrono::steady_clock::now());
    if (refused == 0) return;
    const HttpServer::Options& o = shared_->options;
    if (refused == 1) {
      spdlog::warn(
          "{}: connection limit reached ({} open; {} {}); closing new connections at once "
          "(logged at most once per {} s)",
          o.name, open, o.limit_flag, shared_->max_connections, kAcceptErrorLogInterval.count());
    } else {
      spdlog::warn("{}: {} connection(s) refused since the previous line ({} open; {} {})", o.name,
                   refused, open, o.limit_flag, shared_->max_connections);
    }
  }

  // The per-client limit's refusals, throttled on their own (a line per 10 s at most), naming
  // the address of the one that set off the line.
  void LogClientRefusal(const asio::ip::address& address) {
    const uint64_t refused = logs_.client_refusals.Event(std::chrono::steady_clock::now());
    if (refused == 0) return;
    const HttpServer::Options& o = shared_->options;
    spdlog::warn(
        "{}: {} connection(s) refused for holding one client address's limit of {} (the last "
        "from {}; logged at most once per {} s)",
        o.name, refused, o.max_connections_per_client, address.to_string(),
        kAcceptErrorLogInterval.count());
  }

  std::vector<std::shared_ptr<IoThread>>* threads_;
  ServerShared* shared_;
  std::shared_ptr<ServerShared> shared_owner_;  // for the client slots' deleters
  TlsContext* tls_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  std::size_t next_ = 0;
  // The server's, shared with its other listener's acceptor (probe 56: each listener's own let
  // two lines through within the interval); both acceptors run on I/O thread 0.
  ServerShared::AcceptLogs& logs_;
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
using server_internal::TcpStream;

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
  if (options.http2_max_concurrent_streams == 0)
    return InvalidArgument("http2_max_concurrent_streams must be > 0");
  if (options.http2_initial_window_bytes == 0 || options.http2_initial_window_bytes > 0x7fffffffu)
    return InvalidArgument("http2_initial_window_bytes must be in 1..2^31-1");
  if (options.http2_connection_window_bytes < 65535u ||
      options.http2_connection_window_bytes > 0x7fffffffu)
    return InvalidArgument("http2_connection_window_bytes must be in 65535..2^31-1");
  if (options.http2_max_frame_bytes < (1u << 14) || options.http2_max_frame_bytes > (1u << 24) - 1)
    return InvalidArgument("http2_max_frame_bytes must be in 16384..16777215");
  if (options.tls_ticket_key_rotation <= std::chrono::seconds(0))
    return InvalidArgument("tls_ticket_key_rotation must be > 0");
  const bool tls = !options.tls_cert_file.empty() || !options.tls_key_file.empty();
  if (tls && (options.tls_cert_file.empty() || options.tls_key_file.empty()))
    return InvalidArgument("TLS needs both a certificate and a key");
  if (!tls && !options.tls_client_ca_file.empty())
    return InvalidArgument("a TLS client CA needs TLS (a certificate and a key)");
  if (!tls && !options.plain_http)
    return InvalidArgument("plain_http off needs TLS (a certificate and a key)");
  std::unique_ptr<HttpServer> server(new HttpServer(options, handler));
  if (tls) {
    server_internal::TlsContext::Options t;
    t.cert_file = options.tls_cert_file;
    t.key_file = options.tls_key_file;
    t.client_ca_file = options.tls_client_ca_file;
    t.ticket_key_rotation = options.tls_ticket_key_rotation;
    t.h2_only = options.tls_h2_only;
    auto context = server_internal::TlsContext::Create(t);
    if (!context.ok()) return context.status();
    server->tls_ = std::move(context).value();
  }
  return server;
}

Status HttpServer::CheckTlsFiles(const std::string& cert_file, const std::string& key_file,
                                 const std::string& client_ca_file) {
  server_internal::TlsContext::Options t;
  t.cert_file = cert_file;
  t.key_file = key_file;
  t.client_ca_file = client_ca_file;
  return server_internal::TlsContext::Create(t).status();
}

HttpServer::HttpServer(const Options& options, HttpHandler* handler)
    : options_(options), shared_(std::make_shared<server_internal::ServerShared>()) {
  shared_->options = options;
  shared_->handler = handler;
  // Known from the start (App sizes the gRPC port's limit from it before anything listens).
  shared_->max_connections = options.max_connections;
  if (shared_->max_connections == 0) {
    rlimit limit{};
    shared_->max_connections =
        MaxConnectionsFor(::getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 1024);
  }
}

HttpServer::~HttpServer() {
  Stop();
  acceptor_.reset();
  tls_acceptor_.reset();
  for (auto& io : io_) io->connections.clear();  // threads are joined (or never started)
}

Status HttpServer::Start() {
  if (started_ || stopped_) return InvalidArgument("HttpServer::Start called twice");
  const int threads = options_.io_threads > 0 ? options_.io_threads : UsableCores();
  io_.clear();
  try {
    for (int i = 0; i < threads; ++i) io_.push_back(std::make_shared<IoThread>());
  } catch (const boost::system::system_error& e) {
    // An io_context takes descriptors of its own (epoll, eventfd, timerfd): with none left
    // the exception ended the process (probe 39, ulimit -n 16).
    io_.clear();
    return Unavailable("cannot make the I/O threads' event loops: " + e.code().message());
  }
  const auto address = boost::asio::ip::make_address(options_.address);
  if (options_.plain_http) {
    acceptor_ = std::make_unique<server_internal::Acceptor>(&io_, shared_);
    RETURN_IF_ERROR(acceptor_->Listen(boost::asio::ip::tcp::endpoint(address, options_.port)));
    port_ = acceptor_->port();
  }
  if (tls_) {
    tls_acceptor_ = std::make_unique<server_internal::Acceptor>(&io_, shared_, tls_.get());
    RETURN_IF_ERROR(
        tls_acceptor_->Listen(boost::asio::ip::tcp::endpoint(address, options_.tls_port)));
    tls_port_ = tls_acceptor_->port();
  }
  if (acceptor_) acceptor_->Accept();
  if (tls_acceptor_) tls_acceptor_->Accept();
  // Busy polling: at most half the usable cores poll, so there is always a core for the
  // clients and the models (none on a one-core machine).
  const int max_pollers = UsableCores() / 2;
  for (int i = 0; i < threads; ++i) {
    IoThread* io = io_[i].get();
    io->busy_poll = options_.busy_poll;
    io->max_pollers = max_pollers;
    io->thread = std::thread(server_internal::RunIoThread, io, i);
  }
  started_ = true;
  return Status::Ok();
}

void HttpServer::Stop() {
  Stop(options_.shutdown_timeout);
}

void HttpServer::Stop(std::chrono::milliseconds shutdown_timeout) {
  if (!started_ || stopped_) return;
  stopped_ = true;
  auto& shared = *shared_;
  shared.stopping.store(true);

  // 1. No new connections; idle keep-alive connections close now, busy ones after their
  //    current response (with Connection: close).
  RunOn(*io_[0], [this] {
    if (acceptor_) acceptor_->Close();
    if (tls_acceptor_) tls_acceptor_->Close();
  });
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
        lock, shutdown_timeout, [&] { return shared.live_connections.load() == 0; });
    if (!drained) {
      spdlog::warn("{}: {} connection(s) still busy after {} ms; closing them", shared.options.name,
                   shared.live_connections.load(), shutdown_timeout.count());
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

uint64_t HttpServer::DescriptorReserveFor(uint64_t descriptor_limit) {
  if (descriptor_limit == static_cast<uint64_t>(RLIM_INFINITY)) descriptor_limit = 1u << 20;
  // At most three quarters: with a small limit (ulimit -n 64) a reserve of 64 left one
  // connection; half left too few for the ~26 descriptors a start takes (probes 39 and 40).
  return std::min(std::max<uint64_t>(64, descriptor_limit / 8), descriptor_limit / 4 * 3);
}

uint64_t HttpServer::MaxConnectionsFor(uint64_t descriptor_limit) {
  if (descriptor_limit == static_cast<uint64_t>(RLIM_INFINITY)) descriptor_limit = 1u << 20;
  const uint64_t reserve = DescriptorReserveFor(descriptor_limit);
  return descriptor_limit > reserve ? descriptor_limit - reserve : 1;
}

uint64_t HttpServer::max_connections() const {
  return shared_->max_connections;
}

int64_t HttpServer::open_connections() const {
  return shared_->live_connections.load(std::memory_order_relaxed) +
         shared_->accepting.load(std::memory_order_relaxed);
}

uint64_t HttpServer::refused_connections() const {
  return shared_->refused_connections.load(std::memory_order_relaxed);
}

uint64_t HttpServer::failed_accepts() const {
  return shared_->failed_accepts.load(std::memory_order_relaxed);
}

HttpServer::TlsHandshakes HttpServer::tls_handshakes() const {
  TlsHandshakes out;
  out.tls12 = shared_->tls_finished[0].load(std::memory_order_relaxed);
  out.tls13 = shared_->tls_finished[1].load(std::memory_order_relaxed);
  out.resumed = shared_->tls_resumed.load(std::memory_order_relaxed);
  out.failed = shared_->tls_failed.load(std::memory_order_relaxed);
  out.timed_out = shared_->tls_timed_out.load(std::memory_order_relaxed);
  return out;
}

}  // namespace harrier
