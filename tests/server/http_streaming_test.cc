// Streamed responses over HTTP/1.1 (HttpResponse::stream): chunked parts flushed as they are
// written, HTTP/1.0 bodies ended by the close, HEAD, a client that leaves mid-stream, keep-alive
// after the end, and Stop with a stream in flight.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "harrier/response_stream.h"
#include "harrier/wake_batch.h"
#include "server/http_server.h"
#include "server/raw_http_client.h"

namespace harrier {
namespace {

using std::chrono::milliseconds;
using testing::RawHttpClient;

bool WaitFor(const std::function<bool()>& done, milliseconds timeout = milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return done();
}

// Answers /stream with a streamed 200 whose ResponseStream the test drives; anything else with
// a fixed body. The stream and the request's token are kept for the test.
class StreamingHandler : public HttpHandler {
 public:
  std::mutex mu;
  std::shared_ptr<ResponseStream> stream;
  std::shared_ptr<CancellationToken> token;
  std::atomic<int> streams{0};
  bool answer_inline = true;  // else from another thread

  void Handle(HttpRequest&& request, HttpResponder respond) override {
    if (request.target != "/stream") {
      HttpResponse r;
      r.body = "plain";
      respond(std::move(r));
      return;
    }
    HttpResponse head;
    head.headers.emplace_back("Content-Type", "text/event-stream");
    head.stream = std::make_shared<ResponseStream>();
    {
      std::lock_guard lock(mu);
      stream = head.stream;
      token = request.cancellation;
    }
    ++streams;
    if (answer_inline) {
      respond(std::move(head));
    } else {
      std::thread([respond = std::move(respond), head = std::move(head)]() mutable {
        respond(std::move(head));
      }).detach();
    }
  }

  std::shared_ptr<ResponseStream> Stream() {
    std::lock_guard lock(mu);
    return stream;
  }
};

class HttpStreamingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.address = "127.0.0.1";
    options_.port = 0;
    options_.io_threads = 1;
  }
  void StartServer() {
    auto server = HttpServer::Create(options_, &handler_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    ASSERT_TRUE(server_->Start().ok());
  }

  HttpServer::Options options_;
  StreamingHandler handler_;
  std::unique_ptr<HttpServer> server_;
};

std::string Get(std::string_view target, std::string_view version = "HTTP/1.1") {
  return "GET " + std::string(target) + " " + std::string(version) + "\r\nHost: t\r\n\r\n";
}

TEST_F(HttpStreamingTest, EachPartIsSentAsAChunkWhenWrittenThenTheConnectionGoesOn) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Get("/stream")));
  auto head = c.ReadHead();
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->Header("transfer-encoding"), "chunked");
  EXPECT_EQ(head->Header("content-length"), "");
  EXPECT_EQ(head->Header("content-type"), "text/event-stream");
  auto stream = handler_.Stream();
  ASSERT_TRUE(stream);
  // Each part reaches the client before the next is written: nothing waits for the end.
  for (const std::string part : {"data: one\n\n", "data: two\n\n", "data: three\n\n"}) {
    std::promise<bool> written;
    stream->Write(part, [&](bool ok) { written.set_value(ok); });
    auto chunk = c.ReadChunk();
    ASSERT_TRUE(chunk);
    EXPECT_EQ(*chunk, part);
    EXPECT_TRUE(written.get_future().get());
  }
  EXPECT_EQ(stream->pending_bytes(), 0u);
  stream->Finish();
  auto last = c.ReadChunk();
  ASSERT_TRUE(last);
  EXPECT_EQ(*last, "");
  // Keep-alive: the next request on the same connection.
  ASSERT_TRUE(c.Send(Get("/other")));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "plain");
}

TEST_F(HttpStreamingTest, PartsWrittenBeforeTheHeadIsOutAndFromAnotherThreadArriveInOrder) {
  handler_.answer_inline = false;
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Get("/stream")));
  ASSERT_TRUE(WaitFor([&] { return handler_.Stream() != nullptr; }));
  auto stream = handler_.Stream();
  std::thread producer([stream] {
    for (int i = 0; i < 2000; ++i) stream->Write("event " + std::to_string(i) + "\n", {});
    stream->Finish();
  });
  auto head = c.ReadHead();
  ASSERT_TRUE(head);
  std::string body;
  for (;;) {
    auto chunk = c.ReadChunk();
    ASSERT_TRUE(chunk);
    if (chunk->empty()) break;
    body += *chunk;
  }
  producer.join();
  std::string expected;
  for (int i = 0; i < 2000; ++i) expected += "event " + std::to_string(i) + "\n";
  EXPECT_EQ(body, expected);
}

TEST_F(HttpStreamingTest, PartsWrittenInsideAWakeBatchGoOutTogetherWhenItEnds) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Get("/stream")));
  ASSERT_TRUE(c.ReadHead());
  auto stream = handler_.Stream();
  ASSERT_TRUE(stream);
  // Once the transport waits for the producer, a write would wake it at once. In a batch (as
  // the generation engine writes a decode step's tokens) the wake-up waits for the batch's
  // end, and the transport takes everything written by then in one go: one chunk.
  std::this_thread::sleep_for(milliseconds(50));
  std::thread producer([stream] {
    WakeBatch batch;
    stream->Write("data: a\n\n", {});
    stream->Write("data: b\n\n", {});
    std::this_thread::sleep_for(milliseconds(50));  // the transport is not woken meanwhile
    stream->Write("data: c\n\n", {});
  });
  producer.join();
  auto chunk = c.ReadChunk();
  ASSERT_TRUE(chunk);
  EXPECT_EQ(*chunk, "data: a\n\ndata: b\n\ndata: c\n\n");
  stream->Finish();
  auto last = c.ReadChunk();
  ASSERT_TRUE(last);
  EXPECT_EQ(*last, "");
}

TEST_F(HttpStreamingTest, EmptyPartsAreSkippedNotSentAsTheLastChunk) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Get("/stream")));
  ASSERT_TRUE(c.ReadHead());
  auto stream = handler_.Stream();
  std::promise<bool> empty_written;
  stream->Write("", [&](bool ok) { empty_written.set_value(ok); });
  EXPECT_TRUE(empty_written.get_future().get());
  stream->Write("after", {});
  auto chunk = c.ReadChunk();
  ASSERT_TRUE(chunk);
  EXPECT_EQ(*chunk, "after");
  stream->Finish();
  auto last = c.ReadChunk();
  ASSERT_TRUE(last);
  EXPECT_EQ(*last, "");
}

TEST_F(HttpStreamingTest, Http10BodyIsEndedByTheClose) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Get("/stream", "HTTP/1.0")));
  auto head = c.ReadHead();
  ASSERT_TRUE(head);
  EXPECT_EQ(head->Header("transfer-encoding"), "");
  EXPECT_EQ(head->Header("connection"), "close");
  auto stream = handler_.Stream();
  stream->Write("a", {});
  stream->Write("b", {});
  stream->Finish();
  EXPECT_EQ(c.ReadUntilClose(), "ab");
}

TEST_F(HttpStreamingTest, HeadGetsTheHeadAndTheStreamIsAbandoned) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send("HEAD /stream HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto head = c.ReadHead();
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  auto stream = handler_.Stream();
  EXPECT_TRUE(WaitFor([&] { return stream->abandoned(); }));
  std::promise<bool> written;
  stream->Write("x", [&](bool ok) { written.set_value(ok); });
  EXPECT_FALSE(written.get_future().get());
  // The connection is still usable: the HEAD had no body.
  ASSERT_TRUE(c.Send(Get("/other")));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "plain");
}

TEST_F(HttpStreamingTest, AClientThatLeavesMidStreamCancelsTheRequestAndAbandonsTheStream) {
  StartServer();
  auto c = std::make_unique<RawHttpClient>(server_->port());
  ASSERT_TRUE(c->Send(Get("/stream")));
  ASSERT_TRUE(c->ReadHead());
  auto stream = handler_.Stream();
  stream->Write("first", {});
  ASSERT_TRUE(c->ReadChunk());
  c->Close();  // while the producer is between parts
  std::shared_ptr<CancellationToken> token;
  {
    std::lock_guard lock(handler_.mu);
    token = handler_.token;
  }
  ASSERT_TRUE(token);
  EXPECT_TRUE(WaitFor([&] { return token->cancelled(); }));
  EXPECT_TRUE(stream->abandoned());
  std::promise<bool> written;
  stream->Write("late", [&](bool ok) { written.set_value(ok); });
  EXPECT_FALSE(written.get_future().get());
  EXPECT_EQ(stream->pending_bytes(), 0u);
}

TEST_F(HttpStreamingTest, StopLetsTheStreamFinishThenCloses) {
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Get("/stream")));
  ASSERT_TRUE(c.ReadHead());
  auto stream = handler_.Stream();
  auto stopped = std::async(std::launch::async, [this] { server_->Stop(); });
  EXPECT_EQ(stopped.wait_for(milliseconds(100)), std::future_status::timeout)
      << "Stop must wait for the stream";
  stream->Write("still here", {});
  auto chunk = c.ReadChunk();
  ASSERT_TRUE(chunk);
  EXPECT_EQ(*chunk, "still here");
  stream->Finish();
  auto last = c.ReadChunk();
  ASSERT_TRUE(last);
  EXPECT_EQ(*last, "");
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
  EXPECT_EQ(stopped.wait_for(milliseconds(5000)), std::future_status::ready);
}

TEST_F(HttpStreamingTest, StopGivesUpOnAStreamThatNeverEndsAfterTheShutdownTimeout) {
  options_.shutdown_timeout = milliseconds(200);
  StartServer();
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.Send(Get("/stream")));
  ASSERT_TRUE(c.ReadHead());
  auto stream = handler_.Stream();
  server_->Stop();
  EXPECT_TRUE(stream->abandoned());
  EXPECT_TRUE(c.WaitClosed(milliseconds(5000)));
}

}  // namespace
}  // namespace harrier
