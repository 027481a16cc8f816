// HTTP/2 (h2c with prior knowledge) through HttpServer, driven by an nghttp2 client session on
// a blocking socket: streams, Precheck refusals, limits, resets and cancellation, Stop.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "harrier/response_stream.h"
#include "server/http_server.h"
#include "server/incoming_bodies.h"
#include "server/raw_http_client.h"
#include "server/sent_recorder.h"
#include "util/recording_access_log.h"

namespace harrier {
namespace {

using std::chrono::milliseconds;
constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

struct H2Response {
  int status = 0;
  std::map<std::string, std::string> headers;
  std::string body;
  bool closed = false;
  uint32_t error_code = 0;  // of the stream's close (RST_STREAM's code, or 0)
  bool reset = false;       // closed by RST_STREAM
};

// A blocking HTTP/2 client: requests are queued with Submit(), then Run() pumps the socket
// until a condition holds or the time is up.
class H2Client {
 public:
  // `window`: the streams' initial flow-control window; with `window_updates` false the client
  // never opens it again (a client that does not read).
  explicit H2Client(uint16_t port, uint32_t window = 1 << 24, bool window_updates = true) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    nghttp2_session_callbacks* cbs;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_header_callback(
        cbs, [](nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                const uint8_t* value, size_t valuelen, uint8_t, void* user) {
          auto* c = static_cast<H2Client*>(user);
          std::string n(reinterpret_cast<const char*>(name), namelen);
          std::string v(reinterpret_cast<const char*>(value), valuelen);
          auto& r = c->responses_[frame->hd.stream_id];
          if (n == ":status") {
            r.status = std::stoi(v);
          } else {
            r.headers[n] = v;
          }
          return 0;
        });
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
        cbs,
        [](nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
          static_cast<H2Client*>(user)->responses_[id].body.append(
              reinterpret_cast<const char*>(data), len);
          return 0;
        });
    nghttp2_session_callbacks_set_on_frame_recv_callback(
        cbs, [](nghttp2_session*, const nghttp2_frame* frame, void* user) {
          auto* c = static_cast<H2Client*>(user);
          if (frame->hd.type == NGHTTP2_RST_STREAM) c->responses_[frame->hd.stream_id].reset = true;
          if (frame->hd.type == NGHTTP2_GOAWAY) {
            c->goaway_ = true;
            c->goaway_error_ = frame->goaway.error_code;
          }
          return 0;
        });
    nghttp2_session_callbacks_set_on_stream_close_callback(
        cbs, [](nghttp2_session*, int32_t id, uint32_t error_code, void* user) {
          auto& r = static_cast<H2Client*>(user)->responses_[id];
          r.closed = true;
          r.error_code = error_code;
          return 0;
        });
    nghttp2_option* opt = nullptr;
    nghttp2_option_new(&opt);
    nghttp2_option_set_no_auto_window_update(opt, window_updates ? 0 : 1);
    nghttp2_session_client_new2(&session_, cbs, this, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cbs);
    nghttp2_settings_entry initial{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window};
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, &initial, 1);
  }
  ~H2Client() {
    nghttp2_session_del(session_);
    if (fd_ >= 0) ::close(fd_);
  }

  bool connected() const { return connected_; }
  bool goaway() const { return goaway_; }
  uint32_t goaway_error() const { return goaway_error_; }
  // Queues an empty SETTINGS frame (which the server acknowledges); false if nghttp2 refuses.
  bool SubmitSettings() {
    return nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0) == 0;
  }
  const H2Response& response(int32_t id) { return responses_[id]; }

  // Queues a request; `body` is sent as DATA (none when nullopt), ending the stream unless
  // `end_stream` is false (then the client says nothing more).
  int32_t Submit(const std::string& method, const std::string& path,
                 std::optional<std::string> body = std::nullopt,
                 std::vector<std::pair<std::string, std::string>> extra = {},
                 bool end_stream = true) {
    std::vector<std::pair<std::string, std::string>> h = {
        {":method", method}, {":scheme", "http"}, {":path", path}, {":authority", "t"}};
    for (auto& e : extra) h.push_back(e);
    std::vector<nghttp2_nv> nva;
    for (auto& [n, v] : h) {
      nva.push_back({reinterpret_cast<uint8_t*>(n.data()), reinterpret_cast<uint8_t*>(v.data()),
                     n.size(), v.size(), NGHTTP2_NV_FLAG_NONE});
    }
    if (!body)
      return nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(), nullptr, nullptr);
    auto source = std::make_unique<Body>();
    source->data = std::move(*body);
    source->end = end_stream;
    nghttp2_data_provider provider{};
    provider.source.ptr = source.get();
    provider.read_callback = [](nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                                uint32_t* flags, nghttp2_data_source* src, void*) -> ssize_t {
      auto* b = static_cast<Body*>(src->ptr);
      const size_t n = std::min(length, b->data.size() - b->sent);
      if (n == 0 && !b->end) return NGHTTP2_ERR_DEFERRED;
      std::memcpy(buf, b->data.data() + b->sent, n);
      b->sent += n;
      if (b->sent == b->data.size() && b->end) *flags |= NGHTTP2_DATA_FLAG_EOF;
      return static_cast<ssize_t>(n);
    };
    const int32_t id =
        nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(), &provider, nullptr);
    bodies_.push_back(std::move(source));
    return id;
  }

  // Writes what is queued without reading anything; false when the write fails.
  bool SendQueued() { return Send(); }

  // Request body bytes nghttp2 has taken to send so far, over every stream (flow control
  // permitting).
  std::size_t body_bytes_sent() const {
    std::size_t n = 0;
    for (const auto& b : bodies_) n += b->sent;
    return n;
  }

  void Reset(int32_t id) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  }

  // Opens stream `id`'s window and the connection's by `bytes` (sent at the next Run); with
  // `id` 0, the connection's alone.
  void OpenWindow(int32_t id, int32_t bytes) {
    if (id != 0) nghttp2_submit_window_update(session_, NGHTTP2_FLAG_NONE, id, bytes);
    nghttp2_submit_window_update(session_, NGHTTP2_FLAG_NONE, 0, bytes);
  }

  // Pumps until `done()` or the timeout; false on timeout, or when the connection ends first.
  bool Run(const std::function<bool()>& done, milliseconds timeout = milliseconds(5000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (!Send()) return done();
      if (done()) return true;
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 50))) <= 0) continue;
      char buf[65536];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        eof_ = true;
        return done();
      }
      if (nghttp2_session_mem_recv(session_, reinterpret_cast<uint8_t*>(buf),
                                   static_cast<size_t>(n)) < 0)
        return done();
    }
  }
  bool RunUntilClosed(int32_t id, milliseconds timeout = milliseconds(5000)) {
    return Run([&] { return responses_[id].closed; }, timeout);
  }
  bool eof() const { return eof_; }

  // Sends only the bytes given (for partial bodies written by hand after HEADERS).
  void SendRaw(const std::string& bytes) {
    (void)::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }

 private:
  struct Body {
    std::string data;
    size_t sent = 0;
    bool end = true;
  };
  bool Send() {
    for (;;) {
      const uint8_t* data;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) return false;
      if (n == 0) return true;
      ssize_t off = 0;
      while (off < n) {
        const ssize_t w = ::send(fd_, data + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
        if (w <= 0) return false;
        off += w;
      }
    }
  }

  int fd_ = -1;
  bool connected_ = false;
  bool goaway_ = false;
  uint32_t goaway_error_ = 0;
  bool eof_ = false;
  nghttp2_session* session_ = nullptr;
  std::map<int32_t, H2Response> responses_;
  std::vector<std::unique_ptr<Body>> bodies_;
};

class Handler : public HttpHandler {
 public:
  std::function<void(HttpRequest, HttpResponder)> on_request;
  std::function<std::optional<HttpResponse>(const HttpRequest&)> on_precheck;
  std::atomic<int> calls{0};

  void Handle(HttpRequest&& request, HttpResponder respond) override {
    ++calls;
    if (on_request) {
      on_request(std::move(request), std::move(respond));
      return;
    }
    HttpResponse r;
    r.headers.emplace_back("X-Method", request.method);
    r.headers.emplace_back("X-Target", request.target);
    r.headers.emplace_back("X-Foo", std::string(request.Header("x-foo")));
    r.headers.emplace_back("Connection", "keep-alive");  // must be dropped for HTTP/2
    r.body = *request.body;
    respond(std::move(r));
  }
  std::optional<HttpResponse> Precheck(const HttpRequest& head) override {
    EXPECT_EQ(head.body, nullptr);
    return on_precheck ? on_precheck(head) : std::nullopt;
  }
  std::function<std::shared_ptr<HttpStreamHandler>(
      const HttpRequest&, std::shared_ptr<HttpStreamWriter>, HttpResponse*)>
      on_open_stream;
  bool ServesAsStream(const HttpRequest&) const override { return bool(on_open_stream); }
  std::shared_ptr<HttpStreamHandler> OpenStream(const HttpRequest& head,
                                                std::shared_ptr<HttpStreamWriter> writer,
                                                HttpResponse* response_head) override {
    return on_open_stream ? on_open_stream(head, std::move(writer), response_head) : nullptr;
  }
};

// A streamed request's handler side: records what the transport tells it (on the I/O thread).
struct RecordingStream : HttpStreamHandler {
  mutable std::mutex mu;
  std::string body;
  bool ended = false;
  bool cancelled = false;
  bool unfinished_message = false;               // the whole body is one message not yet complete
  std::function<void(RecordingStream*)> on_end;  // called on OnBodyEnd, outside mu
  void OnBody(std::string_view bytes) override {
    std::lock_guard lock(mu);
    body.append(bytes);
  }
  void OnBodyEnd() override {
    {
      std::lock_guard lock(mu);
      ended = true;
    }
    if (on_end) on_end(this);
  }
  void OnCancel() override {
    std::lock_guard lock(mu);
    cancelled = true;
  }
  std::size_t PartialMessageBytes() const override {
    std::lock_guard lock(mu);
    return unfinished_message ? body.size() : 0;
  }
  std::size_t size() {
    std::lock_guard lock(mu);
    return body.size();
  }
};

class Http2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.address = "127.0.0.1";
    options_.port = 0;
    options_.io_threads = 2;
  }
  void TearDown() override {
    server_.reset();
    for (auto& t : threads_) t.join();
  }
  void StartServer() {
    auto server = HttpServer::Create(options_, &handler_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    ASSERT_TRUE(server_->Start().ok());
  }

  // Starts the server with a server-wide budget of `limit` bytes of bodies still arriving.
  std::shared_ptr<IncomingBodies> StartServerWithBudget(uint64_t limit) {
    auto budget = std::make_shared<IncomingBodies>(limit);
    options_.incoming_bodies = budget;
    StartServer();
    return budget;
  }

  // Every request is answered 200 with `bytes` of 'x'.
  void AnswerEveryRequestWith(size_t bytes) {
    handler_.on_request = [bytes](HttpRequest, HttpResponder respond) {
      HttpResponse r;
      r.body = std::string(bytes, 'x');
      respond(std::move(r));
    };
  }

  HttpServer::Options options_;
  Handler handler_;
  testing::RecordingAccessLog access_log_;  // used when a test sets options_.access_log
  std::unique_ptr<HttpServer> server_;
  std::vector<std::thread> threads_;
};

TEST_F(Http2Test, PriorKnowledgeServesConcurrentStreams) {
  StartServer();
  H2Client c(server_->port());
  ASSERT_TRUE(c.connected());
  std::vector<int32_t> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(c.Submit("POST", "/echo?i=" + std::to_string(i),
                           std::string(100000 * (i + 1), static_cast<char>('a' + i)),
                           {{"x-foo", "bar"}}));
  }
  ids.push_back(c.Submit("GET", "/get"));
  ASSERT_TRUE(c.Run([&] {
    for (int32_t id : ids)
      if (!c.response(id).closed) return false;
    return true;
  }));
  for (int i = 0; i < 5; ++i) {
    const auto& r = c.response(ids[i]);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, std::string(100000 * (i + 1), static_cast<char>('a' + i)));
    EXPECT_EQ(r.headers.at("x-method"), "POST");
    EXPECT_EQ(r.headers.at("x-target"), "/echo?i=" + std::to_string(i));
    EXPECT_EQ(r.headers.at("x-foo"), "bar");
    EXPECT_EQ(r.headers.at("content-length"), std::to_string(r.body.size()));
    EXPECT_EQ(r.headers.count("connection"), 0u);
  }
  EXPECT_EQ(c.response(ids[5]).status, 200);
  EXPECT_EQ(c.response(ids[5]).body, "");
  EXPECT_EQ(handler_.calls.load(), 6);
}

// HttpRequest::sole_requester over HTTP/2: a stream is its thread's sole requester when it is
// its connection's only open stream and no other connection on the thread asked lately.
TEST_F(Http2Test, SoleRequesterNeedsTheOnlyOpenStreamOfTheOnlyAskingConnection) {
  options_.io_threads = 1;
  options_.sole_requester_window = std::chrono::microseconds(200'000);
  std::mutex mu;
  std::vector<HttpResponder> held;  // "/hold" answers wait here until released
  handler_.on_request = [&](HttpRequest request, HttpResponder respond) {
    HttpResponse r;
    r.body = request.sole_requester ? "sole" : "shared";
    if (request.target == "/hold") {
      std::lock_guard lock(mu);
      held.push_back(std::move(respond));
      return;
    }
    respond(std::move(r));
  };
  StartServer();
  H2Client a(server_->port());
  ASSERT_TRUE(a.connected());
  auto ask = [](H2Client& c, const std::string& path = "/x") {
    const int32_t id = c.Submit("GET", path);
    if (!c.Run([&] { return c.response(id).closed; })) return std::string("no response");
    return c.response(id).body;
  };
  EXPECT_EQ(ask(a), "sole");
  EXPECT_EQ(ask(a), "sole");
  // A second stream while the first is open: not sole.
  const int32_t open = a.Submit("GET", "/hold");
  ASSERT_TRUE(a.Run([&] {
    std::lock_guard lock(mu);
    return held.size() == 1;
  }));
  EXPECT_EQ(ask(a), "shared");
  {
    std::lock_guard lock(mu);
    HttpResponse r;
    r.body = "released";
    held[0](std::move(r));
  }
  ASSERT_TRUE(a.Run([&] { return a.response(open).closed; }));
  EXPECT_EQ(ask(a), "sole");
  // Another connection on the same thread: neither is sole within the window.
  H2Client b(server_->port());
  ASSERT_TRUE(b.connected());
  EXPECT_EQ(ask(b), "shared");
  EXPECT_EQ(ask(a), "shared");
}

TEST_F(Http2Test, PrecheckRefusalNeverHandsTheBodyOverAndTheConnectionGoesOn) {
  handler_.on_precheck = [](const HttpRequest& head) -> std::optional<HttpResponse> {
    if (head.target != "/refuse") return std::nullopt;
    HttpResponse r;
    r.status = 503;
    r.body = "busy";
    return r;
  };
  StartServer();
  H2Client c(server_->port());
  // Larger than the server's stream window: the client is still sending when refused.
  const int32_t refused = c.Submit("POST", "/refuse", std::string(8 << 20, 'x'));
  ASSERT_TRUE(c.RunUntilClosed(refused));
  EXPECT_EQ(c.response(refused).status, 503);
  EXPECT_EQ(c.response(refused).body, "busy");
  EXPECT_TRUE(c.response(refused).reset);
  EXPECT_EQ(c.response(refused).error_code, static_cast<uint32_t>(NGHTTP2_NO_ERROR));
  const int32_t ok = c.Submit("POST", "/ok", std::string("after"));
  ASSERT_TRUE(c.RunUntilClosed(ok));
  EXPECT_EQ(c.response(ok).status, 200);
  EXPECT_EQ(c.response(ok).body, "after");
  EXPECT_EQ(handler_.calls.load(), 1);
}

TEST_F(Http2Test, BodyOverTheLimitGets413OnItsStreamOnly) {
  options_.max_body_bytes = 1000;
  StartServer();
  H2Client c(server_->port());
  const int32_t big = c.Submit("POST", "/x", std::string(5000, 'x'));
  const int32_t small = c.Submit("POST", "/y", std::string(10, 'y'));
  ASSERT_TRUE(c.Run([&] { return c.response(big).closed && c.response(small).closed; }));
  EXPECT_EQ(c.response(big).status, 413);
  EXPECT_EQ(c.response(small).status, 200);
  EXPECT_EQ(handler_.calls.load(), 1);
}

TEST_F(Http2Test, HeaderListOverTheLimitGets431) {
  options_.max_header_bytes = 1024;
  StartServer();
  H2Client c(server_->port());
  const int32_t id = c.Submit("GET", "/x", std::nullopt, {{"x-big", std::string(2000, 'v')}});
  ASSERT_TRUE(c.RunUntilClosed(id));
  EXPECT_EQ(c.response(id).status, 431);
  EXPECT_EQ(handler_.calls.load(), 0);
}

TEST_F(Http2Test, ClientResetCancelsTheRequestAndLateResponseIsDropped) {
  std::mutex mu;
  std::optional<HttpResponder> held;
  std::shared_ptr<CancellationToken> token;
  handler_.on_request = [&](HttpRequest request, HttpResponder respond) {
    std::lock_guard<std::mutex> lock(mu);
    token = request.cancellation;
    held = std::move(respond);
  };
  StartServer();
  H2Client c(server_->port());
  const int32_t id = c.Submit("POST", "/slow", std::string("x"));
  ASSERT_TRUE(c.Run([&] {
    std::lock_guard<std::mutex> lock(mu);
    return held.has_value();
  }));
  c.Reset(id);
  ASSERT_TRUE(c.Run([&] {
    std::lock_guard<std::mutex> lock(mu);
    return token->cancelled();
  }));
  {
    std::lock_guard<std::mutex> lock(mu);
    (*held)(HttpResponse{});  // late: dropped
  }
  handler_.on_request = nullptr;
  const int32_t next = c.Submit("GET", "/next");
  ASSERT_TRUE(c.RunUntilClosed(next));
  EXPECT_EQ(c.response(next).status, 200);
}

TEST_F(Http2Test, ResponderFromAnotherThread) {
  handler_.on_request = [&](HttpRequest request, HttpResponder respond) {
    threads_.emplace_back([request = std::move(request), respond = std::move(respond)] {
      std::this_thread::sleep_for(milliseconds(20));
      HttpResponse r;
      r.status = 201;
      r.body = *request.body + "!";
      respond(std::move(r));
    });
  };
  StartServer();
  H2Client c(server_->port());
  const int32_t id = c.Submit("POST", "/t", std::string("hi"));
  ASSERT_TRUE(c.RunUntilClosed(id));
  EXPECT_EQ(c.response(id).status, 201);
  EXPECT_EQ(c.response(id).body, "hi!");
}

TEST_F(Http2Test, StopSendsGoawayAndFinishesTheStreamInFlight) {
  std::mutex mu;
  std::optional<HttpResponder> held;
  handler_.on_request = [&](HttpRequest, HttpResponder respond) {
    std::lock_guard<std::mutex> lock(mu);
    held = std::move(respond);
  };
  StartServer();
  H2Client c(server_->port());
  const int32_t id = c.Submit("GET", "/slow");
  ASSERT_TRUE(c.Run([&] {
    std::lock_guard<std::mutex> lock(mu);
    return held.has_value();
  }));
  std::thread stopper([&] { server_->Stop(); });
  ASSERT_TRUE(c.Run([&] { return c.goaway(); }));
  {
    std::lock_guard<std::mutex> lock(mu);
    HttpResponse r;
    r.body = "done";
    (*held)(std::move(r));
  }
  ASSERT_TRUE(c.RunUntilClosed(id));
  EXPECT_EQ(c.response(id).body, "done");
  stopper.join();
}

// nghttp2 ends a SETTINGS flood only when its queue of ACKs passes 1,000, which a peer that
// reads them never lets happen (CI's grpc_wire suite saw 14,001 ACKs and no GOAWAY): the
// connection counts them itself.
TEST_F(Http2Test, ASettingsFloodEndsInGoawayEvenWhenItsAcksAreRead) {
  StartServer();
  H2Client c(server_->port());
  int submitted = 0;
  for (int i = 0; i < 300; ++i) submitted += c.SubmitSettings() ? 1 : 0;
  ASSERT_GT(submitted, 150);
  ASSERT_TRUE(c.Run([&] { return c.goaway(); }));
  EXPECT_EQ(c.goaway_error(), static_cast<uint32_t>(NGHTTP2_ENHANCE_YOUR_CALM));
  // A few SETTINGS, as any client sends, are fine; and the next connection is served.
  H2Client d(server_->port());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(d.SubmitSettings());
  const int32_t id = d.Submit("GET", "/after");
  ASSERT_TRUE(d.RunUntilClosed(id));
  EXPECT_EQ(d.response(id).status, 200);
  EXPECT_FALSE(d.goaway());
}

// A connection the server ends keeps reading (and dropping) what the client still sends, so the
// kernel does not answer it with a reset that would fail the client's writes, or destroy the
// GOAWAY before the client reads it (CI saw the flood test above fail that way).
TEST_F(Http2Test, AClientStillSendingAfterTheGoawayCanReadIt) {
  StartServer();
  H2Client c(server_->port());
  for (int i = 0; i < 150; ++i) ASSERT_TRUE(c.SubmitSettings());
  ASSERT_TRUE(c.SendQueued());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the server has sent GOAWAY
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(c.SubmitSettings());
  ASSERT_TRUE(c.SendQueued());
  ASSERT_TRUE(c.Run([&] { return c.goaway(); }));
  EXPECT_EQ(c.goaway_error(), static_cast<uint32_t>(NGHTTP2_ENHANCE_YOUR_CALM));
  ASSERT_TRUE(c.Run([&] { return c.eof(); }));  // and then the server's side closes
}

TEST_F(Http2Test, ConnectionLossCancelsEveryOpenRequest) {
  std::mutex mu;
  std::vector<std::shared_ptr<CancellationToken>> tokens;
  std::vector<HttpResponder> held;
  handler_.on_request = [&](HttpRequest request, HttpResponder respond) {
    std::lock_guard<std::mutex> lock(mu);
    tokens.push_back(request.cancellation);
    held.push_back(std::move(respond));
  };
  StartServer();
  {
    H2Client c(server_->port());
    c.Submit("GET", "/a");
    c.Submit("GET", "/b");
    ASSERT_TRUE(c.Run([&] {
      std::lock_guard<std::mutex> lock(mu);
      return tokens.size() == 2;
    }));
  }  // closes the socket
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(5000);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (tokens[0]->cancelled() && tokens[1]->cancelled()) break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::sleep_for(milliseconds(5));
  }
}

// ---- Tracing: receipt times, HttpRequest::version and HttpResponse::on_sent ----------------

struct SeenRequest {
  std::chrono::steady_clock::time_point received_at, body_received_at, handled_at;
  HttpVersion version = HttpVersion::kUnknown;
};

TEST_F(Http2Test, OnSentReportsEachStreamOnceAndReceiptIsStamped) {
  testing::SentRecorder sent;
  std::mutex mu;
  std::map<std::string, SeenRequest> seen;
  handler_.on_request = [&](HttpRequest request, HttpResponder respond) {
    {
      std::lock_guard<std::mutex> lock(mu);
      seen[request.target] = {request.received_at, request.body_received_at,
                              std::chrono::steady_clock::now(), request.version};
    }
    HttpResponse r;
    r.body = *request.body;
    r.on_sent = sent.Callback();
    respond(std::move(r));
  };
  StartServer();
  H2Client c(server_->port());
  // Larger than the stream window (1 MiB): the body needs several reads and WINDOW_UPDATEs.
  const int32_t big = c.Submit("POST", "/big", std::string(4 << 20, 'b'));
  const int32_t get = c.Submit("GET", "/get");
  ASSERT_TRUE(c.Run([&] { return c.response(big).closed && c.response(get).closed; }));
  EXPECT_EQ(c.response(big).body.size(), std::size_t{4} << 20);
  ASSERT_TRUE(sent.WaitForCalls(2));
  std::this_thread::sleep_for(milliseconds(50));
  const auto calls = sent.calls();
  ASSERT_EQ(calls.size(), 2u);
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& call : calls) EXPECT_TRUE(call.sent);
  for (const auto& [target, s] : seen) {
    EXPECT_EQ(s.version, HttpVersion::kHttp2) << target;
    EXPECT_NE(s.received_at, std::chrono::steady_clock::time_point{}) << target;
    EXPECT_LE(s.received_at, s.body_received_at) << target;
    EXPECT_LE(s.body_received_at, s.handled_at) << target;
  }
  EXPECT_EQ(seen["/get"].body_received_at, seen["/get"].received_at);
  EXPECT_GT(seen["/big"].body_received_at, seen["/big"].received_at);
  for (const auto& call : calls) {
    EXPECT_GE(call.at, std::min(seen["/big"].handled_at, seen["/get"].handled_at));
  }
}

TEST_F(Http2Test, UpgradedRequestIsHttp2AndReportsItsSend) {
  testing::SentRecorder sent;
  std::atomic<HttpVersion> version{HttpVersion::kUnknown};
  std::atomic<bool> stamped{false};
  handler_.on_request = [&](HttpRequest request, HttpResponder respond) {
    version = request.version;
    stamped = request.received_at != std::chrono::steady_clock::time_point{} &&
              request.received_at <= request.body_received_at;
    HttpResponse r;
    r.body = "upgraded";
    r.on_sent = sent.Callback();
    respond(std::move(r));
  };
  options_.h2c_upgrade = true;  // --http2-upgrade on
  StartServer();
  testing::RawHttpClient c(server_->port());
  ASSERT_TRUE(
      c.Send("POST /u HTTP/1.1\r\nHost: t\r\nConnection: Upgrade, HTTP2-Settings\r\n"
             "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABk\r\nContent-Length: 2\r\n\r\nhi"));
  auto switching = c.ReadResponse();
  ASSERT_TRUE(switching);
  EXPECT_EQ(switching->status, 101);
  ASSERT_TRUE(c.Send(std::string(kPreface) + std::string("\0\0\0\x04\0\0\0\0\0", 9)));
  ASSERT_TRUE(sent.WaitForCalls(1));
  EXPECT_TRUE(sent.calls()[0].sent);
  EXPECT_EQ(version.load(), HttpVersion::kHttp2);
  EXPECT_TRUE(stamped.load());
}

TEST_F(Http2Test, OnSentIsFalseWhenTheClientResetsTheStreamFirst) {
  std::mutex mu;
  std::optional<HttpResponder> held;
  std::shared_ptr<CancellationToken> token;
  handler_.on_request = [&](HttpRequest request, HttpResponder respond) {
    std::lock_guard<std::mutex> lock(mu);
    token = request.cancellation;
    held = std::move(respond);
  };
  StartServer();
  H2Client c(server_->port());
  const int32_t id = c.Submit("GET", "/slow");
  ASSERT_TRUE(c.Run([&] {
    std::lock_guard<std::mutex> lock(mu);
    return held.has_value();
  }));
  c.Reset(id);
  ASSERT_TRUE(c.Run([&] {
    std::lock_guard<std::mutex> lock(mu);
    return token->cancelled();
  }));
  testing::SentRecorder sent;
  {
    std::lock_guard<std::mutex> lock(mu);
    HttpResponse late;
    late.on_sent = sent.Callback();
    (*held)(std::move(late));
  }
  ASSERT_TRUE(sent.WaitForCalls(1));
  std::this_thread::sleep_for(milliseconds(20));
  ASSERT_EQ(sent.calls().size(), 1u);
  EXPECT_FALSE(sent.calls()[0].sent);
}

TEST_F(Http2Test, OnSentIsFalseWhenTheConnectionGoesWithTheResponseUnsent) {
  // The response is submitted, the client reads a little of it and closes the connection: the
  // END_STREAM frame was never sent, so the response is reported unsent.
  testing::SentRecorder sent;
  handler_.on_request = [&](HttpRequest, HttpResponder respond) {
    HttpResponse r;
    r.body.assign(32 << 20, 'z');  // more than the client's 16 MiB stream window
    r.on_sent = sent.Callback();
    respond(std::move(r));
  };
  StartServer();
  {
    H2Client c(server_->port());
    const int32_t id = c.Submit("GET", "/huge");
    // The client's window (16 MiB, returned as it reads) stops the server well short of 32 MiB.
    ASSERT_TRUE(c.Run([&] { return c.response(id).body.size() >= (1u << 20); }));
    EXPECT_FALSE(c.response(id).closed);
  }  // closed with half of the body unsent
  ASSERT_TRUE(sent.WaitForCalls(1));
  EXPECT_FALSE(sent.calls()[0].sent);
}

// A stream the transport refuses itself is one access record, with the id its response carries;
// the connection's other streams (answered by the handler) are not the transport's to log.
TEST_F(Http2Test, BodyOverTheLimitIsAccessLoggedOnceWithItsRequestId) {
  options_.access_log = &access_log_;
  options_.max_body_bytes = 1000;
  StartServer();
  H2Client c(server_->port());
  const int32_t big =
      c.Submit("POST", "/v2/models/m/infer", std::string(5000, 'x'), {{"x-request-id", "h2-big"}});
  const int32_t small = c.Submit("POST", "/y", std::string(10, 'y'));
  ASSERT_TRUE(c.Run([&] { return c.response(big).closed && c.response(small).closed; }));
  EXPECT_EQ(c.response(big).status, 413);
  EXPECT_EQ(c.response(big).headers.at("x-request-id"), "h2-big");
  EXPECT_EQ(c.response(small).status, 200);
  const auto records = access_log_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, 413);
  EXPECT_EQ(records[0].request_id, "h2-big");
  EXPECT_EQ(records[0].protocol, "http");
  EXPECT_EQ(records[0].method, "POST");
  EXPECT_EQ(records[0].target, "/v2/models/m/infer");
  EXPECT_NE(records[0].error.find("maximum allowed value of 1000 bytes"), std::string::npos)
      << records[0].error;
  EXPECT_GT(records[0].request_bytes, 1000u);  // the DATA that crossed the limit counts
  EXPECT_LE(records[0].request_bytes, 5000u);
  EXPECT_EQ(records[0].response_bytes, c.response(big).body.size());
}

TEST_F(Http2Test, HeaderListOverTheLimitIsAccessLoggedWithAGeneratedId) {
  options_.access_log = &access_log_;
  options_.max_header_bytes = 1024;
  StartServer();
  H2Client c(server_->port());
  const int32_t id = c.Submit("GET", "/x", std::nullopt, {{"x-big", std::string(2000, 'v')}});
  ASSERT_TRUE(c.RunUntilClosed(id));
  EXPECT_EQ(c.response(id).status, 431);
  const auto records = access_log_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, 431);
  EXPECT_EQ(records[0].method, "GET");  // pseudo-headers come first, within the limit
  EXPECT_EQ(records[0].request_id.size(), 15u);
  EXPECT_EQ(c.response(id).headers.at("x-request-id"), records[0].request_id);
}

// An over-long :path: the 431 still names the target, as far as the limit (probe 31).
TEST_F(Http2Test, AnOverLongPathIs431WithItsTargetAsFarAsTheLimit) {
  options_.access_log = &access_log_;
  options_.max_header_bytes = 1024;
  StartServer();
  H2Client c(server_->port());
  const int32_t id = c.Submit("POST", "/v1/completions?q=" + std::string(2000, 'q'), std::nullopt);
  ASSERT_TRUE(c.RunUntilClosed(id));
  EXPECT_EQ(c.response(id).status, 431);
  const auto records = access_log_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].target.rfind("/v1/completions?q=qqq", 0), 0u) << records[0].target;
  EXPECT_LE(records[0].target.size(), 1024u);
}

TEST_F(Http2Test, RefusalCarriesARequestIdWithoutAnAccessLog) {
  options_.max_body_bytes = 1000;
  StartServer();  // options_.access_log stays null
  H2Client c(server_->port());
  const int32_t big = c.Submit("POST", "/x", std::string(5000, 'x'));
  ASSERT_TRUE(c.RunUntilClosed(big));
  EXPECT_EQ(c.response(big).status, 413);
  EXPECT_EQ(c.response(big).headers.at("x-request-id").size(), 15u);
  EXPECT_TRUE(access_log_.records().empty());
}

TEST_F(Http2Test, TrailersFollowTheBodyAndReplaceContentLength) {
  handler_.on_request = [](HttpRequest, HttpResponder respond) {
    HttpResponse r;
    r.body = "abc";
    r.trailers = {{"grpc-status", "0"}, {"grpc-message", "fine"}};
    respond(std::move(r));
  };
  StartServer();
  H2Client c(server_->port());
  const int32_t with_body = c.Submit("POST", "/x", std::string("q"));
  ASSERT_TRUE(c.RunUntilClosed(with_body));
  EXPECT_EQ(c.response(with_body).status, 200);
  EXPECT_EQ(c.response(with_body).body, "abc");
  EXPECT_EQ(c.response(with_body).headers.at("grpc-status"), "0");
  EXPECT_EQ(c.response(with_body).headers.at("grpc-message"), "fine");
  EXPECT_EQ(c.response(with_body).headers.count("content-length"), 0u);
  EXPECT_FALSE(c.response(with_body).reset);
}

TEST_F(Http2Test, TrailersWithAnEmptyBody) {
  handler_.on_request = [](HttpRequest, HttpResponder respond) {
    HttpResponse r;
    r.headers.emplace_back("x-request-id", "abc");
    r.trailers = {{"grpc-status", "5"}};
    respond(std::move(r));
  };
  StartServer();
  H2Client c(server_->port());
  const int32_t id = c.Submit("POST", "/x", std::string("q"));
  ASSERT_TRUE(c.RunUntilClosed(id));
  EXPECT_EQ(c.response(id).body, "");
  EXPECT_EQ(c.response(id).headers.at("x-request-id"), "abc");
  EXPECT_EQ(c.response(id).headers.at("grpc-status"), "5");
}

// A streamed request's body reaches the handler as it arrives, but only the bytes it reports
// consumed reopen the window: past the stream's window the client is held back.
TEST_F(Http2Test, AStreamIsHeldBackByFlowControlUntilItsBytesAreConsumed) {
  options_.http2_initial_window_bytes = 65535;
  auto stream = std::make_shared<RecordingStream>();
  std::shared_ptr<HttpStreamWriter> writer;
  std::mutex mu;
  handler_.on_open_stream = [&](const HttpRequest& head, std::shared_ptr<HttpStreamWriter> w,
                                HttpResponse* response_head) -> std::shared_ptr<HttpStreamHandler> {
    if (head.target != "/stream") return nullptr;
    response_head->headers.emplace_back("x-streamed", "yes");
    {
      std::lock_guard lock(mu);
      writer = w;
    }
    return stream;
  };
  stream->on_end = [&](RecordingStream* s) {
    std::shared_ptr<HttpStreamWriter> w;
    {
      std::lock_guard lock(mu);
      w = writer;
    }
    w->Write("part one;", nullptr);
    w->Write("part two", nullptr);
    w->Finish({{"grpc-status", "0"}});
    (void)s;
  };
  StartServer();
  H2Client c(server_->port());
  const std::string body(300'000, 'b');
  const int32_t id = c.Submit("POST", "/stream", body);
  // Nothing is consumed: the handler sees at most the stream's 64 KiB window.
  c.Run([] { return false; }, milliseconds(500));
  EXPECT_GT(stream->size(), 0u);
  EXPECT_LE(stream->size(), 65535u);
  EXPECT_FALSE(c.response(id).closed);
  // Consumed bit by bit, the rest flows; the response comes after the body's end.
  ASSERT_TRUE(c.Run(
      [&] {
        std::shared_ptr<HttpStreamWriter> w;
        {
          std::lock_guard lock(mu);
          w = writer;
        }
        static std::size_t reported = 0;
        const std::size_t now = stream->size();
        if (now > reported) {
          w->Consumed(now - reported);
          reported = now;
        }
        return c.response(id).closed;
      },
      milliseconds(10000)));
  EXPECT_EQ(stream->size(), body.size());
  EXPECT_EQ(c.response(id).status, 200);
  EXPECT_EQ(c.response(id).headers.at("x-streamed"), "yes");
  EXPECT_EQ(c.response(id).body, "part one;part two");
  EXPECT_EQ(c.response(id).headers.at("grpc-status"), "0");
  EXPECT_FALSE(stream->cancelled);
}

// A streamed request inside a message (HttpStreamHandler::InsideMessage) is held to the body
// timeout, and reset when the rest does not come; between messages it may stay quiet (probe 64:
// a half-sent gRPC message was held, silent, for good).
TEST_F(Http2Test, AStreamQuietInsideAMessageIsResetAfterTheBodyTimeout) {
  struct FramingStream : RecordingStream {
    bool InsideMessage() const override { return size_const() % 10 != 0; }  // 10-byte messages
    std::size_t size_const() const {
      std::lock_guard lock(const_cast<std::mutex&>(mu));
      return body.size();
    }
  };
  options_.body_timeout = milliseconds(300);
  std::map<std::string, std::shared_ptr<FramingStream>> streams;
  std::mutex mu;
  handler_.on_open_stream = [&](const HttpRequest& head, std::shared_ptr<HttpStreamWriter>,
                                HttpResponse*) -> std::shared_ptr<HttpStreamHandler> {
    auto s = std::make_shared<FramingStream>();
    std::lock_guard lock(mu);
    streams[head.target] = s;
    return s;
  };
  StartServer();
  H2Client c(server_->port());
  const int32_t half = c.Submit("POST", "/half", std::string(15, 'b'), {}, /*end_stream=*/false);
  const int32_t whole = c.Submit("POST", "/whole", std::string(20, 'b'), {}, /*end_stream=*/false);
  ASSERT_TRUE(c.Run([&] { return c.response(half).closed; }, milliseconds(5000)));
  EXPECT_TRUE(c.response(half).reset);
  c.Run([] { return false; }, milliseconds(600));  // well past the timeout
  EXPECT_FALSE(c.response(whole).closed);
  std::lock_guard lock(mu);
  EXPECT_TRUE(streams["/half"]->cancelled);
  EXPECT_FALSE(streams["/whole"]->cancelled);
}

// The bodies one connection holds for streams not yet dispatched stay within max_body_bytes,
// plus one initial window per stream and the oldest stream's body: past max_body_bytes only the
// oldest stream's window is given back, the others' as bodies leave (probe 64: 128 streams x
// max_body_bytes from one socket). Bodies that end still all complete, one after another.
TEST_F(Http2Test, TheBodiesAConnectionHoldsAreBounded) {
  options_.max_body_bytes = 400'000;
  options_.http2_initial_window_bytes = 65535;
  StartServer();
  {
    H2Client c(server_->port());
    for (int i = 0; i < 8; ++i)
      c.Submit("POST", "/held" + std::to_string(i), std::string(390'000, 'b'), {}, false);
    c.Run([] { return false; }, milliseconds(800));
    // Unbounded, every byte of the 8 bodies (3.1 MB) would be taken.
    EXPECT_LE(c.body_bytes_sent(), 400'000u + 8 * 65'535u + 400'000u);
    EXPECT_GE(c.body_bytes_sent(), 400'000u);
  }
  H2Client c(server_->port());
  std::vector<int32_t> ids;
  for (int i = 0; i < 8; ++i)
    ids.push_back(c.Submit("POST", "/whole" + std::to_string(i), std::string(390'000, 'w')));
  ASSERT_TRUE(c.Run(
      [&] {
        return std::all_of(ids.begin(), ids.end(),
                           [&](int32_t id) { return c.response(id).closed; });
      },
      milliseconds(10000)));
  for (int32_t id : ids) {
    EXPECT_EQ(c.response(id).status, 200);
    EXPECT_EQ(c.response(id).body.size(), 390'000u);
  }
}

// The server-wide budget of bodies still arriving holds over HTTP/2 too, across connections:
// the stream whose DATA would pass it gets 503 with Retry-After on its own stream, the other
// connection's upload goes on, and a reset stream gives its share back.
TEST_F(Http2Test, BodiesStillArrivingPastTheServerWideBudgetGet503OnTheirStream) {
  auto budget = StartServerWithBudget(300'000);
  H2Client a(server_->port());
  const int32_t held = a.Submit("POST", "/held", std::string(200'000, 'a'), {}, false);
  ASSERT_TRUE(a.Run([&] { return budget->held() == 200'000; }));

  H2Client b(server_->port());
  const int32_t refused = b.Submit("POST", "/over", std::string(200'000, 'b'), {}, false);
  ASSERT_TRUE(b.RunUntilClosed(refused));
  EXPECT_EQ(b.response(refused).status, 503);
  EXPECT_EQ(b.response(refused).headers.at("retry-after"), "1");
  EXPECT_NE(b.response(refused).body.find("300000 bytes of request bodies still arriving"),
            std::string::npos);
  EXPECT_EQ(budget->refused(), 1u);
  EXPECT_EQ(budget->held(), 200'000u);
  // The refused stream's connection goes on.
  const int32_t next = b.Submit("POST", "/next", std::string(50'000, 'n'));
  ASSERT_TRUE(b.RunUntilClosed(next));
  EXPECT_EQ(b.response(next).status, 200);

  a.Reset(held);
  ASSERT_TRUE(a.Run([&] { return budget->held() == 0; }));
  const int32_t whole = a.Submit("POST", "/whole", std::string(250'000, 'w'));
  ASSERT_TRUE(a.RunUntilClosed(whole));
  EXPECT_EQ(a.response(whole).status, 200);
  EXPECT_EQ(budget->held(), 0u);
}

// A body that ends with the frame that brings it is never charged (as over HTTP/1.1, a body that
// comes with its header): with the budget all but full, small requests are still served (probe
// 75: each frame was charged before its END_STREAM was seen, and every unary gRPC call failed
// while a slow upload held the budget).
TEST_F(Http2Test, ABodyThatEndsWithItsFrameIsNotChargedWhenTheBudgetIsFull) {
  auto budget = StartServerWithBudget(300'000);
  H2Client a(server_->port());
  a.Submit("POST", "/held", std::string(299'500, 'a'), {}, false);
  ASSERT_TRUE(a.Run([&] { return budget->held() == 299'500; }));
  H2Client b(server_->port());
  const int32_t small = b.Submit("POST", "/small", std::string(1'000, 's'));
  ASSERT_TRUE(b.RunUntilClosed(small));
  EXPECT_EQ(b.response(small).status, 200);
  EXPECT_EQ(budget->refused(), 0u);
}

// A streamed request's unfinished message counts against the budget too (a gRPC stream's
// half-sent message): past it the stream is reset with ENHANCE_YOUR_CALM (gRPC clients say
// RESOURCE_EXHAUSTED) and its handler cancelled; a message within it is held, and given back
// when the stream ends.
TEST_F(Http2Test, AStreamsUnfinishedMessagePastTheServerWideBudgetResetsTheStream) {
  auto small = std::make_shared<RecordingStream>();
  auto large = std::make_shared<RecordingStream>();
  small->unfinished_message = large->unfinished_message = true;
  handler_.on_open_stream = [&](const HttpRequest& head, std::shared_ptr<HttpStreamWriter>,
                                HttpResponse*) -> std::shared_ptr<HttpStreamHandler> {
    return head.target == "/small" ? small : large;
  };
  auto budget = StartServerWithBudget(100'000);
  H2Client c(server_->port());
  const int32_t within = c.Submit("POST", "/small", std::string(60'000, 's'), {}, false);
  // The charge follows the handler's OnBody on the connection's thread: wait for both (TSan's
  // slower threads saw the body before its charge).
  ASSERT_TRUE(c.Run([&] { return small->size() == 60'000 && budget->held() == 60'000; }));
  const int32_t over = c.Submit("POST", "/large", std::string(60'000, 'l'), {}, false);
  ASSERT_TRUE(c.RunUntilClosed(over));
  EXPECT_TRUE(c.response(over).reset);
  EXPECT_EQ(c.response(over).error_code, static_cast<uint32_t>(NGHTTP2_ENHANCE_YOUR_CALM));
  {
    std::lock_guard lock(large->mu);
    EXPECT_TRUE(large->cancelled);
  }
  EXPECT_EQ(budget->refused(), 1u);
  EXPECT_EQ(budget->held(), 60'000u);
  c.Reset(within);
  ASSERT_TRUE(c.Run([&] { return budget->held() == 0; }));
}

// An older stream that holds no body bytes (its headers sent, nothing else yet) does not hold
// the others back: the oldest stream that holds bytes is the one given its window (probe 66: the
// uploads behind an empty stream that then ended waited for good).
TEST_F(Http2Test, AnOlderStreamWithoutBodyBytesHoldsNoUploadBack) {
  options_.max_body_bytes = 400'000;
  options_.http2_initial_window_bytes = 65535;
  StartServer();
  H2Client c(server_->port());
  const int32_t quiet = c.Submit("POST", "/quiet", std::string(), {}, /*end_stream=*/false);
  std::vector<int32_t> uploads;
  for (int i = 0; i < 3; ++i)
    uploads.push_back(c.Submit("POST", "/upload" + std::to_string(i), std::string(390'000, 'u')));
  ASSERT_TRUE(c.Run(
      [&] {
        return std::all_of(uploads.begin(), uploads.end(),
                           [&](int32_t id) { return c.response(id).closed; });
      },
      milliseconds(10000)));
  for (int32_t id : uploads) EXPECT_EQ(c.response(id).status, 200);
  EXPECT_FALSE(c.response(quiet).closed);
  c.Reset(quiet);
}

TEST_F(Http2Test, AResetStreamCancelsItsHandlerAndLaterWritesAreDropped) {
  auto stream = std::make_shared<RecordingStream>();
  std::shared_ptr<HttpStreamWriter> writer;
  std::mutex mu;
  handler_.on_open_stream = [&](const HttpRequest& head, std::shared_ptr<HttpStreamWriter> w,
                                HttpResponse*) -> std::shared_ptr<HttpStreamHandler> {
    if (head.target != "/stream") return nullptr;
    std::lock_guard lock(mu);
    writer = w;
    return stream;
  };
  StartServer();
  H2Client c(server_->port());
  const int32_t id = c.Submit("POST", "/stream", std::string(10, 'b'));
  ASSERT_TRUE(c.Run([&] { return stream->size() == 10; }));
  c.Reset(id);
  ASSERT_TRUE(c.Run([&] {
    std::lock_guard lock(stream->mu);
    return stream->cancelled;
  }));
  std::atomic<int> written{-1};
  {
    std::lock_guard lock(mu);
    writer->Write("late", [&](bool ok) { written = ok ? 1 : 0; });
    writer->Finish({{"grpc-status", "0"}});
  }
  ASSERT_TRUE(c.Run([&] { return written.load() >= 0; }));
  EXPECT_EQ(written.load(), 0);
  // The connection goes on.
  const int32_t next = c.Submit("GET", "/x");
  ASSERT_TRUE(c.RunUntilClosed(next));
  EXPECT_EQ(c.response(next).status, 200);
}

// ---- Streamed responses (HttpResponse::stream) ----------------------------------------------

// A handler that answers with a text/event-stream ResponseStream, kept for the test to write.
struct StreamedAnswer {
  std::mutex mu;
  std::shared_ptr<ResponseStream> stream;

  std::function<void(HttpRequest, HttpResponder)> Handler() {
    return [this](HttpRequest, HttpResponder respond) {
      HttpResponse head;
      head.headers.emplace_back("content-type", "text/event-stream");
      head.stream = std::make_shared<ResponseStream>();
      {
        std::lock_guard lock(mu);
        stream = head.stream;
      }
      respond(std::move(head));
    };
  }
  std::shared_ptr<ResponseStream> Get() {
    std::lock_guard lock(mu);
    return stream;
  }
};

// A response that the client's window holds back (it never sends WINDOW_UPDATE) is reset
// after the write timeout, and a streamed one's producer told; before, it was held for as long
// as the connection lived (probe 31). The connection and its other streams go on.
TEST_F(Http2Test, AResponseHeldBackByTheClientsWindowIsResetAfterTheWriteTimeout) {
  options_.write_timeout = milliseconds(300);
  StreamedAnswer answer;
  auto streamed = answer.Handler();
  handler_.on_request = [&](HttpRequest request, HttpResponder respond) {
    if (request.target == "/stream") return streamed(std::move(request), std::move(respond));
    HttpResponse r;
    r.body = std::string(request.target == "/big" ? 100'000 : 10, 'x');
    respond(std::move(r));
  };
  StartServer();
  H2Client c(server_->port(), /*window=*/1000, /*window_updates=*/false);
  const int32_t big = c.Submit("GET", "/big");
  ASSERT_TRUE(c.RunUntilClosed(big));
  EXPECT_TRUE(c.response(big).reset);
  EXPECT_EQ(c.response(big).error_code, static_cast<uint32_t>(NGHTTP2_CANCEL));
  EXPECT_EQ(c.response(big).body.size(), 1000u);

  const int32_t stream = c.Submit("GET", "/stream");
  ASSERT_TRUE(c.Run([&] { return c.response(stream).status == 200; }));
  std::shared_ptr<ResponseStream> s = answer.Get();
  std::atomic<int> unsent{0};
  s->Write(std::string(5000, 'y'), [&](bool ok) { unsent += ok ? 0 : 1; });
  ASSERT_TRUE(c.RunUntilClosed(stream));
  EXPECT_TRUE(c.response(stream).reset);
  EXPECT_TRUE(s->abandoned());  // its producer stops
  EXPECT_EQ(unsent.load(), 1);

  const int32_t small = c.Submit("GET", "/small");  // fits what is left of the windows
  ASSERT_TRUE(c.RunUntilClosed(small));
  EXPECT_EQ(c.response(small).status, 200);
  EXPECT_EQ(c.response(small).body, std::string(10, 'x'));
  EXPECT_FALSE(c.eof());
}

// A window opened a byte at a time is no progress (probe 64: it held 128 responses per
// connection for good): the stream must move kWindowProgressBytes per write timeout.
TEST_F(Http2Test, AWindowOpenedAByteAtATimeDoesNotHoldAResponseForGood) {
  options_.write_timeout = milliseconds(400);
  AnswerEveryRequestWith(100'000);
  StartServer();
  H2Client c(server_->port(), /*window=*/1000, /*window_updates=*/false);
  const int32_t big = c.Submit("GET", "/big");
  ASSERT_TRUE(c.Run([&] { return c.response(big).status == 200; }));
  const auto start = std::chrono::steady_clock::now();
  while (!c.response(big).closed &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    c.OpenWindow(big, 1);
    c.Run([] { return false; }, milliseconds(50));
  }
  ASSERT_TRUE(c.response(big).closed);
  EXPECT_EQ(c.response(big).error_code, static_cast<uint32_t>(NGHTTP2_CANCEL));
  EXPECT_LT(c.response(big).body.size(), 1100u);  // the window's 1000 bytes and the trickle
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

// A client that leaves its answers unread makes the connection hold at most --max-body-bytes of
// them, and the streams past it are refused unprocessed (probe 64).
TEST_F(Http2Test, PastMaxBodyBytesOfUnsentResponsesANewStreamIsRefused) {
  options_.max_body_bytes = 50'000;
  AnswerEveryRequestWith(40'000);
  StartServer();
  H2Client c(server_->port(), /*window=*/1000, /*window_updates=*/false);
  std::vector<int32_t> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(c.Submit("GET", "/r" + std::to_string(i)));
    ASSERT_TRUE(
        c.Run([&] { return c.response(ids.back()).status != 0 || c.response(ids.back()).closed; }));
  }
  EXPECT_EQ(c.response(ids[0]).status, 200);
  EXPECT_EQ(c.response(ids[1]).status, 200);  // 39,000 unsent then: within the bound
  EXPECT_EQ(c.response(ids[2]).status, 503);  // 78,000 unsent: refused unprocessed
  EXPECT_EQ(c.response(ids[2]).headers.at("retry-after"), "1");
  EXPECT_EQ(handler_.calls.load(), 2);
  // Read, the responses come whole, and new streams are served again.
  c.OpenWindow(ids[0], 39'000);
  c.OpenWindow(ids[1], 39'000);
  ASSERT_TRUE(c.Run([&] { return c.response(ids[0]).closed && c.response(ids[1]).closed; }));
  EXPECT_EQ(c.response(ids[0]).body.size(), 40'000u);
  EXPECT_EQ(c.response(ids[1]).body.size(), 40'000u);
  const int32_t again = c.Submit("GET", "/again");
  ASSERT_TRUE(c.Run([&] { return c.response(again).status != 0; }));
  EXPECT_EQ(c.response(again).status, 200);
}

// Streams whose own windows are open share the connection's, which the client opens at a
// steady rate: each gets its share, less than kWindowProgressBytes per write timeout, and none
// is reset while the connection moves (probe 69).
TEST_F(Http2Test, StreamsSharingASteadilyOpenedConnectionWindowAreNotReset) {
  options_.write_timeout = milliseconds(400);
  AnswerEveryRequestWith(30'000);
  StartServer();
  H2Client c(server_->port(), /*window=*/1 << 20, /*window_updates=*/false);
  std::vector<int32_t> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(c.Submit("GET", "/s" + std::to_string(i)));
  auto all_closed = [&] {
    return std::all_of(ids.begin(), ids.end(), [&](int32_t id) { return c.response(id).closed; });
  };
  const auto start = std::chrono::steady_clock::now();
  while (!all_closed() && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    c.OpenWindow(0, 2048);  // 40 KiB/s for the connection, ~10 KiB/s for each stream
    c.Run([] { return false; }, milliseconds(50));
  }
  for (int32_t id : ids) {
    EXPECT_FALSE(c.response(id).reset) << id;
    EXPECT_EQ(c.response(id).body.size(), 30'000u) << id;
  }
}

// A request read whole, answered with a ResponseStream: HEADERS at once, a DATA frame per part as
// it is written, END_STREAM at Finish (with trailers when given); the request's token stays.
TEST_F(Http2Test, AResponseStreamSendsEachPartAsItIsWrittenThenEnds) {
  StreamedAnswer answer;
  handler_.on_request = answer.Handler();
  StartServer();
  H2Client c(server_->port());
  const int32_t id = c.Submit("POST", "/v1/completions", std::string("{}"));
  ASSERT_TRUE(c.Run([&] { return c.response(id).status == 200; }));
  EXPECT_EQ(c.response(id).headers.count("content-length"), 0u);
  EXPECT_EQ(c.response(id).headers.at("content-type"), "text/event-stream");
  std::shared_ptr<ResponseStream> s = answer.Get();
  std::atomic<int> written{0};
  s->Write("data: 1\n\n", [&](bool ok) { written += ok ? 1 : 100; });
  ASSERT_TRUE(c.Run([&] { return c.response(id).body == "data: 1\n\n"; }));
  EXPECT_FALSE(c.response(id).closed);
  s->Write("data: 2\n\n", [&](bool ok) { written += ok ? 1 : 100; });
  ASSERT_TRUE(c.Run([&] { return c.response(id).body == "data: 1\n\ndata: 2\n\n"; }));
  s->Finish();
  ASSERT_TRUE(c.RunUntilClosed(id));
  EXPECT_FALSE(c.response(id).reset);
  EXPECT_EQ(written.load(), 2);
  EXPECT_EQ(s->pending_bytes(), 0u);
}

// HEAD on a streamed resource: the header fields a GET gets (no content-length: the length of
// a stream is not known; before, `content-length: 0`), no DATA, and the stream abandoned.
TEST_F(Http2Test, HeadOfAResponseStreamHasNoContentLengthAndNoBody) {
  StreamedAnswer answer;
  handler_.on_request = answer.Handler();
  StartServer();
  H2Client c(server_->port());
  const int32_t id = c.Submit("HEAD", "/v1/streams/x");
  ASSERT_TRUE(c.RunUntilClosed(id));
  EXPECT_EQ(c.response(id).status, 200);
  EXPECT_EQ(c.response(id).headers.count("content-length"), 0u);
  EXPECT_EQ(c.response(id).headers.at("content-type"), "text/event-stream");
  EXPECT_EQ(c.response(id).body, "");
  EXPECT_TRUE(answer.Get()->abandoned());
}

TEST_F(Http2Test, AResetDuringAResponseStreamCancelsTheRequestAndAbandonsTheStream) {
  std::shared_ptr<ResponseStream> stream;
  std::shared_ptr<CancellationToken> token;
  std::mutex mu;
  handler_.on_request = [&](HttpRequest request, HttpResponder respond) {
    HttpResponse head;
    head.stream = std::make_shared<ResponseStream>();
    {
      std::lock_guard lock(mu);
      stream = head.stream;
      token = request.cancellation;
    }
    respond(std::move(head));
  };
  StartServer();
  H2Client c(server_->port());
  const int32_t id = c.Submit("GET", "/stream");
  ASSERT_TRUE(c.Run([&] { return c.response(id).status == 200; }));
  c.Reset(id);
  ASSERT_TRUE(c.Run([&] {
    std::lock_guard lock(mu);
    return token->cancelled();
  }));
  std::shared_ptr<ResponseStream> s;
  {
    std::lock_guard lock(mu);
    s = stream;
  }
  EXPECT_TRUE(s->abandoned());
  std::atomic<int> written{-1};
  s->Write("late", [&](bool ok) { written = ok ? 1 : 0; });
  EXPECT_EQ(written.load(), 0);
  const int32_t next = c.Submit("GET", "/x");  // the connection goes on
  handler_.on_request = nullptr;
  ASSERT_TRUE(c.RunUntilClosed(next));
  EXPECT_EQ(c.response(next).status, 200);
}

}  // namespace
}  // namespace harrier
