#include "server/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "server/incoming_bodies.h"
#include "server/raw_http_client.h"
#include "server/sent_recorder.h"
#include "util/recording_access_log.h"

namespace harrier {
namespace {

using std::chrono::milliseconds;
using testing::RawHttpClient;
using testing::RawResponse;

// Calls whatever the test put in `on_request`; by default echoes the request.
class FakeHandler : public HttpHandler {
 public:
  std::function<void(HttpRequest, HttpResponder)> on_request;
  std::function<std::optional<HttpResponse>(const HttpRequest&)> on_precheck;
  std::atomic<int> calls{0};
  std::atomic<int> prechecks{0};

  std::optional<HttpResponse> Precheck(const HttpRequest& head) override {
    ++prechecks;
    EXPECT_EQ(head.body, nullptr);
    if (on_precheck) return on_precheck(head);
    return std::nullopt;
  }

  void Handle(HttpRequest&& request, HttpResponder respond) override {
    ++calls;
    if (on_request) {
      on_request(std::move(request), std::move(respond));
    } else {
      respond(Echo(request));
    }
  }

  static HttpResponse Echo(const HttpRequest& request) {
    HttpResponse r;
    r.headers.emplace_back("X-Method", request.method);
    r.headers.emplace_back("X-Target", request.target);
    r.headers.emplace_back("X-Foo", std::string(request.Header("x-foo")));
    r.headers.emplace_back("X-Padded",
                           request.body->capacity() >= request.body->size() + 64 ? "1" : "0");
    // A handler may not set framing headers; the server must ignore these.
    r.headers.emplace_back("Content-Length", "999");
    r.headers.emplace_back("Connection", "keep-alive");
    r.body = *request.body;
    return r;
  }
};

class HttpServerTest : public ::testing::Test {
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
    ASSERT_NE(server_->port(), 0);
  }

  // Starts a thread the fixture joins at teardown.
  void Spawn(std::function<void()> fn) { threads_.emplace_back(std::move(fn)); }

  HttpServer::Options options_;
  FakeHandler handler_;
  testing::RecordingAccessLog access_log_;  // used when a test sets options_.access_log
  std::unique_ptr<HttpServer> server_;
  std::vector<std::thread> threads_;
};

std::string Post(std::string_view target, std::string_view body, std::string_view extra = "") {
  return "POST " + std::string(target) + " HTTP/1.1\r\nHost: t\r\n" + std::string(extra) +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

TEST_F(HttpServerTest, CreateRejectsBadOptions) {
  HttpServer::Options bad = options_;
  bad.address = "not-an-address";
  EXPECT_EQ(HttpServer::Create(bad, &handler_).status().code(), StatusCode::kInvalidArgument);
  bad = options_;
  bad.header_timeout = milliseconds(0);
  EXPECT_EQ(HttpServer::Create(bad, &handler_).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpServer::Create(options_, nullptr).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(HttpServerTest, StartFailsWhenThePortIsTaken) {
  StartServer();
  HttpServer::Options same = options_;
  same.port = server_->port();
  auto other = HttpServer::Create(same, &handler_);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)->Start().code(), StatusCode::kUnavailable);
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.connected());
  for (int i = 0; i < 3; ++i) {
    const std::string body = "payload-" + std::to_string(i);
    ASSERT_TRUE(c.Send(Post("/v2/models/m/infer?x=" + std::to_string(i), body, "X-Foo: Bar\r\n")));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r) << "request " << i;
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, body);
    EXPECT_EQ(r->Header("x-method"), "POST");
    EXPECT_EQ(r->Header("x-target"), "/v2/models/m/infer?x=" + std::to_string(i));
    EXPECT_EQ(r->Header("x-foo"), "Bar");  // looked up by lower-cased name
    EXPECT_EQ(r->Header("x-padded"), "1");
    EXPECT_EQ(r->Header("content-length"), std::to_string(body.size()));
    EXPECT_EQ(r->Header("connection"), "");
    EXPECT_FALSE(r->Header("date").empty());
  }
  EXPECT_EQ(handler_.calls.load(), 3);
}

// The fields of a connection's earlier requests lend their strings to the next one's
// (SpareHeaderFields): a request sees exactly its own header fields, lower-cased, never a
// field or a byte left from the last.
TEST_F(HttpServerTest, EachRequestOnAConnectionSeesOnlyItsOwnHeaderFields) {
  std::mutex mu;
  std::vector<std::vector<std::pair<std::string, std::string>>> seen;
  handler_.on_request = [&](HttpRequest request, HttpResponder respond) {
    {
      std::lock_guard lock(mu);
      seen.push_back(request.headers);
    }
    respond(HttpResponse{});
  };
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.connected());
  const std::string requests[] = {
      "GET /a HTTP/1.1\r\nHost: first-host.example:8000\r\n"
      "Inference-Header-Content-Length: 123456\r\nX-Long-Value: " +
          std::string(40, 'v') + "\r\nX-Foo: Bar\r\n\r\n",
      "GET /b HTTP/1.1\r\nHOST: h\r\nX-Other: o\r\n\r\n",
      "GET /c HTTP/1.1\r\nHost: h2\r\nX-Huge: " + std::string(1000, 'h') +
          "\r\nX-Foo: Baz\r\nInference-Header-Content-Length: 7\r\n\r\n",
      "GET /d HTTP/1.1\r\nHost: h3\r\n\r\n",
  };
  for (const std::string& request : requests) {
    ASSERT_TRUE(c.Send(request));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  }
  using Fields = std::vector<std::pair<std::string, std::string>>;
  std::lock_guard lock(mu);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0], (Fields{{"host", "first-host.example:8000"},
                             {"inference-header-content-length", "123456"},
                             {"x-long-value", std::string(40, 'v')},
                             {"x-foo", "Bar"}}));
  EXPECT_EQ(seen[1], (Fields{{"host", "h"}, {"x-other", "o"}}));
  EXPECT_EQ(seen[2], (Fields{{"host", "h2"},
                             {"x-huge", std::string(1000, 'h')},
                             {"x-foo", "Baz"},
                             {"inference-header-content-length", "7"}}));
  EXPECT_EQ(seen[3], (Fields{{"host", "h3"}}));
}

// HttpRequest::sole_requester: a connection is its I/O thread's sole requester until another
// connection on that thread asks; then neither is, until one has been alone for the window.
TEST_F(HttpServerTest, SoleRequesterIsTheOnlyConnectionAskingOnItsThread) {
  options_.io_threads = 1;  // both clients on one thread
  options_.sole_requester_window = std::chrono::microseconds(200'000);
  handler_.on_request = [](HttpRequest request, HttpResponder respond) {
    HttpResponse r;
    r.body = request.sole_requester ? "sole" : "shared";
    respond(std::move(r));
  };
  StartServer();
  RawHttpClient a(server_->port());
  RawHttpClient b(server_->port());
  ASSERT_TRUE(a.connected() && b.connected());
  auto ask = [](RawHttpClient& c) {
    if (!c.Send(Post("/x", ""))) return std::string("send failed");
    auto r = c.ReadResponse();
    return r ? r->body : std::string("no response");
  };
  EXPECT_EQ(ask(a), "sole");
  EXPECT_EQ(ask(a), "sole");
  EXPECT_EQ(ask(b), "shared");  // a asked within the window
  EXPECT_EQ(ask(a), "shared");
  EXPECT_EQ(ask(b), "shared");
  std::this_thread::sleep_for(milliseconds(250));  // past the window since a's last request
  EXPECT_EQ(ask(b), "sole");
  EXPECT_EQ(ask(b), "sole");
}

// A handler that refuses "/refuse" from the header alone.
std::optional<HttpResponse> RefuseTarget(const HttpRequest& head) {
  if (head.target != "/refuse") return std::nullopt;
  HttpResponse r;
  r.status = 503;
  r.body = "{\"error\":\"busy\"}";
  return r;
}

TEST_F(HttpServerTest, PrecheckRefusalSkipsTheBodyAndKeepsTheConnection) {
  handler_.on_precheck = RefuseTarget;
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.connected());
  // A body far larger than the read buffer, sent in pieces after the header.
  const std::string big(3 << 20, 'x');
  const std::string request = Post("/refuse", big);
  const std::size_t head_size = request.size() - big.size();
  ASSERT_TRUE(c.Send(request.substr(0, head_size + 100)));
  ASSERT_TRUE(c.Send(request.substr(head_size + 100)));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, "{\"error\":\"busy\"}");
  EXPECT_EQ(r->Header("connection"), "");
  // The same connection serves the next request; the refused one never reached Handle().
  ASSERT_TRUE(c.Send(Post("/ok", "after")));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "after");
  EXPECT_EQ(handler_.calls.load(), 1);
  EXPECT_EQ(handler_.prechecks.load(), 2);
}

// A client that resends at once after refusals is held (options.refusal_hold) from the third
// refusal of the streak, body unread; one that waits past refusal_repeat_window starts over.
TEST_F(HttpServerTest, ARefusalRightAfterARefusalIsHeldThenAnswered) {
  handler_.on_precheck = RefuseTarget;
  options_.refusal_hold = std::chrono::milliseconds(1500);
  options_.refusal_repeat_window = std::chrono::milliseconds(200);
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.connected());
  const std::string big = Post("/refuse", std::string(3 << 20, 'x'));  // past socket buffers
  auto timed = [&](const std::string& request) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE(c.Send(request));
    auto r = c.ReadResponse();
    EXPECT_TRUE(r);
    if (r) {
      EXPECT_EQ(r->status, 503);
    }
    return std::chrono::steady_clock::now() - start;
  };
  using std::chrono::milliseconds;
  EXPECT_LT(timed(big), milliseconds(750));   // the first refusal: at once
  EXPECT_LT(timed(big), milliseconds(750));   // a second one right after: still at once
  EXPECT_GE(timed(big), milliseconds(1500));  // a third: held, its body read after
  EXPECT_GE(timed(Post("/refuse", "")), milliseconds(1500));
  std::this_thread::sleep_for(milliseconds(300));  // past the repeat window: a new streak
  EXPECT_LT(timed(big), milliseconds(750));
  EXPECT_LT(timed(big), milliseconds(750));
  // The connection is intact: the held bodies were read past, the next request is served.
  ASSERT_TRUE(c.Send(Post("/ok", "after")));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "after");
  EXPECT_EQ(handler_.calls.load(), 1);
}

TEST_F(HttpServerTest, RefusalHoldZeroAnswersEveryRefusalAtOnce) {
  handler_.on_precheck = RefuseTarget;
  options_.refusal_hold = std::chrono::milliseconds(0);
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.connected());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(c.Send(Post("/refuse", std::string(100'000, 'x'))));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503);
  }
  // 20 refusals with no hold; with the default 15 ms hold, 18 of them would take >= 270 ms.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(270));
}

TEST_F(HttpServerTest, PrecheckRefusalWithPipelinedFollowerAndNoBody) {
  handler_.on_precheck = RefuseTarget;
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(Post("/refuse", "small body") + "GET /refuse HTTP/1.1\r\nHost: t\r\n\r\n" +
                     Post("/ok", "tail")));
  for (int status : {503, 503, 200}) {
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status);
  }
  EXPECT_EQ(handler_.calls.load(), 1);
}

TEST_F(HttpServerTest, PrecheckRefusalOfAChunkedBodyAnswersAndCloses) {
  handler_.on_precheck = RefuseTarget;
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(
      c.Send("POST /refuse HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
             "5\r\nhello\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->Header("connection"), "close");
  EXPECT_EQ(handler_.calls.load(), 0);
  // Expect: 100-continue: no 100, the refusal at once.
  RawHttpClient c2(server_->port());
  ASSERT_TRUE(c2.Send(
      "POST /refuse HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 100\r\n\r\n"));
  r = c2.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->Header("connection"), "close");
  EXPECT_EQ(handler_.calls.load(), 0);
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(
      c.Send(Post("/a", "first") + "GET /b HTTP/1.1\r\nHost: t\r\n\r\n" + Post("/c", "third")));
  for (const char* target : {"/a", "/b", "/c"}) {
    auto r = c.ReadResponse();
    ASSERT_TRUE(r) << target;
    EXPECT_EQ(r->Header("x-target"), target);
  }
}

// RFC 9112 §3.2: a Host value is host[:port] (a reg-name, an IPv4 address or a bracketed IPv6
// literal) or empty; each of these is served.
TEST_F(HttpServerTest, ValidHostValuesAreServed) {
  StartServer();
  for (const char* host :
       {"t", "example.com:8000", "10.0.0.1", "[::1]:8000", "a-b_c~d.%41", "", "x!$&'()*+,;=y"}) {
    SCOPED_TRACE(host);
    RawHttpClient c(server_->port());
    ASSERT_TRUE(c.Send("GET /x HTTP/1.1\r\nHost: " + std::string(host) + "\r\n\r\n"));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }
}

// RFC 9112 §3.2.2: a server must accept the absolute-form (a proxy may forward it as it came;
// probe 57: every one was a 404). The handler sees the path and query.
TEST_F(HttpServerTest, AnAbsoluteFormTargetIsServedAsItsPath) {
  StartServer();
  const std::pair<std::string, std::string> cases[] = {
      {"http://x/v2/health/live", "/v2/health/live"},
      {"HTTPS://x:8443/v2/models/m/infer?a=1", "/v2/models/m/infer?a=1"},
      {"http://x", "/"},
      {"http://x?q", "/?q"},
      {"/plain", "/plain"},
  };
  for (const auto& [target, path] : cases) {
    SCOPED_TRACE(target);
    RawHttpClient c(server_->port());
    ASSERT_TRUE(c.Send("GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->Header("x-target"), path);
  }
}

// RFC 9112 §2.2: empty lines before a request line are ignored (probe 57: a client's stray CRLF
// after a body made the next request a 400 and closed the connection).
TEST_F(HttpServerTest, EmptyLinesBeforeARequestLineAreSkipped) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("\r\n\r\nGET /first HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto first = c.ReadResponse();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200);
  EXPECT_EQ(first->Header("x-target"), "/first");
  // A body followed by a stray CRLF, then a pipelined request; and a CR alone in one read.
  ASSERT_TRUE(c.Send(Post("/post", "{}") + "\r\nGET /second HTTP/1.1\r\nHost: t\r\n\r\n\r"));
  for (const char* target : {"/post", "/second"}) {
    auto r = c.ReadResponse();
    ASSERT_TRUE(r) << target;
    EXPECT_EQ(r->status, 200) << target;
    EXPECT_EQ(r->Header("x-target"), target);
  }
  std::this_thread::sleep_for(milliseconds(20));
  ASSERT_TRUE(c.Send("\nGET /third HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto third = c.ReadResponse();
  ASSERT_TRUE(third);
  EXPECT_EQ(third->status, 200);
  EXPECT_EQ(third->Header("x-target"), "/third");
  EXPECT_EQ(handler_.calls.load(), 4);
}

// A chunk-size line with its extensions, or a trailer section, longer than the header limit is
// refused: Beast would buffer it whole, whatever its length (probe 57: 400 MB from one
// connection). Chunk data is not counted: it is consumed as it arrives.
TEST_F(HttpServerTest, ChunkFramingLongerThanTheHeaderLimitIsRefused) {
  options_.max_header_bytes = 4096;
  StartServer();
  const std::string head = "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::pair<const char*, std::string> cases[] = {
      {"a chunk extension", "5;a=" + std::string(64 << 10, 'a')},
      {"a trailer field", "0\r\nX-T: " + std::string(64 << 10, 'a')},
      {"a chunk size of leading zeros", std::string(64 << 10, '0')},
  };
  for (const auto& [name, framing] : cases) {
    SCOPED_TRACE(name);
    RawHttpClient c(server_->port());
    ASSERT_TRUE(c.Send(head));
    c.Send(framing);  // the server may answer and close before all of it is sent
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_NE(r->body.find("limit of 4096 bytes"), std::string::npos) << r->body;
    EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  }
  // The same whether the line arrives in one write or is still arriving (probe 60: a long
  // extension in one write was served).
  for (const std::string& framing :
       {"5;a=" + std::string(5000, 'a') + "\r\nhello\r\n0\r\n\r\n",
        "5\r\nhello\r\n0\r\nX-T: " + std::string(5000, 'a') + "\r\n\r\n"}) {
    RawHttpClient one_write(server_->port());
    ASSERT_TRUE(one_write.Send(head + framing));
    auto r = one_write.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_NE(r->body.find("limit of 4096 bytes"), std::string::npos) << r->body;
  }
  // The extensions of all the chunks together (probe 65: 18 MB went with a 2-byte body).
  {
    std::string many = head;
    for (int i = 0; i < 64; ++i) many += "1;e=" + std::string(100, 'x') + "\r\nd\r\n";
    RawHttpClient c(server_->port());
    ASSERT_TRUE(c.Send(many + "0\r\n\r\n"));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_NE(r->body.find("chunks' extensions"), std::string::npos) << r->body;
  }
  // Chunk data past the limit, in one chunk and in many, is a body like any other.
  RawHttpClient c(server_->port());
  const std::string data(32 << 10, 'd');
  std::string chunks = head + "8000;ext=1\r\n" + data + "\r\n";
  for (int i = 0; i < 64; ++i) chunks += "1\r\nd\r\n";
  ASSERT_TRUE(c.Send(chunks + "0\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body.size(), data.size() + 64);
  EXPECT_EQ(handler_.calls.load(), 1);
}

// A chunked body's trailer fields are dropped, not merged into the header (RFC 9110 §6.5.1;
// probe 57: a trailer changed the body's decoding, started an h2c upgrade, and put back a
// client id a proxy had removed).
TEST_F(HttpServerTest, TrailerFieldsNeverBecomeHeaderFields) {
  std::vector<std::pair<std::string, std::string>> seen;
  std::mutex mu;
  handler_.on_request = [&](HttpRequest request, HttpResponder respond) {
    {
      std::lock_guard lock(mu);
      seen = request.headers;
    }
    respond(FakeHandler::Echo(request));
  };
  options_.h2c_upgrade = true;
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(
      c.Send("POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nX-Foo: head\r\n\r\n"
             "2\r\nhi\r\n0\r\nX-Foo: trailer\r\nUpgrade: h2c\r\nConnection: Upgrade, "
             "HTTP2-Settings\r\nHTTP2-Settings: AAMAAABk\r\nContent-Encoding: gzip\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);  // not 101
  EXPECT_EQ(r->body, "hi");
  EXPECT_EQ(r->Header("x-foo"), "head");
  std::lock_guard lock(mu);
  for (const auto& [name, value] : seen) {
    EXPECT_NE(value, "trailer") << name;
    EXPECT_NE(name, "upgrade");
    EXPECT_NE(name, "http2-settings");
    EXPECT_NE(name, "content-encoding");
  }
}

TEST_F(HttpServerTest, ChunkedBodyIsAssembledAndPadded) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(
      c.Send("POST /chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
             "5\r\nhello\r\n"));
  std::this_thread::sleep_for(milliseconds(20));  // the rest arrives in a later read
  ASSERT_TRUE(c.Send("6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello world");
  EXPECT_EQ(r->Header("x-padded"), "1");
  // And the connection is still usable.
  ASSERT_TRUE(c.Send(Post("/next", "x")));
  auto next = c.ReadResponse();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->body, "x");
}

TEST_F(HttpServerTest, ContentLengthBodyArrivingInPieces) {
  StartServer();
  RawHttpClient c(server_->port());
  const std::string body(200'000, 'b');
  const std::string request = Post("/big", body);
  const std::size_t split1 = request.size() / 3, split2 = 2 * request.size() / 3;
  ASSERT_TRUE(c.Send(std::string_view(request).substr(0, 40)));  // half a header
  std::this_thread::sleep_for(milliseconds(10));
  ASSERT_TRUE(c.Send(std::string_view(request).substr(40, split1 - 40)));
  std::this_thread::sleep_for(milliseconds(10));
  ASSERT_TRUE(c.Send(std::string_view(request).substr(split1, split2 - split1)));
  std::this_thread::sleep_for(milliseconds(10));
  ASSERT_TRUE(c.Send(std::string_view(request).substr(split2)));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, body);
  EXPECT_EQ(r->Header("x-padded"), "1");
}

TEST_F(HttpServerTest, ClaimedBodyOverTheLimitIsRefusedBeforeTheBodyIsSent) {
  options_.max_body_bytes = 1024;
  StartServer();
  RawHttpClient c(server_->port());
  // Only the header: a 10 GB claim must be answered without waiting for any of it.
  ASSERT_TRUE(c.Send("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 10000000000\r\n\r\n"));
  auto r = c.ReadResponse(milliseconds(2000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(r->Header("connection"), "close");
  EXPECT_EQ(r->Header("content-type"), "application/json");
  EXPECT_NE(r->body.find("{\"error\":\""), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("1024"), std::string::npos) << r->body;
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  EXPECT_EQ(handler_.calls.load(), 0);
}

TEST_F(HttpServerTest, BodyAtTheLimitIsAccepted) {
  options_.max_body_bytes = 1024;
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Post("/x", std::string(1024, 'a'))));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, ChunkedBodyOverTheLimitGets413) {
  options_.max_body_bytes = 10;
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(
      c.Send("POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
             "8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  EXPECT_EQ(handler_.calls.load(), 0);
}

// Waits until `budget` holds `bytes` (the server's threads charge it as bodies arrive).
bool WaitHeld(const IncomingBodies& budget, uint64_t bytes) {
  for (int i = 0; i < 500 && budget.held() != bytes; ++i)
    std::this_thread::sleep_for(milliseconds(10));
  return budget.held() == bytes;
}

// Bodies still arriving on all connections together stay within the server-wide budget: the
// request whose bytes would pass it gets 503 with Retry-After and its connection is closed, the
// others go on, and what a body held is given back when it is handed on or its connection ends
// (probe 64: 40 connections held 321 MiB of nearly complete bodies).
TEST_F(HttpServerTest, BodiesStillArrivingPastTheServerWideBudgetGet503) {
  auto budget = std::make_shared<IncomingBodies>(100'000);
  options_.incoming_bodies = budget;
  StartServer();
  const std::string body(80'000, 'b');
  const std::string request = Post("/held", body);
  const std::size_t head = request.size() - body.size();
  RawHttpClient a(server_->port());
  ASSERT_TRUE(a.Send(std::string_view(request).substr(0, head + 60'000)));
  // What its read window takes is charged, not only what came: the rest of its 80,000 bytes.
  ASSERT_TRUE(WaitHeld(*budget, 80'000));

  RawHttpClient b(server_->port());
  ASSERT_TRUE(b.Send(std::string_view(request).substr(0, head + 50'000)));
  auto refused = b.ReadResponse(milliseconds(5000));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->Header("retry-after"), "1");
  EXPECT_EQ(refused->Header("connection"), "close");
  EXPECT_NE(refused->body.find("100000 bytes of request bodies still arriving"), std::string::npos)
      << refused->body;
  EXPECT_TRUE(b.WaitClosed(milliseconds(5000)));
  EXPECT_EQ(budget->refused(), 1u);
  EXPECT_EQ(budget->held(), 80'000u);

  // The first goes on, and gives its share back once handed to the handler.
  ASSERT_TRUE(a.Send(std::string_view(request).substr(head + 60'000)));
  auto done = a.ReadResponse();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, 200);
  EXPECT_EQ(done->body, body);
  EXPECT_EQ(budget->held(), 0u);

  // A chunked body is charged as its chunks arrive, also in the middle of one large chunk
  // (probe 75: only a read ending inside a chunk-size line was charged); past the budget it is
  // refused; a connection that ends mid-body gives its share back.
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("POST /chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" +
                     std::string("30d40\r\n") + std::string(40'000, 'c')));
  ASSERT_TRUE(WaitHeld(*budget, 40'000));
  c.Close();
  EXPECT_TRUE(WaitHeld(*budget, 0));
  RawHttpClient large(server_->port());
  ASSERT_TRUE(large.Send("POST /chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" +
                         std::string("30d40\r\n") + std::string(60'000, 'c')));
  ASSERT_TRUE(WaitHeld(*budget, 60'000));
  ASSERT_TRUE(large.Send(std::string(60'000, 'c')));
  auto over = large.ReadResponse(milliseconds(5000));
  ASSERT_TRUE(over);
  EXPECT_EQ(over->status, 503);
  EXPECT_TRUE(WaitHeld(*budget, 0));
  EXPECT_EQ(budget->refused(), 2u);
  EXPECT_EQ(handler_.calls.load(), 1);

  // Bodies one after another each fit: what one held is free again for the next.
  for (int i = 0; i < 3; ++i) {
    RawHttpClient d(server_->port());
    ASSERT_TRUE(d.Send(request));
    auto r = d.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  }
}

TEST_F(HttpServerTest, HugeHeaderGets431) {
  options_.max_header_bytes = 4096;
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("GET / HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(8192, 'h') + "\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 431);
  EXPECT_EQ(r->Header("connection"), "close");
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  EXPECT_EQ(handler_.calls.load(), 0);
}

TEST_F(HttpServerTest, MalformedRequestLineGets400AndClose) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("GARBAGE\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("malformed HTTP request"), std::string::npos) << r->body;
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
}

TEST_F(HttpServerTest, MalformedChunkGets400) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(
      c.Send("POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
             "zz\r\nhello\r\n0\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
}

TEST_F(HttpServerTest, BadContentLengthGets400) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 12abc\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
}

// RFC 9112 rules Beast does not enforce: a table of requests the server must refuse itself,
// before the handler sees them, answering and closing the connection.
struct RefusedRequest {
  const char* name;
  std::string request;
  int status;
  const char* says;  // in the error body
};

TEST_F(HttpServerTest, Rfc9112ViolationsAreRefusedAndTheConnectionClosed) {
  const RefusedRequest cases[] = {
      {"no Host (HTTP/1.1)", "GET /x HTTP/1.1\r\n\r\n", 400, "Host header"},
      {"no Host, other fields", "GET /x HTTP/1.1\r\nX-Foo: a\r\n\r\n", 400, "Host header"},
      {"two Host fields", "GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400,
       "more than one Host"},
      {"obs-fold (SP)", "GET /x HTTP/1.1\r\nHost: t\r\nX-Foo: a\r\n b\r\n\r\n", 400,
       "line folding"},
      {"obs-fold (HTAB)", "GET /x HTTP/1.1\r\nHost: t\r\nX-Foo: a\r\n\tb\r\n\r\n", 400,
       "line folding"},
      {"obs-fold after an empty value", "GET /x HTTP/1.1\r\nHost: t\r\nX-Foo:\r\n b\r\n\r\n", 400,
       "line folding"},
      {"obs-fold of Host", "GET /x HTTP/1.1\r\nHost:\r\n t\r\n\r\n", 400, "line folding"},
      {"a Host value with a space and userinfo", "GET /x HTTP/1.1\r\nHost: x y@z\r\n\r\n", 400,
       "not a valid host"},
      {"a Host value with a path", "GET /x HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, "not a valid host"},
      {"an absolute-form target with userinfo", "GET http://u@x/v2 HTTP/1.1\r\nHost: x\r\n\r\n",
       400, "authority is not host[:port]"},
      {"an absolute-form target with a fragment in its authority",
       "GET http://x#/v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n", 400,
       "authority is not host[:port]"},
      {"an absolute-form target with a backslash",
       "GET http://x\\/v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n", 400,
       "authority is not host[:port]"},
      {"an absolute-form target without an authority", "GET http:///v2 HTTP/1.1\r\nHost: x\r\n\r\n",
       400, "authority is not host[:port]"},
      {"Transfer-Encoding: identity",
       "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: identity\r\n\r\n", 400,
       "must end with 'chunked'"},
      {"identity with a Content-Length",
       "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: identity\r\nContent-Length: 2\r\n"
       "\r\nhi",
       400, "must end with 'chunked'"},
      {"gzip alone", "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 400,
       "must end with 'chunked'"},
      {"chunked, then gzip",
       "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400,
       "must end with 'chunked'"},
      {"chunked twice",
       "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400,
       "must end with 'chunked'"},
      {"empty Transfer-Encoding", "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: \r\n\r\n", 400,
       "must end with 'chunked'"},
      {"Transfer-Encoding in HTTP/1.0",
       "POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "HTTP/1.0"},
      {"gzip, chunked",
       "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501,
       "'gzip' is not implemented"},
      {"HTTP/2.0 on an HTTP/1.1 connection", "GET /x HTTP/2.0\r\nHost: t\r\n\r\n", 505,
       "only HTTP/1.0 and HTTP/1.1"},
      {"HTTP/3.0", "GET /x HTTP/3.0\r\nHost: t\r\n\r\n", 505, "only HTTP/1.0 and HTTP/1.1"},
      {"a malformed version", "GET /x HTTP/x.1\r\nHost: t\r\n\r\n", 400, "bad version"},
      {"gzip, then chunked in a second field",
       "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"
       "\r\n0\r\n\r\n",
       501, "'gzip' is not implemented"},
  };
  options_.access_log = &access_log_;
  StartServer();
  for (const RefusedRequest& c : cases) {
    SCOPED_TRACE(c.name);
    RawHttpClient client(server_->port());
    ASSERT_TRUE(client.connected());
    ASSERT_TRUE(client.Send(c.request));
    auto r = client.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, c.status);
    EXPECT_NE(r->body.find(c.says), std::string::npos) << r->body;
    EXPECT_EQ(r->Header("connection"), "close");
    EXPECT_FALSE(r->Header("x-request-id").empty());
    EXPECT_TRUE(client.WaitClosed(milliseconds(5000)));
  }
  EXPECT_EQ(handler_.calls.load(), 0);
  EXPECT_EQ(handler_.prechecks.load(), 0);
  EXPECT_EQ(access_log_.records().size(), std::size(cases));
}

TEST_F(HttpServerTest, ObsFoldSplitAcrossReadsIsRefused) {
  StartServer();
  RawHttpClient c(server_->port());
  // The fold's SP arrives in a later read than the line it continues.
  ASSERT_TRUE(c.Send("GET /x HTTP/1.1\r\nHost: t\r\nX-Foo: a\r\n"));
  std::this_thread::sleep_for(milliseconds(50));
  ASSERT_TRUE(c.Send(" b\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(handler_.calls.load(), 0);
}

TEST_F(HttpServerTest, WhatRfc9112AllowsIsServed) {
  StartServer();
  const std::string allowed[] = {
      "GET /x HTTP/1.0\r\n\r\n",  // HTTP/1.0 may omit Host
      "GET /x HTTP/1.1\r\nhOsT: t\r\nX-Foo: a b\tc\r\n\r\n",
      "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
      // Empty list elements are ignored (RFC 9110 §5.6.1).
      "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: , chunked ,\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
      "GET /x HTTP/1.1\r\nHost:\r\n\r\n",  // empty Host: allowed when the target has no authority
  };
  for (const std::string& request : allowed) {
    SCOPED_TRACE(request);
    RawHttpClient c(server_->port());
    ASSERT_TRUE(c.Send(request));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }
  EXPECT_EQ(handler_.calls.load(), static_cast<int>(std::size(allowed)));
}

std::string UpgradeRequest(std::string_view settings_fields) {
  return "GET /u HTTP/1.1\r\nHost: t\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n" +
         std::string(settings_fields) + "\r\n";
}

// RFC 7540 §3.2.1: no upgrade with an invalid HTTP2-Settings; docs/server.md: 400 and close.
TEST_F(HttpServerTest, H2cUpgradeWithAnInvalidHttp2SettingsGets400AndClose) {
  const std::pair<const char*, std::string> cases[] = {
      {"not base64url", "HTTP2-Settings: !!!!\r\n"},
      {"not whole 6-byte settings", "HTTP2-Settings: AAMAAA\r\n"},
      {"ENABLE_PUSH 2", "HTTP2-Settings: AAIAAAAC\r\n"},
      {"MAX_FRAME_SIZE 4096", "HTTP2-Settings: AAUAABAA\r\n"},
      {"INITIAL_WINDOW_SIZE 2^31", "HTTP2-Settings: AASAAAAA\r\n"},
      {"two HTTP2-Settings fields", "HTTP2-Settings: AAMAAABk\r\nHTTP2-Settings: AAMAAABk\r\n"},
  };
  options_.access_log = &access_log_;
  options_.h2c_upgrade = true;
  StartServer();
  for (const auto& [name, fields] : cases) {
    SCOPED_TRACE(name);
    RawHttpClient c(server_->port());
    ASSERT_TRUE(c.Send(UpgradeRequest(fields)));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r) << "no response: the connection was closed without one";
    EXPECT_EQ(r->status, 400);
    EXPECT_NE(r->body.find("HTTP2-Settings"), std::string::npos) << r->body;
    EXPECT_EQ(r->Header("connection"), "close");
    EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  }
  EXPECT_EQ(handler_.calls.load(), 0);
  EXPECT_EQ(access_log_.records().size(), std::size(cases));
}

// Off by default (HttpServer::Options::h2c_upgrade): through a proxy that forwards Upgrade, a
// 101 opens a tunnel past the proxy's rules (probe 57). The request is served as HTTP/1.1 and
// the connection stays HTTP/1.1.
TEST_F(HttpServerTest, H2cUpgradeIsServedAsHttp11UnlessTurnedOn) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(UpgradeRequest("HTTP2-Settings: AAMAAABk\r\n")));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->Header("x-target"), "/u");
  ASSERT_TRUE(c.Send(Post("/next", "x")));
  auto next = c.ReadResponse();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->body, "x");
  EXPECT_EQ(handler_.calls.load(), 2);
}

TEST_F(HttpServerTest, UpgradeWithoutHttp2SettingsIsPlainHttp11) {
  options_.h2c_upgrade = true;
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("GET /u HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->Header("x-target"), "/u");
  EXPECT_EQ(handler_.calls.load(), 1);
}

TEST_F(HttpServerTest, ExpectContinueGets100BeforeTheBody) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(
      c.Send("POST /x HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
             "Content-Length: 5\r\n\r\n"));
  auto interim = c.ReadResponse();
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(c.Send("hello"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello");
}

TEST_F(HttpServerTest, Http10WithoutKeepAliveIsClosedAfterTheResponse) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("GET /old HTTP/1.0\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->Header("connection"), "close");
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
}

TEST_F(HttpServerTest, ConnectionCloseRequestIsHonoured) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Post("/x", "b", "Connection: close\r\n")));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->Header("connection"), "close");
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
}

TEST_F(HttpServerTest, HeadResponseCarriesLengthButNoBody) {
  handler_.on_request = [](HttpRequest, HttpResponder respond) {
    HttpResponse r;
    r.body = "0123456789";
    respond(std::move(r));
  };
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("HEAD / HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n"));
  // The client parser frames by Content-Length, so read the HEAD answer's header by hand:
  // the next bytes must be the GET's status line, not a body.
  auto head = c.ReadResponse();  // consumes 10 bytes of the next response as "body"
  ASSERT_TRUE(head);
  EXPECT_EQ(head->Header("content-length"), "10");
  EXPECT_EQ(head->body.substr(0, 8), "HTTP/1.1");
}

TEST_F(HttpServerTest, SlowHeaderClientIsCutOffWhileOthersAreServed) {
  options_.header_timeout = milliseconds(300);
  StartServer();
  RawHttpClient slow(server_->port());
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(slow.Send("GET / HTTP/1.1\r\nHost: t\r\nX-Half: "));
  for (int i = 0; i < 5; ++i) {
    RawHttpClient fast(server_->port());
    ASSERT_TRUE(fast.Send(Post("/fast", "ok")));
    auto r = fast.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "ok");
  }
  auto timed_out = slow.ReadResponse(milliseconds(5000));
  ASSERT_TRUE(timed_out);
  EXPECT_EQ(timed_out->status, 408);
  EXPECT_EQ(timed_out->Header("connection"), "close");
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(250));
  EXPECT_TRUE(slow.WaitClosed(milliseconds(5000)));
  EXPECT_EQ(handler_.calls.load(), 5);
}

TEST_F(HttpServerTest, SilentConnectionIsCutOffByTheHeaderTimeout) {
  options_.header_timeout = milliseconds(200);
  StartServer();
  RawHttpClient c(server_->port());
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
}

TEST_F(HttpServerTest, StalledBodyIsCutOffByTheBodyTimeout) {
  options_.body_timeout = milliseconds(200);
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nonly-some"));
  auto r = c.ReadResponse(milliseconds(5000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 408);
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  EXPECT_EQ(handler_.calls.load(), 0);
}

TEST_F(HttpServerTest, StalledChunkedBodyGets408) {
  options_.body_timeout = milliseconds(200);
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(
      c.Send("POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
             "5\r\nhel"));
  auto r = c.ReadResponse(milliseconds(5000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 408);
}

TEST_F(HttpServerTest, BodyCutShortByHalfCloseGets400) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nonly-some"));
  c.ShutdownWrite();
  auto r = c.ReadResponse(milliseconds(5000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("closed before"), std::string::npos) << r->body;
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  EXPECT_EQ(handler_.calls.load(), 0);
}

TEST_F(HttpServerTest, HeaderCutShortByHalfCloseGets400) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("GET / HTTP/1.1\r\nHost:"));
  c.ShutdownWrite();
  auto r = c.ReadResponse(milliseconds(5000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
}

TEST_F(HttpServerTest, CleanCloseBetweenRequestsIsSilent) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Post("/x", "b")));
  ASSERT_TRUE(c.ReadResponse());
  c.ShutdownWrite();
  EXPECT_FALSE(c.ReadResponse(milliseconds(500)));  // closed with nothing written
}

TEST_F(HttpServerTest, IdleKeepAliveConnectionIsClosedAfterTheIdleTimeout) {
  options_.keepalive_timeout = milliseconds(200);
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Post("/x", "b")));
  ASSERT_TRUE(c.ReadResponse());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(150));
}

TEST_F(HttpServerTest, ResponderMayBeCalledFromAnotherThread) {
  handler_.on_request = [this](HttpRequest request, HttpResponder respond) {
    Spawn([request = std::move(request), respond = std::move(respond)] {
      std::this_thread::sleep_for(milliseconds(20));
      respond(FakeHandler::Echo(request));
    });
  };
  StartServer();
  RawHttpClient c(server_->port());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.Send(Post("/async", "body" + std::to_string(i))));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "body" + std::to_string(i));
  }
}

TEST_F(HttpServerTest, SecondResponseForOneRequestIsIgnored) {
  handler_.on_request = [](HttpRequest request, HttpResponder respond) {
    respond(FakeHandler::Echo(request));
    HttpResponse extra;
    extra.status = 500;
    respond(std::move(extra));
  };
  StartServer();
  RawHttpClient c(server_->port());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(c.Send(Post("/x", "b")));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  }
}

TEST_F(HttpServerTest, ClientDisconnectBeforeTheResponseIsHarmless) {
  std::mutex mu;
  std::vector<HttpResponder> held;
  std::promise<void> arrived;
  handler_.on_request = [&](HttpRequest, HttpResponder respond) {
    std::lock_guard<std::mutex> lock(mu);
    held.push_back(std::move(respond));
    if (held.size() == 1) arrived.set_value();
  };
  StartServer();
  {
    RawHttpClient c(server_->port());
    ASSERT_TRUE(c.Send(Post("/x", "b")));
    ASSERT_EQ(arrived.get_future().wait_for(milliseconds(5000)), std::future_status::ready);
  }  // client gone
  std::this_thread::sleep_for(milliseconds(20));
  {
    std::lock_guard<std::mutex> lock(mu);
    HttpResponse r;
    r.body = std::string(1 << 20, 'x');  // big enough not to fit a socket buffer
    held[0](std::move(r));
  }
  // The server still serves.
  handler_.on_request = nullptr;
  RawHttpClient c2(server_->port());
  ASSERT_TRUE(c2.Send(Post("/y", "still-alive")));
  auto r = c2.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "still-alive");
}

// Polls `done` until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& done, milliseconds timeout = milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

// Holds every request's responder and cancellation token until the test answers.
struct HeldRequests {
  std::mutex mu;
  std::vector<HttpResponder> responders;
  std::vector<std::shared_ptr<CancellationToken>> tokens;
  std::vector<std::string> targets;
  std::vector<std::string> bodies;
  std::atomic<int> count{0};

  std::function<void(HttpRequest, HttpResponder)> Handler() {
    return [this](HttpRequest request, HttpResponder respond) {
      std::lock_guard<std::mutex> lock(mu);
      responders.push_back(std::move(respond));
      tokens.push_back(request.cancellation);
      targets.push_back(request.target);
      bodies.push_back(*request.body);
      ++count;
    };
  }
  std::shared_ptr<CancellationToken> Token(int i) {
    std::lock_guard<std::mutex> lock(mu);
    return tokens.at(static_cast<std::size_t>(i));
  }
  void Respond(int i, std::string body) {
    HttpResponder r;
    {
      std::lock_guard<std::mutex> lock(mu);
      r = responders.at(static_cast<std::size_t>(i));
    }
    HttpResponse response;
    response.body = std::move(body);
    r(std::move(response));
  }
  // Waits for the i-th request, answers it with `body`, and returns the body `client` read
  // ("<no request>" or "<no response>" when one did not come).
  std::string AnswerAndRead(int i, const std::string& body, RawHttpClient& client) {
    if (!WaitFor([&] { return count.load() == i + 1; })) return "<no request>";
    Respond(i, body);
    auto r = client.ReadResponse();
    return r ? r->body : "<no response>";
  }
};

TEST_F(HttpServerTest, EveryRequestCarriesAFreshCancellationToken) {
  HeldRequests held;
  handler_.on_request = held.Handler();
  StartServer();
  RawHttpClient c(server_->port());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(c.Send(Post("/x", "b")));
    ASSERT_TRUE(WaitFor([&] { return held.count.load() == i + 1; }));
    ASSERT_NE(held.Token(i), nullptr);
    held.Respond(i, "ok");
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "ok");
  }
  EXPECT_NE(held.Token(0), held.Token(1));
  c.Close();
  std::this_thread::sleep_for(milliseconds(50));
  // Answered requests are never cancelled, even when the client leaves afterwards.
  EXPECT_FALSE(held.Token(0)->cancelled());
  EXPECT_FALSE(held.Token(1)->cancelled());
}

TEST_F(HttpServerTest, ClientCloseWhileHandlingCancelsTheRequest) {
  HeldRequests held;
  handler_.on_request = held.Handler();
  StartServer();
  {
    RawHttpClient c(server_->port());
    ASSERT_TRUE(c.Send(Post("/x", "b")));
    ASSERT_TRUE(WaitFor([&] { return held.count.load() == 1; }));
    EXPECT_FALSE(held.Token(0)->cancelled());
  }  // closed
  auto token = held.Token(0);
  const auto closed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return token->cancelled(); }));
  EXPECT_LT(std::chrono::steady_clock::now() - closed_at, milliseconds(1000));
  held.Respond(0, std::string(1 << 20, 'x'));  // late: dropped
  handler_.on_request = nullptr;
  RawHttpClient c2(server_->port());
  ASSERT_TRUE(c2.Send(Post("/y", "still-alive")));
  auto r = c2.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "still-alive");
}

// A half-close reads exactly like a close (EOF), and clients that half-close and still wait
// for an answer are rare, so it cancels too (docs/server.md, "Client disconnects").
TEST_F(HttpServerTest, HalfCloseWhileHandlingCancelsTheRequest) {
  HeldRequests held;
  handler_.on_request = held.Handler();
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Post("/x", "b")));
  ASSERT_TRUE(WaitFor([&] { return held.count.load() == 1; }));
  c.ShutdownWrite();
  auto token = held.Token(0);
  ASSERT_TRUE(WaitFor([&] { return token->cancelled(); }));
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  held.Respond(0, "late");
}

TEST_F(HttpServerTest, PipelinedRequestArrivingWhileHandlingIsKept) {
  HeldRequests held;
  handler_.on_request = held.Handler();
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Post("/first", "1")));
  ASSERT_TRUE(WaitFor([&] { return held.count.load() == 1; }));
  // The next request arrives while the first is being handled; the watch read takes it in.
  ASSERT_TRUE(c.Send(Post("/second", "2") + Post("/third", std::string(100000, 'z'))));
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(held.count.load(), 1);  // one request at a time
  EXPECT_FALSE(held.Token(0)->cancelled());
  EXPECT_EQ(held.AnswerAndRead(0, "one", c), "one");
  EXPECT_EQ(held.AnswerAndRead(1, "two", c), "two");
  EXPECT_EQ(held.AnswerAndRead(2, "three", c), "three");
  {
    std::lock_guard<std::mutex> lock(held.mu);
    EXPECT_EQ(held.targets, (std::vector<std::string>{"/first", "/second", "/third"}));
  }
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(held.Token(i)->cancelled());
}

// A pipelined request of which only a part came while the one before it was handled: the
// part is in the connection's buffer and the disconnect watch still reads into it when the
// answer is out. Parsing that part must not start a second read beside the watch (before: the
// rest of the header landed in the watch and the request waited for the header timeout; body
// bytes were split between the two reads and the handler got the wrong body), nor move the
// buffer under it (a read into freed memory).
TEST_F(HttpServerTest, APipelinedRequestCutAcrossAnAnswerIsReadWhole) {
  HeldRequests held;
  handler_.on_request = held.Handler();
  options_.header_timeout = milliseconds(3000);
  options_.body_timeout = milliseconds(3000);
  StartServer();
  RawHttpClient c(server_->port());
  const std::string body(1000, 'b');
  const std::string second = Post("/second", body);
  const size_t header_end = second.find("\r\n\r\n") + 4;
  // Where the part sent before the answer ends: inside the header, at its end, inside the body.
  const std::vector<size_t> cuts = {20, header_end, header_end + 300};
  int n = 0;
  for (size_t cut : cuts) {
    ASSERT_TRUE(c.Send(Post("/first", "1")));
    ASSERT_TRUE(WaitFor([&] { return held.count.load() == n + 1; }));
    ASSERT_TRUE(c.Send(second.substr(0, cut)));
    std::this_thread::sleep_for(milliseconds(50));  // the watch takes it in, and reads on
    EXPECT_EQ(held.AnswerAndRead(n, "one", c), "one") << cut;
    std::this_thread::sleep_for(milliseconds(50));  // the next request is parsed as far as it goes
    ASSERT_TRUE(c.Send(second.substr(cut)));
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(held.AnswerAndRead(n + 1, "two", c), "two") << cut;
    EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000)) << cut;
    {
      std::lock_guard<std::mutex> lock(held.mu);
      ASSERT_EQ(held.bodies.size(), static_cast<size_t>(n + 2)) << cut;
      EXPECT_EQ(held.targets.back(), "/second") << cut;
      EXPECT_EQ(held.bodies.back(), body) << cut;
    }
    n += 2;
  }
}

// A request answered from another thread: its disconnect watch reads on while the response
// is written and becomes the next request's read. Requests that come after the response, one
// the client pipelines behind a response still in flight, and the idle timeout all go through it.
TEST_F(HttpServerTest, TheWatchReadOfAnAnsweredRequestReadsTheNextOne) {
  HeldRequests held;
  handler_.on_request = held.Handler();
  options_.keepalive_timeout = milliseconds(300);
  StartServer();
  RawHttpClient c(server_->port());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.Send(Post("/r" + std::to_string(i), "b")));
    ASSERT_TRUE(WaitFor([&] { return held.count.load() == i + 1; }));
    std::this_thread::sleep_for(milliseconds(20));  // the watch is reading
    held.Respond(i, "answer" + std::to_string(i));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->body, "answer" + std::to_string(i));
    std::this_thread::sleep_for(milliseconds(20));  // the next request finds it reading on
  }
  // Sent together with the answer's write: the watch may take it in during the write.
  ASSERT_TRUE(c.Send(Post("/r3", "b")));
  ASSERT_TRUE(WaitFor([&] { return held.count.load() == 4; }));
  held.Respond(3, "answer3");
  ASSERT_TRUE(c.Send(Post("/r4", "b")));
  auto r3 = c.ReadResponse();
  ASSERT_TRUE(r3);
  EXPECT_EQ(r3->body, "answer3");
  EXPECT_EQ(held.AnswerAndRead(4, "answer4", c), "answer4");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));  // idle: the keep-alive timeout still holds
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(250));
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(held.Token(i)->cancelled()) << i;
}

// A client that leaves between requests, after a response that came from another thread, is
// seen by the read the watch became: the connection closes at once.
TEST_F(HttpServerTest, AClientLeavingAfterAnAnswerFromAnotherThreadIsSeen) {
  HeldRequests held;
  handler_.on_request = held.Handler();
  StartServer();
  {
    RawHttpClient c(server_->port());
    ASSERT_TRUE(c.Send(Post("/x", "b")));
    ASSERT_TRUE(WaitFor([&] { return held.count.load() == 1; }));
    held.Respond(0, "one");
    ASSERT_TRUE(c.ReadResponse());
  }  // closed
  EXPECT_TRUE(WaitFor([&] { return server_->open_connections() == 0; }));
}

TEST_F(HttpServerTest, StopGivingUpOnARequestCancelsIt) {
  HeldRequests held;
  handler_.on_request = held.Handler();
  options_.shutdown_timeout = milliseconds(100);
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Post("/x", "b")));
  ASSERT_TRUE(WaitFor([&] { return held.count.load() == 1; }));
  server_.reset();
  EXPECT_TRUE(held.Token(0)->cancelled());
}

TEST_F(HttpServerTest, ResponderOutlivingTheServerIsHarmless) {
  HttpResponder held;
  std::promise<void> arrived;
  handler_.on_request = [&](HttpRequest, HttpResponder respond) {
    held = std::move(respond);
    arrived.set_value();
  };
  options_.shutdown_timeout = milliseconds(100);
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Post("/x", "b")));
  ASSERT_EQ(arrived.get_future().wait_for(milliseconds(5000)), std::future_status::ready);
  server_.reset();  // Stop() gives up on the request after 100 ms
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  held(HttpResponse{});  // posts into a stopped context, dropped with it
  held = nullptr;
}

TEST_F(HttpServerTest, HandlerExceptionGives500) {
  handler_.on_request = [](HttpRequest, HttpResponder) { throw std::runtime_error("boom"); };
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Post("/x", "b")));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->Header("connection"), "close");
}

TEST_F(HttpServerTest, GracefulStopFinishesTheInFlightRequest) {
  HttpResponder held;
  std::promise<void> arrived;
  handler_.on_request = [&](HttpRequest request, HttpResponder respond) {
    if (request.target == "/slow") {
      held = std::move(respond);
      arrived.set_value();
    } else {
      respond(FakeHandler::Echo(request));
    }
  };
  StartServer();
  const uint16_t port = server_->port();

  RawHttpClient idle(port);  // an idle keep-alive connection: closed by Stop
  ASSERT_TRUE(idle.Send(Post("/fast", "x")));
  ASSERT_TRUE(idle.ReadResponse());

  RawHttpClient busy(port);
  ASSERT_TRUE(busy.Send(Post("/slow", "payload")));
  ASSERT_EQ(arrived.get_future().wait_for(milliseconds(5000)), std::future_status::ready);

  auto stopped = std::async(std::launch::async, [this] { server_->Stop(); });
  EXPECT_TRUE(idle.WaitClosed(milliseconds(5000)));
  EXPECT_EQ(stopped.wait_for(milliseconds(100)), std::future_status::timeout)
      << "Stop must wait for the in-flight request";
  // New connections are refused once Stop has begun.
  RawHttpClient late(port);
  EXPECT_TRUE(!late.connected() || late.WaitClosed(milliseconds(5000)));

  HttpResponse response;
  response.body = "finished";
  held(std::move(response));
  auto r = busy.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "finished");
  EXPECT_EQ(r->Header("connection"), "close");
  EXPECT_EQ(stopped.wait_for(milliseconds(5000)), std::future_status::ready);
  EXPECT_TRUE(busy.WaitClosed(milliseconds(5000)));
}

// A keep-alive client that sends its next request just before the stop gets it answered (and
// the connection closed after it), whether the stop reached the connection while the previous
// response was being written, or with the request still in the kernel, or read and queued.
// Many rounds, since which of these happens is a race.
TEST_F(HttpServerTest, RequestSentJustBeforeStopOnAnIdleConnectionIsAnswered) {
  options_.io_threads = 1;
  for (int round = 0; round < 200; ++round) {
    StartServer();
    RawHttpClient c(server_->port());
    ASSERT_TRUE(c.Send(Post("/first", "a")));
    ASSERT_TRUE(c.ReadResponse());
    ASSERT_TRUE(c.Send(Post("/second", "b")));
    server_->Stop();
    auto r = c.ReadResponse();
    ASSERT_TRUE(r) << "round " << round << ": the request sent before the stop was dropped";
    EXPECT_EQ(r->body, "b");  // with Connection: close unless it was answered before the stop
    EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
    server_.reset();
  }
}

TEST_F(HttpServerTest, StopGivesUpOnAStuckRequestAfterTheShutdownTimeout) {
  HttpResponder held;
  std::promise<void> arrived;
  handler_.on_request = [&](HttpRequest, HttpResponder respond) {
    held = std::move(respond);
    arrived.set_value();
  };
  options_.shutdown_timeout = milliseconds(200);
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Post("/x", "b")));
  ASSERT_EQ(arrived.get_future().wait_for(milliseconds(5000)), std::future_status::ready);
  const auto start = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(3000));
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  held(HttpResponse{});  // after Stop: dropped
}

TEST_F(HttpServerTest, ManyConcurrentClientsAcrossThreads) {
  StartServer();
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      RawHttpClient c(server_->port());
      for (int i = 0; i < 50; ++i) {
        const std::string body = std::to_string(t) + ":" + std::to_string(i);
        if (!c.Send(Post("/x", body))) return;
        auto r = c.ReadResponse();
        if (r && r->body == body) ++ok;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 400);
}

// ---- Tracing: receipt times, HttpRequest::version and HttpResponse::on_sent ----------------

// What a handler saw of one request, for the tracing tests.
struct SeenRequest {
  std::chrono::steady_clock::time_point received_at, body_received_at, handled_at;
  HttpVersion version = HttpVersion::kUnknown;
};

TEST_F(HttpServerTest, OnSentReportsTheWrittenResponseOnceAndReceiptIsStamped) {
  testing::SentRecorder sent;
  std::mutex mu;
  std::vector<SeenRequest> seen;
  std::thread::id io_thread;
  handler_.on_request = [&](HttpRequest request, HttpResponder respond) {
    {
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back({request.received_at, request.body_received_at,
                      std::chrono::steady_clock::now(), request.version});
      io_thread = std::this_thread::get_id();
    }
    HttpResponse r = FakeHandler::Echo(request);
    r.on_sent = sent.Callback();
    respond(std::move(r));
  };
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Post("/x", std::string(1000, 'b'))));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body.size(), 1000u);
  ASSERT_TRUE(sent.WaitForCalls(1));
  // A request without a body: complete with its header.
  ASSERT_TRUE(c.Send("GET /g HTTP/1.1\r\nHost: t\r\n\r\n"));
  ASSERT_TRUE(c.ReadResponse());
  ASSERT_TRUE(sent.WaitForCalls(2));
  std::this_thread::sleep_for(milliseconds(50));
  const auto calls = sent.calls();
  ASSERT_EQ(calls.size(), 2u);  // once per response, never again
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seen.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(calls[i].sent);
    EXPECT_EQ(calls[i].thread, io_thread);  // the connection's own thread (the handler's here)
    EXPECT_EQ(seen[i].version, HttpVersion::kHttp11);
    EXPECT_NE(seen[i].received_at, std::chrono::steady_clock::time_point{});
    EXPECT_LE(seen[i].received_at, seen[i].body_received_at);
    EXPECT_LE(seen[i].body_received_at, seen[i].handled_at);
    EXPECT_LE(seen[i].handled_at, calls[i].at);
  }
  EXPECT_EQ(seen[1].body_received_at, seen[1].received_at);
  EXPECT_EQ(HttpVersionName(seen[0].version), "HTTP/1.1");
}

TEST_F(HttpServerTest, BodyReceivedAtIsWhenTheLastBodyByteCame) {
  std::promise<SeenRequest> seen;
  handler_.on_request = [&](HttpRequest request, HttpResponder respond) {
    seen.set_value({request.received_at, request.body_received_at, std::chrono::steady_clock::now(),
                    request.version});
    respond(FakeHandler::Echo(request));
  };
  StartServer();
  RawHttpClient c(server_->port());
  const std::string body(256 << 10, 'x');
  ASSERT_TRUE(c.Send("POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body.substr(0, 1000)));
  std::this_thread::sleep_for(milliseconds(100));
  const auto second_part_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.Send(body.substr(1000)));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body.size(), body.size());
  auto future = seen.get_future();
  ASSERT_EQ(future.wait_for(milliseconds(5000)), std::future_status::ready);
  const SeenRequest s = future.get();
  // The last body byte came with the second part. (A fixed gap from received_at failed once on
  // a loaded machine, whose server read the head late.)
  EXPECT_GE(s.body_received_at, second_part_at);
  EXPECT_LE(s.received_at, s.body_received_at);
  EXPECT_LE(s.body_received_at, s.handled_at);
}

TEST_F(HttpServerTest, OnSentIsFalseWhenTheClientLeavesBeforeTheResponse) {
  HeldRequests held;
  handler_.on_request = held.Handler();
  StartServer();
  {
    RawHttpClient c(server_->port());
    ASSERT_TRUE(c.Send(Post("/x", "b")));
    ASSERT_TRUE(WaitFor([&] { return held.count.load() == 1; }));
  }  // closed
  auto token = held.Token(0);
  ASSERT_TRUE(WaitFor([&] { return token->cancelled(); }));
  testing::SentRecorder sent;
  HttpResponse late;
  late.body = "late";
  late.on_sent = sent.Callback();
  {
    std::lock_guard<std::mutex> lock(held.mu);
    held.responders[0](std::move(late));
  }
  ASSERT_TRUE(sent.WaitForCalls(1));
  std::this_thread::sleep_for(milliseconds(20));
  const auto calls = sent.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_FALSE(calls[0].sent);
  EXPECT_EQ(calls[0].at, std::chrono::steady_clock::time_point{});
}

TEST_F(HttpServerTest, OnSentIsFalseWhenTheWriteNeverFinishes) {
  // A client that stops reading a large response: the write times out and the connection
  // closes with the response's last byte never handed over.
  options_.write_timeout = milliseconds(200);
  testing::SentRecorder sent;
  handler_.on_request = [&](HttpRequest, HttpResponder respond) {
    HttpResponse r;
    r.body.assign(64 << 20, 'z');
    r.on_sent = sent.Callback();
    respond(std::move(r));
  };
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("GET /huge HTTP/1.1\r\nHost: t\r\n\r\n"));
  ASSERT_TRUE(sent.WaitForCalls(1));
  const auto calls = sent.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_FALSE(calls[0].sent);
}

// A client that reads slowly but steadily is not cut off by the write timeout: the kernel wakes
// a blocked writer only once about half its send buffer has drained, which at a slow reader's
// pace takes longer than the timeout, but the peer's acknowledged bytes move (tcp_progress.h;
// probe 33: 600 KB was the most a 20 KB/s client could download).
TEST_F(HttpServerTest, ASlowButSteadyReaderGetsTheWholeResponse) {
  options_.write_timeout = milliseconds(200);
  constexpr size_t kBody = 6 << 20;
  handler_.on_request = [&](HttpRequest, HttpResponder respond) {
    HttpResponse r;
    r.body.assign(kBody, 'z');
    respond(std::move(r));
  };
  StartServer();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  const int small = 16 << 10;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server_->port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string request = "GET /big HTTP/1.1\r\nHost: t\r\n\r\n";
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  size_t received = 0;
  std::vector<char> buf(16 << 10);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (received < kBody && std::chrono::steady_clock::now() < deadline) {
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) break;  // closed: cut off
    received += static_cast<size_t>(n);
    std::this_thread::sleep_for(milliseconds(4));  // about 4 MB/s: seconds for the whole body
  }
  ::close(fd);
  EXPECT_GE(received, kBody) << "cut off after " << received << " bytes";
}

TEST_F(HttpServerTest, PrecheckSeesTheReceiptTimeAndVersion) {
  std::atomic<bool> stamped{false};
  handler_.on_precheck = [&](const HttpRequest& head) -> std::optional<HttpResponse> {
    stamped = head.version == HttpVersion::kHttp11 &&
              head.received_at != std::chrono::steady_clock::time_point{};
    return std::nullopt;
  };
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Post("/x", "b")));
  ASSERT_TRUE(c.ReadResponse());
  EXPECT_TRUE(stamped.load());
}

// ---- The access log of the server's own refusals -------------------------------------------
// Each answer the transport writes itself is one record, written before the response, with the
// id the response carries in X-Request-Id.

TEST_F(HttpServerTest, MalformedRequestIsAccessLoggedWithAGeneratedId) {
  options_.access_log = &access_log_;
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("GARBAGE\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  const auto records = access_log_.records();
  ASSERT_EQ(records.size(), 1u);
  const auto& record = records[0];
  EXPECT_EQ(record.status, 400);
  EXPECT_EQ(record.protocol, "http");
  EXPECT_EQ(record.method, "");  // the request line never parsed
  EXPECT_EQ(record.target, "");
  EXPECT_NE(record.error.find("malformed HTTP request"), std::string::npos) << record.error;
  EXPECT_EQ(record.request_bytes, 0u);
  EXPECT_EQ(record.response_bytes, r->body.size());
  EXPECT_EQ(record.request_id.size(), 15u);  // generated: "<6 hex>-<8 hex>"
  EXPECT_EQ(r->Header("x-request-id"), record.request_id);
  EXPECT_EQ(handler_.calls.load(), 0);
}

TEST_F(HttpServerTest, ChunkedBodyOverTheLimitIsAccessLoggedWithTheClientsId) {
  options_.access_log = &access_log_;
  options_.max_body_bytes = 10;
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(
      c.Send("POST /v2/models/m/infer HTTP/1.1\r\nHost: t\r\nX-Request-Id: client-413\r\n"
             "Transfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(r->Header("x-request-id"), "client-413");
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  const auto records = access_log_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, 413);
  EXPECT_EQ(records[0].request_id, "client-413");
  EXPECT_EQ(records[0].method, "POST");
  EXPECT_EQ(records[0].target, "/v2/models/m/infer");
  EXPECT_NE(records[0].error.find("maximum allowed value of 10 bytes"), std::string::npos)
      << records[0].error;
  EXPECT_EQ(records[0].request_bytes, 8u);  // the first chunk; the second was refused
  EXPECT_EQ(records[0].response_bytes, r->body.size());
}

TEST_F(HttpServerTest, ClaimedBodyOverTheLimitIsAccessLogged) {
  options_.access_log = &access_log_;
  options_.max_body_bytes = 1024;
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 10000000000\r\n\r\n"));
  auto r = c.ReadResponse(milliseconds(2000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  const auto records = access_log_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, 413);
  EXPECT_EQ(records[0].method, "POST");
  EXPECT_EQ(records[0].target, "/x");
  EXPECT_EQ(records[0].request_bytes, 0u);
  EXPECT_EQ(r->Header("x-request-id"), records[0].request_id);
  EXPECT_FALSE(records[0].request_id.empty());
}

TEST_F(HttpServerTest, HugeHeaderIsAccessLogged) {
  options_.access_log = &access_log_;
  options_.max_header_bytes = 4096;
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("GET / HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(8192, 'h') + "\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 431);
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  const auto records = access_log_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, 431);
  EXPECT_EQ(records[0].method, "GET");  // the header is parsed as it arrives, up to the limit
  EXPECT_EQ(records[0].target, "/");
  EXPECT_NE(records[0].error.find("4096"), std::string::npos) << records[0].error;
  EXPECT_FALSE(records[0].request_id.empty());
  EXPECT_EQ(r->Header("x-request-id"), records[0].request_id);
}

// A request line longer than the header limit: Beast never parsed it, but the 431 still names
// the target as far as it was read, so that the handler can shape it (an OpenAI error under
// /v1/; probe 31) and the access log says where it went.
TEST_F(HttpServerTest, AnOverLongRequestLineIs431WithItsTargetAsFarAsRead) {
  options_.access_log = &access_log_;
  options_.max_header_bytes = 4096;
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(
      c.Send("POST /v1/completions?q=" + std::string(8192, 'q') + " HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 431);
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  const auto records = access_log_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].method, "POST");
  EXPECT_EQ(records[0].target.rfind("/v1/completions?q=qqq", 0), 0u) << records[0].target;
  EXPECT_LE(records[0].target.size(), 4096u);
}

// RFC 9112 §2.3: a higher minor version of HTTP/1 is served as HTTP/1.1, as nginx does (probe
// 40 F7: Beast's "bad version", a 400), also when it is pipelined after another request.
TEST_F(HttpServerTest, AHigherMinorVersionOfHttp1IsServedAsHttp11) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("GET /x HTTP/1.2\r\nHost: t\r\n\r\nGET /y HTTP/1.9\r\nHost: t\r\n\r\n"));
  for (int i = 0; i < 2; ++i) {
    auto r = c.ReadResponse();
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->status, 200) << i;
  }
  RawHttpClient cut(server_->port());
  ASSERT_TRUE(cut.Send("GET /x HTTP/1.3"));
  std::this_thread::sleep_for(milliseconds(50));
  ASSERT_TRUE(cut.Send("\r\nHost: t\r\n\r\n"));
  auto r = cut.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

// Whether the request line's end came in one read or was cut between its CR and LF, an
// HTTP/2.0 request line is a 505 (probe 40: the cut made it a 400).
TEST_F(HttpServerTest, AnHttp20RequestLineIs505HoweverItsBytesArrive) {
  StartServer();
  for (const std::string& cut : {std::string("GET /x HTTP/2.0\r"), std::string("GET /x HTTP/2.0"),
                                 std::string("GET /x HTTP/2.")}) {
    SCOPED_TRACE(cut);
    const std::string whole = "GET /x HTTP/2.0\r\nHost: t\r\n\r\n";
    RawHttpClient c(server_->port());
    ASSERT_TRUE(c.Send(cut));
    std::this_thread::sleep_for(milliseconds(50));
    c.Send(whole.substr(cut.size()));  // may fail: the server may have answered and closed
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 505);
  }
}

TEST_F(HttpServerTest, StalledBodyIsAccessLoggedWithTheBytesRead) {
  options_.access_log = &access_log_;
  options_.body_timeout = milliseconds(200);
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(
      c.Send("POST /x?q=1 HTTP/1.1\r\nHost: t\r\nX-Request-Id: stalled-1\r\n"
             "Content-Length: 100\r\n\r\nonly-some"));
  auto r = c.ReadResponse(milliseconds(5000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 408);
  EXPECT_EQ(r->Header("x-request-id"), "stalled-1");
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  const auto records = access_log_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, 408);
  EXPECT_EQ(records[0].request_id, "stalled-1");
  EXPECT_EQ(records[0].method, "POST");
  EXPECT_EQ(records[0].target, "/x?q=1");
  EXPECT_EQ(records[0].request_bytes, 9u);  // "only-some"
  EXPECT_NE(records[0].error.find("body timeout"), std::string::npos) << records[0].error;
}

TEST_F(HttpServerTest, StalledHeaderIsAccessLogged) {
  options_.access_log = &access_log_;
  options_.header_timeout = milliseconds(200);
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("GET /x HTTP/1.1\r\nHost: t\r\nX-Request-Id: half-1\r\nX-Half: "));
  auto r = c.ReadResponse(milliseconds(5000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 408);
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  const auto records = access_log_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].status, 408);
  // The request line and the complete fields were parsed as they came.
  EXPECT_EQ(records[0].method, "GET");
  EXPECT_EQ(records[0].target, "/x");
  EXPECT_EQ(records[0].request_id, "half-1");
  EXPECT_EQ(r->Header("x-request-id"), "half-1");
}

// The header's last whole line before the stall: Beast has not taken it (it waits for the next
// line, which could fold into it), and the client's id was lost when it came last (probe 41).
TEST_F(HttpServerTest, AStalledHeadersLastWholeFieldStillGivesItsRequestId) {
  options_.access_log = &access_log_;
  options_.header_timeout = milliseconds(200);
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("GET /x HTTP/1.1\r\nHost: t\r\nx-REQUEST-id:  last-1 \r\n"));
  auto r = c.ReadResponse(milliseconds(5000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 408);
  EXPECT_EQ(r->Header("x-request-id"), "last-1");
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  const auto records = access_log_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].request_id, "last-1");
  // A line cut short is not taken, nor one a folded line continues (the parser refuses those).
  RawHttpClient d(server_->port());
  ASSERT_TRUE(d.Send("GET /x HTTP/1.1\r\nHost: t\r\nX-Request-Id: cut"));
  r = d.ReadResponse(milliseconds(5000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 408);
  EXPECT_NE(r->Header("x-request-id"), "cut");
  RawHttpClient e(server_->port());
  ASSERT_TRUE(e.Send("GET /x HTTP/1.1\r\nHost: t\r\nX-Request-Id: fold-1\r\n  more\r\n"));
  r = e.ReadResponse(milliseconds(5000));
  ASSERT_TRUE(r);
  EXPECT_NE(r->Header("x-request-id"), "fold-1");
}

TEST_F(HttpServerTest, AnUnacceptableClientIdIsReplacedInTheRefusal) {
  options_.access_log = &access_log_;
  StartServer();
  RawHttpClient c(server_->port());
  // 200 bytes: over the 128-byte limit for a client's id.
  ASSERT_TRUE(c.Send("GET / HTTP/1.1\r\nHost: t\r\nX-Request-Id: " + std::string(200, 'i') +
                     "\r\nContent-Length: nope\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  const auto records = access_log_.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].request_id.size(), 15u);
  EXPECT_EQ(r->Header("x-request-id"), records[0].request_id);
}

TEST_F(HttpServerTest, WhatIsNotARefusalIsNotAccessLogged) {
  options_.access_log = &access_log_;
  options_.header_timeout = milliseconds(200);
  options_.keepalive_timeout = milliseconds(200);
  handler_.on_precheck = RefuseTarget;
  StartServer();
  {
    // Answered by the handler (its own log's business), then closed idle: no record.
    RawHttpClient c(server_->port());
    ASSERT_TRUE(c.Send(Post("/ok", "body") + Post("/refuse", "body")));
    for (int status : {200, 503}) {
      auto r = c.ReadResponse();
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, status);
    }
    EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  }
  {
    RawHttpClient silent(server_->port());  // never sends: closed by the header timeout
    EXPECT_TRUE(silent.WaitClosed(milliseconds(5000)));
  }
  {
    RawHttpClient gone(server_->port());  // leaves between requests
    ASSERT_TRUE(gone.Send(Post("/ok", "x")));
    ASSERT_TRUE(gone.ReadResponse());
  }
  server_->Stop();
  EXPECT_EQ(access_log_.records().size(), 0u);
}

TEST_F(HttpServerTest, RefusalsCarryARequestIdWithoutAnAccessLog) {
  StartServer();  // options_.access_log stays null
  RawHttpClient c(server_->port());
  ASSERT_TRUE(
      c.Send("GET / HTTP/1.1\r\nHost: t\r\nX-Request-Id: mine\r\nContent-Length: x\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->Header("x-request-id"), "mine");
  RawHttpClient garbage(server_->port());
  ASSERT_TRUE(garbage.Send("GARBAGE\r\n\r\n"));
  r = garbage.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->Header("x-request-id").size(), 15u);
  EXPECT_TRUE(access_log_.records().empty());
}

}  // namespace
}  // namespace harrier
