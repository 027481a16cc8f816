#include "fuzz/http_fuzz_harness.h"

#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/ip/address_v4.hpp>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/request_id.h"
#include "server/http_common.h"
#include "server/http_connection.h"

namespace harrier::fuzz {

namespace asio = boost::asio;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "http fuzz harness: %s\n", what.c_str());
  std::abort();
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Reads every byte, so that ASan sees a view into freed or foreign memory.
unsigned Touch(std::string_view s) {
  unsigned sum = 0;
  for (char c : s) sum += static_cast<unsigned char>(c);
  return sum;
}

volatile unsigned g_sink = 0;

}  // namespace

ExchangeOptions ExchangeOptions::FromByte(uint8_t byte) {
  static constexpr std::array<std::size_t, 8> kChunkBytes = {0, 1, 2, 3, 7, 16, 64, 500};
  ExchangeOptions o;
  o.chunk_bytes = kChunkBytes[byte & 7];
  o.stop_after_first_chunk = (byte & 8) != 0;
  o.defer_all = (byte & 16) != 0;
  return o;
}

HttpServer::Options FuzzServerOptions() {
  HttpServer::Options o;
  o.max_body_bytes = 4096;
  o.max_header_bytes = 2048;
  o.http2_max_concurrent_streams = 8;
  o.http2_initial_window_bytes = 4096;
  o.http2_connection_window_bytes = 65535;
  o.http2_max_frame_bytes = 16384;
  o.h2c_upgrade = true;  // the upgrade path is fuzzed too (off by default in the server)
  return o;
}

// Checks what the server passes in and what it reports about each response (file comment).
class HttpFuzzHarness::Handler final : public HttpHandler {
 public:
  void set_defer_all(bool defer_all) { defer_all_ = defer_all; }

  std::optional<HttpResponse> Precheck(const HttpRequest& head) override {
    if (head.body != nullptr || head.cancellation != nullptr)
      Fail("Precheck's head carries a body or a cancellation token");
    CheckHeaders(head);
    if (!StartsWith(head.target, "/refuse")) return std::nullopt;
    HttpResponse response = Answer(head, 429);
    response.body = "{\"error\":\"refused by Precheck\"}";
    return response;
  }

  void Handle(HttpRequest&& request, HttpResponder respond) override {
    CheckRequest(request);
    const std::string_view target = request.target;
    if (StartsWith(target, "/throw")) throw std::runtime_error("the fuzz handler throws");
    if (defer_all_ || StartsWith(target, "/defer")) {
      deferred_.push_back({request.cancellation, std::move(respond), Echo(request)});
      return;
    }
    if (StartsWith(target, "/twice")) {
      respond(Echo(request));
      respond(Answer(request, 201));
      return;
    }
    if (StartsWith(target, "/status/")) {
      int status = 0;
      const std::string_view digits = target.substr(8);
      std::from_chars(digits.data(), digits.data() + digits.size(), status);
      respond(Answer(request, status));
      return;
    }
    respond(Echo(request));
  }

  // Answers the deferred requests from outside the io_context, as a model worker would: the
  // responders post to the I/O thread. `connection_gone`: the client's connection is closed,
  // so each of these requests must have been cancelled.
  void AnswerDeferred(bool connection_gone) {
    std::vector<Deferred> deferred = std::move(deferred_);
    deferred_.clear();
    for (Deferred& d : deferred) {
      if (connection_gone && !d.cancellation->cancelled())
        Fail("a request whose connection closed before its answer was not cancelled");
      d.respond(std::move(d.response));
    }
  }

  // After an exchange: every response handed to the transport has reported, once.
  void CheckAllReported() {
    if (!deferred_.empty()) Fail("requests left unanswered");
    for (std::size_t i = 0; i < reports_.size(); ++i) {
      if (reports_[i] != 1) {
        Fail("response " + std::to_string(i) + "'s on_sent was called " +
             std::to_string(reports_[i]) + " times by the time its connection was gone");
      }
    }
    reports_.clear();
    ++exchange_;
  }

 private:
  struct Deferred {
    std::shared_ptr<CancellationToken> cancellation;
    HttpResponder respond;
    HttpResponse response;
  };

  static void CheckHeaders(const HttpRequest& request) {
    if (request.method.empty()) Fail("a request without a method");
    unsigned sum = Touch(request.method) + Touch(request.target);
    for (const auto& [name, value] : request.headers) {
      for (char c : name)
        if (c >= 'A' && c <= 'Z') Fail("header name '" + name + "' is not lower case");
      sum += Touch(name) + Touch(value);
    }
    g_sink = g_sink + sum;
  }

  static void CheckRequest(const HttpRequest& request) {
    CheckHeaders(request);
    if (request.body == nullptr) Fail("a request without a body string");
    if (request.body->capacity() < request.body->size() + server_internal::kBodyPadding)
      Fail("a request body without kBodyPadding spare bytes");
    g_sink = g_sink + Touch(*request.body);
    if (request.cancellation == nullptr) Fail("a request without a cancellation token");
    if (request.version == HttpVersion::kUnknown) Fail("a request without its HTTP version");
    if (request.received_at == Clock::time_point{} ||
        request.body_received_at == Clock::time_point{})
      Fail("a request without its receipt times");
    if (request.body_received_at < request.received_at)
      Fail("a request whose body was in before its header");
  }

  // A response whose on_sent counts its reports.
  HttpResponse Answer(const HttpRequest& request, int status) {
    HttpResponse response;
    response.status = status;
    response.headers = {{"Content-Type", "application/octet-stream"},
                        {"Content-Length", "1"},
                        {"Connection", "close"},
                        {"Transfer-Encoding", "chunked"},
                        {"Upgrade", "h2c"},
                        {"Keep-Alive", "timeout=1"}};
    if (request.HasHeader("x-echo"))
      response.headers.emplace_back("X-Echo", std::string(request.Header("x-echo")));
    const std::size_t index = reports_.size();
    reports_.push_back(0);
    response.on_sent = [this, index, exchange = exchange_](bool sent, Clock::time_point at) {
      if (exchange != exchange_) Fail("a response's on_sent was called after its connection");
      if (++reports_[index] > 1) Fail("a response's on_sent was called twice");
      if (sent != (at != Clock::time_point{}))
        Fail("on_sent's time is set exactly when the response was sent");
    };
    return response;
  }

  HttpResponse Echo(const HttpRequest& request) {
    HttpResponse response = Answer(request, 200);
    response.body = *request.body;
    return response;
  }

  bool defer_all_ = false;
  std::vector<Deferred> deferred_;
  std::vector<int> reports_;  // on_sent calls, per response handed out during this exchange
  uint64_t exchange_ = 0;
};

// Reads every record (the views die with Write()) and checks what the server refuses with.
class HttpFuzzHarness::CountingAccessLog final : public AccessLog {
 public:
  void Write(const AccessRecord& r) override {
    // 501: a transfer coding before the final chunked; 505: a request line of HTTP/2.0 or later
    // on an HTTP/1.1 connection (docs/server.md).
    if (r.status != 400 && r.status != 408 && r.status != 413 && r.status != 431 &&
        r.status != 501 && r.status != 505)
      Fail("the transport logged a refusal with status " + std::to_string(r.status));
    if (r.protocol != "http") Fail("a transport access record not marked \"http\"");
    if (!IsAcceptableRequestId(r.request_id)) Fail("an access record with a malformed request id");
    g_sink = g_sink + Touch(r.request_id) + Touch(r.method) + Touch(r.target) + Touch(r.error) +
             Touch(r.model) + Touch(r.input_shapes_json);
  }
};

HttpFuzzHarness::HttpFuzzHarness(const HttpServer::Options& options)
    : io_(std::make_shared<server_internal::IoThread>()),
      handler_(std::make_unique<Handler>()),
      access_log_(std::make_unique<CountingAccessLog>()),
      acceptor_(io_->ioc) {
  const char* level = std::getenv("HARRIER_FUZZ_LOG");
  spdlog::set_level(level != nullptr ? spdlog::level::from_str(level) : spdlog::level::off);
  shared_.options = options;
  shared_.options.access_log = access_log_.get();
  shared_.handler = handler_.get();
  const asio::ip::tcp::endpoint endpoint(asio::ip::address_v4::loopback(), 0);
  acceptor_.open(endpoint.protocol());
  acceptor_.bind(endpoint);
  acceptor_.listen();
  sink_.resize(64 * 1024);
  show_responses_ = std::getenv("HARRIER_FUZZ_SHOW_RESPONSES") != nullptr;
}

HttpFuzzHarness::~HttpFuzzHarness() = default;

void HttpFuzzHarness::Exchange(std::string_view prologue, std::string_view input,
                               const ExchangeOptions& options) {
  handler_->set_defer_all(options.defer_all);
  // libFuzzer's timers interrupt system calls (SIGALRM): connect and accept are retried.
  const asio::ip::tcp::endpoint endpoint = acceptor_.local_endpoint();
  client_ = std::make_unique<server_internal::TcpStream>(io_->ioc, endpoint.protocol());
  error_code ec;
  do {
    client_->connect(endpoint, ec);
  } while (ec == asio::error::interrupted || ec == asio::error::already_started);
  if (ec && ec != asio::error::already_connected) Fail("connect: " + ec.message());
  // A reset instead of a FIN on close: the client's side never sits in TIME_WAIT, so a long
  // run does not use up the ephemeral ports.
  client_->set_option(asio::socket_base::linger(true, 0));
  client_->non_blocking(true);
  client_eof_ = false;
  unsent_.clear();
  server_internal::TcpStream server(io_->ioc);
  do {
    acceptor_.accept(server, ec);
  } while (ec == asio::error::interrupted);
  if (ec) Fail("accept: " + ec.message());
  error_code ignored;
  server.set_option(asio::ip::tcp::no_delay(true), ignored);  // as the acceptor does
  std::make_shared<server_internal::HttpConnection>(std::move(server), io_.get(), &shared_)
      ->Start();
  Pump();

  if (!prologue.empty()) Send(prologue);
  std::size_t chunks = 0;
  while (!input.empty()) {
    std::size_t n = input.size();
    if (options.chunk_bytes > 0 && chunks < ExchangeOptions::kMaxChunks)
      n = std::min(n, options.chunk_bytes);
    Send(input.substr(0, n));
    input.remove_prefix(n);
    if (chunks++ == 0 && options.stop_after_first_chunk) BeginStop();
  }
  Finish();
}

// Writes `bytes` (after what the server has not taken yet), lets the server run on them, then
// answers the requests deferred so far.
void HttpFuzzHarness::Send(std::string_view bytes) {
  unsent_.append(bytes);
  Pump();
  handler_->AnswerDeferred(io_->connections.empty());
  Pump();
}

// Runs both sides until neither can move: the client has written what the server will take now
// and read what the server wrote, and no handler is ready. A loopback write is in the server's
// receive queue when write() returns, so the server sees each chunk in the next poll.
void HttpFuzzHarness::Pump() {
  for (;;) {
    bool moved = false;
    error_code ec;
    if (!unsent_.empty()) {
      const std::size_t n = client_->write_some(asio::buffer(unsent_), ec);
      if (!ec) {
        unsent_.erase(0, n);
        moved = true;
      } else if (ec == asio::error::interrupted) {
        moved = true;  // try again
      } else if (ec != asio::error::would_block && ec != asio::error::try_again) {
        unsent_.clear();  // the server closed or reset: the rest can never arrive
      }
    }
    while (!client_eof_) {
      const std::size_t n = client_->read_some(asio::buffer(sink_), ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) break;
      if (ec == asio::error::interrupted) continue;
      if (ec) client_eof_ = true;
      if (show_responses_) std::fwrite(sink_.data(), 1, n, stderr);
      moved = true;
    }
    if (io_->ioc.poll() > 0) moved = true;
    if (!moved) return;
  }
}

void HttpFuzzHarness::BeginStop() {
  shared_.stopping.store(true);
  auto connections = io_->connections;  // OnServerStopping() may close, editing the list
  for (auto& c : connections) c->OnServerStopping();
  Pump();
}

// Half-closes the client's side, answers what is still deferred, and runs until the server has
// closed the connection; then checks the responses' reports.
void HttpFuzzHarness::Finish() {
  error_code ignored;
  client_->shutdown(asio::socket_base::shutdown_send, ignored);
  Pump();
  handler_->AnswerDeferred(io_->connections.empty());
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    Pump();
    // A pipelined request the server took up after an answer went out: deferred too.
    handler_->AnswerDeferred(io_->connections.empty());
    // Once the server has said all it will, close for good (a reset), so that a server that
    // lingers to drain the request sees the end at once.
    if (client_eof_ && client_->is_open()) client_->close(ignored);
    if (client_eof_ && io_->connections.empty()) break;
    if (Clock::now() > deadline) Fail("the server kept the connection open after the client left");
    io_->ioc.run_one_for(std::chrono::milliseconds(10));  // waits for the socket or a timer
  }
  client_.reset();
  while (io_->ioc.poll() > 0) {
  }  // aborted operations release the connection objects
  shared_.stopping.store(false);
  if (shared_.live_connections.load() != 0) Fail("live_connections is not back to 0");
  handler_->CheckAllReported();
}

}  // namespace harrier::fuzz
