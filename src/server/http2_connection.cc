#include "server/http2_connection.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <cstring>
#include <exception>
#include <type_traits>

#include "server/http_common.h"
#include "server/tcp_progress.h"
#include "server/tls.h"

namespace harrier::server_internal {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// A write batch is cut after this many bytes (control frames, frame headers and body slices).
constexpr std::size_t kWriteBatch = 256 * 1024;
// The most of a claimed content-length reserved up front; a larger body grows as it arrives.
constexpr uint64_t kMaxReserve = 64ull << 20;
// Per-header overhead counted against max_header_bytes, as SETTINGS_MAX_HEADER_LIST_SIZE does.
constexpr std::size_t kHeaderOverhead = 32;
// A response that the client's flow-control window holds back must move this many bytes per
// write timeout (or all it has left), or its stream is reset: 273 bytes/s at the default 30 s,
// about Kestrel's minimum response data rate. A window opened a byte at a time counted as
// progress before, and held 128 responses per connection for good (probe 64).
constexpr uint64_t kWindowProgressBytes = 8 * 1024;

// Headers a handler may set that HTTP/2 forbids or the server owns (RFC 9113 §8.2.2).
bool IsDroppedHeader(std::string_view name) {
  return IEquals(name, "content-length") || IEquals(name, "transfer-encoding") ||
         IEquals(name, "connection") || IEquals(name, "keep-alive") ||
         IEquals(name, "proxy-connection") || IEquals(name, "upgrade");
}

// HTTP/2 header names are lower case.
HttpResponse ErrorResponse(int status, std::string_view message) {
  return JsonErrorResponse(status, message, "content-type");
}

template <class Stream>
auto& Lowest(Stream& s) {
  return s.lowest_layer();
}

}  // namespace

template <class Stream>
struct Http2Connection<Stream>::StreamState {
  explicit StreamState(IncomingBodies* budget) : incoming(budget) {}

  HttpRequest request;
  std::string body;
  std::size_t header_bytes = 0;
  bool header_too_large = false;
  bool head_request = false;
  bool request_complete = false;        // END_STREAM received
  bool headers_done = false;            // the whole header block arrived
  Clock::time_point last_body_bytes{};  // headers_done or the latest DATA: the body timeout's start
  Clock::time_point begun_at{};         // its HEADERS frame: the header timeout's start
  bool refused = false;  // answered early: DATA is dropped, RST_STREAM after the reply
  bool dispatched = false;
  bool responded = false;
  std::shared_ptr<CancellationToken> cancellation;
  HttpResponse response;
  std::size_t sent = 0;  // of response.body
  std::string status;    // ":status" value

  // Streamed (HttpHandler::OpenStream): body bytes go to `handler` as they arrive; the response
  // body is written from `parts` as the writer queues them, then `trailers` end the stream.
  std::shared_ptr<HttpStreamHandler> handler;
  std::deque<std::unique_ptr<Part>> parts;
  std::size_t part_sent = 0;  // of parts.front()
  bool finish_queued = false;
  bool stream_cancelled = false;  // handler->OnCancel() was called
  bool data_deferred = false;     // nghttp2 waits for nghttp2_session_resume_data
  std::size_t unconsumed = 0;     // body bytes given to `handler` and not yet Consumed()
  std::size_t held_body = 0;      // of `body`, counted in the connection's held_bodies_
  IncomingBodyCharge incoming;    // held_body's share of the server-wide budget
  std::size_t deferred_window = 0;              // its window bytes not given back yet (HoldBody)
  std::shared_ptr<ResponseStream> body_stream;  // HttpResponse::stream, while it is sent
  // A stall by the client's flow-control window, seen by the connection's tick (no clock read
  // per frame): DATA bytes sent for the response, their count when the wait began, and since
  // when its bytes have waited without kWindowProgressBytes sent.
  uint64_t data_bytes = 0;
  uint64_t data_bytes_seen = 0;
  Clock::time_point waiting_since{};
};

// The stream handler of a response whose body is a ResponseStream: the request was read whole,
// so only the end matters (a reset, a lost connection): the producer is told to stop.
class ResponseStreamHandler final : public HttpStreamHandler {
 public:
  ResponseStreamHandler(std::shared_ptr<ResponseStream> stream,
                        std::shared_ptr<CancellationToken> cancellation)
      : stream_(std::move(stream)), cancellation_(std::move(cancellation)) {}
  void OnBody(std::string_view) override {}
  void OnBodyEnd() override {}
  void OnCancel() override {
    stream_->Abandon();
    if (cancellation_) cancellation_->Cancel();
  }

 private:
  const std::shared_ptr<ResponseStream> stream_;
  const std::shared_ptr<CancellationToken> cancellation_;
};

template <class Stream>
class Http2Connection<Stream>::StreamWriter final : public HttpStreamWriter {
 public:
  StreamWriter(std::weak_ptr<Http2Connection> connection, std::shared_ptr<IoThread> io, int32_t id)
      : connection_(std::move(connection)), io_(std::move(io)), id_(id) {}

  // All three go through the thread's coalesced queue, in the order they are called: a
  // generation's decoupled responses (one per token) wake the thread once per decode step.
  void Write(std::string bytes, std::function<void(bool)> on_written) override {
    auto part = std::make_shared<Part>(Part{std::move(bytes), std::move(on_written)});
    io_->PostCoalesced([c = connection_, id = id_, part = std::move(part)] {
      if (auto conn = c.lock()) {
        conn->OnStreamWrite(id, std::make_unique<Part>(std::move(*part)));
      } else if (part->on_written) {
        part->on_written(false);
      }
    });
  }
  void Finish(std::vector<std::pair<std::string, std::string>> trailers) override {
    auto moved = std::make_shared<std::vector<std::pair<std::string, std::string>>>(
        std::move(trailers));
    io_->PostCoalesced([c = connection_, id = id_, moved] {
      if (auto conn = c.lock()) conn->OnStreamFinish(id, std::move(*moved));
    });
  }
  void Consumed(std::size_t bytes) override {
    io_->PostCoalesced([c = connection_, id = id_, bytes] {
      if (auto conn = c.lock()) conn->OnStreamConsumed(id, bytes);
    });
  }

 private:
  const std::weak_ptr<Http2Connection> connection_;
  const std::shared_ptr<IoThread> io_;
  const int32_t id_;
};

template <class Stream>
Http2Connection<Stream>::Http2Connection(Stream stream, IoThread* io, ServerShared* shared)
    : io_(io), shared_(shared), stream_(std::move(stream)), timer_(io->ioc.get_executor()) {}

template <class Stream>
Http2Connection<Stream>::~Http2Connection() {
  if (session_ != nullptr) nghttp2_session_del(session_);
}

template <class Stream>
bool Http2Connection<Stream>::InitSession() {
  nghttp2_session_callbacks* cbs = nullptr;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, &OnBeginHeadersCb);
  nghttp2_session_callbacks_set_on_header_callback(cbs, &OnHeaderCb);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &OnFrameRecvCb);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &OnDataChunkCb);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &OnStreamCloseCb);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, &OnFrameSendCb);
  nghttp2_session_callbacks_set_send_callback(cbs, &SendCb);
  nghttp2_session_callbacks_set_send_data_callback(cbs, &SendDataCb);
  nghttp2_option* opt = nullptr;
  nghttp2_option_new(&opt);
  // Our own limit on the header list is checked in OnHeaderCb (answered with 431); nghttp2's
  // HPACK decoder still bounds a single field.
  nghttp2_option_set_max_settings(opt, 32);
  // Body bytes are consumed (the window reopened) by us: at once for whole requests, when the
  // handler says so for streamed ones, so that a stream that is not being read holds its
  // client back instead of filling memory.
  nghttp2_option_set_no_auto_window_update(opt, 1);
  const int rv = nghttp2_session_server_new2(&session_, cbs, this, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  if (rv != 0) {
    session_ = nullptr;
    return false;
  }
  const auto& o = shared_->options;
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, o.http2_max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, o.http2_initial_window_bytes},
      {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, o.http2_max_frame_bytes},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, o.max_header_bytes},
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
  };
  if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings,
                              sizeof(settings) / sizeof(settings[0])) != 0)
    return false;
  // The connection window (validated by HttpServer::Create: 65535..2^31-1).
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                        static_cast<int32_t>(o.http2_connection_window_bytes));
  return true;
}

template <class Stream>
void Http2Connection<Stream>::Register() {
  registry_pos_ = io_->connections.insert(io_->connections.end(), this->shared_from_this());
  registered_ = true;
  shared_->live_connections.fetch_add(1);
  last_read_ = idle_since_ = Clock::now();
  ArmTick();
}

template <class Stream>
void Http2Connection<Stream>::Start(std::string_view preread) {
  if (shared_->stopping.load(std::memory_order_relaxed) || !InitSession()) {
    Register();
    Close();
    return;
  }
  Register();
  if (!preread.empty() && !Feed(reinterpret_cast<const uint8_t*>(preread.data()), preread.size())) {
    return;
  }
  ReadMore();
  Flush();
}

template <class Stream>
bool Http2Connection<Stream>::StartUpgraded(std::string_view settings, HttpRequest request,
                                            bool head_request, std::string_view preread) {
  if (!InitSession()) return false;
  auto s = std::make_unique<StreamState>(shared_->options.incoming_bodies.get());
  StreamState* raw = s.get();
  if (nghttp2_session_upgrade2(session_, reinterpret_cast<const uint8_t*>(settings.data()),
                               settings.size(), head_request ? 1 : 0, raw) != 0) {
    return false;
  }
  raw->request = std::move(request);
  raw->request.version = HttpVersion::kHttp2;  // answered over HTTP/2 (its times are HTTP/1.1's)
  raw->head_request = head_request;
  raw->request_complete = true;
  streams_.emplace(1, std::move(s));
  prefix_ = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n";
  Register();
  if (shared_->stopping.load(std::memory_order_relaxed)) OnServerStopping();
  Dispatch(1, raw);
  if (closed_) return true;
  if (!preread.empty() && !Feed(reinterpret_cast<const uint8_t*>(preread.data()), preread.size())) {
    return true;
  }
  ReadMore();
  Flush();
  return true;
}

template <class Stream>
void Http2Connection<Stream>::OnServerStopping() {
  if (closed_ || stopping_) return;
  stopping_ = true;
  // GOAWAY names the last stream we will process; those in flight finish, then want_read and
  // want_write both turn false and Flush() closes the connection.
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
  Flush();
}

template <class Stream>
void Http2Connection<Stream>::Close() {
  if (closed_) return;
  auto self = this->shared_from_this();  // the registry may hold the last reference
  closed_ = true;
  for (auto& [id, s] : streams_) {
    if (s->dispatched && !s->responded && s->cancellation) s->cancellation->Cancel();
    CancelStream(s.get());
    ReportSent(&s->response, false, {});
  }
  for (auto& s : retired_) ReportSent(&s->response, false, {});
  for (auto& on_sent : sent_pending_) ReportSent(&on_sent, false, {});
  sent_pending_.clear();
  for (auto& part : parts_pending_)
    if (part->on_written) part->on_written(false);
  parts_pending_.clear();
  timer_.cancel();
  error_code ignored;
  Lowest(stream_).shutdown(asio::socket_base::shutdown_both, ignored);
  Lowest(stream_).close(ignored);
  if (registered_) {
    registered_ = false;
    io_->connections.erase(registry_pos_);
    shared_->OnConnectionClosed();
  }
}

// Ends the connection on the server's initiative, once what had to be said (GOAWAY) is written:
// for TLS, close_notify first, then the close when the client answers it or after
// kTlsCloseNotifyWait; for TCP, at once, except after an error GOAWAY (the client may be in the
// middle of sending), when the send side is shut and the client's input drained until it
// closes or linger_timeout passes (the tick checks both bounds). Never blocks. The shutdown
// waits for a write in flight to finish (OnWrite starts it): Asio's SSL stream loses the
// close_notify it produces while another operation's write is pending, and a TCP write would
// fail. Nothing is written after it.
template <class Stream>
void Http2Connection<Stream>::CloseGracefully() {
  if (closed_ || closing_) return;
  closing_ = true;
  close_started_ = Clock::now();
  if (!writing_) StartClose();
}

template <class Stream>
void Http2Connection<Stream>::StartClose() {
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    stream_.async_shutdown([self = this->shared_from_this()](const error_code&) { self->Close(); });
  } else {
    if (!linger_on_close_) {
      Close();
      return;
    }
    error_code ignored;
    stream_.shutdown(asio::socket_base::shutdown_send, ignored);
    if (!read_pending_) ReadMore();  // OnRead drains until the client closes
  }
}

// ---- Reading -------------------------------------------------------------------------------

template <class Stream>
void Http2Connection<Stream>::ReadMore() {
  read_pending_ = true;
  stream_.async_read_some(asio::buffer(rbuf_),
                          [self = this->shared_from_this()](const error_code& ec, std::size_t n) {
                            self->OnRead(ec, n);
                          });
}

template <class Stream>
void Http2Connection<Stream>::OnRead(const error_code& ec, std::size_t n) {
  read_pending_ = false;
  if (closed_) return;
  if (closing_) {  // what comes now is thrown away; TCP drains until the client closes
    if (ec) {
      Close();
    } else if constexpr (!std::is_same_v<Stream, TlsStream>) {
      ReadMore();
    }
    return;
  }
  if (ec) {
    if (ec != asio::error::eof && ec != asio::error::connection_reset)
      spdlog::debug("http2: read failed: {}", ec.message());
    Close();  // cancels every request still open
    return;
  }
  last_read_ = Clock::now();
  if (!Feed(rbuf_.data(), n)) return;
  if (nghttp2_session_want_read(session_)) ReadMore();
  Flush();
}

// False when the connection is finished (closed, or closing once its GOAWAY is written).
template <class Stream>
bool Http2Connection<Stream>::Feed(const uint8_t* data, std::size_t n) {
  in_recv_ = true;
  const ssize_t rv = nghttp2_session_mem_recv(session_, data, n);
  in_recv_ = false;
  if (closed_) return false;
  if (rv < 0) {
    spdlog::debug("http2: closing connection: {}", nghttp2_strerror(static_cast<int>(rv)));
    if (rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC) {  // not HTTP/2 at all: no GOAWAY to send
      CloseGracefully();
      return false;
    }
    // nghttp2 queued a GOAWAY for protocol errors it detected; send what is queued, then close,
    // draining what the client still sends so that it gets to read the GOAWAY.
    nghttp2_session_terminate_session(session_, NGHTTP2_PROTOCOL_ERROR);
    linger_on_close_ = true;
    Flush();
    return false;
  }
  return true;
}

// ---- Writing -------------------------------------------------------------------------------

template <class Stream>
ssize_t Http2Connection<Stream>::SendCb(nghttp2_session*, const uint8_t* data, size_t length, int,
                                        void* user) {
  auto* c = static_cast<Http2Connection*>(user);
  if (c->batch_bytes_ >= kWriteBatch) return NGHTTP2_ERR_WOULDBLOCK;
  if (!c->segments_.empty() && c->segments_.back().ptr == nullptr) {
    c->segments_.back().size += length;  // extends the previous owned run
  } else {
    c->segments_.push_back({nullptr, c->owned_.size(), length});
  }
  c->owned_.append(reinterpret_cast<const char*>(data), length);
  c->batch_bytes_ += length;
  return static_cast<ssize_t>(length);
}

template <class Stream>
int Http2Connection<Stream>::SendDataCb(nghttp2_session*, nghttp2_frame* frame,
                                        const uint8_t* framehd, size_t length,
                                        nghttp2_data_source* source, void* user) {
  auto* c = static_cast<Http2Connection*>(user);
  if (c->batch_bytes_ >= kWriteBatch) return NGHTTP2_ERR_WOULDBLOCK;
  auto* s = static_cast<StreamState*>(source->ptr);
  s->data_bytes += length;
  c->data_bytes_ += length;
  SendCb(nullptr, framehd, 9, 0, user);
  // We never ask for padding, so padlen is 0.
  (void)frame;
  if (s->handler) {
    if (length > 0) {
      Part& part = *s->parts.front();
      c->segments_.push_back(
          {reinterpret_cast<const uint8_t*>(part.bytes.data()) + s->part_sent, 0, length});
      s->part_sent += length;
      c->batch_bytes_ += length;
    }
    // A part whose last byte is in this batch waits there (its bytes are being written).
    if (!s->parts.empty() && s->part_sent == s->parts.front()->bytes.size()) {
      c->parts_pending_.push_back(std::move(s->parts.front()));
      s->parts.pop_front();
      s->part_sent = 0;
    }
    return 0;
  }
  c->segments_.push_back(
      {reinterpret_cast<const uint8_t*>(s->response.body.data()) + s->sent, 0, length});
  s->sent += length;
  c->batch_bytes_ += length;
  return 0;
}

template <class Stream>
ssize_t Http2Connection<Stream>::ReadBodyCb(nghttp2_session* session, int32_t stream_id, uint8_t*,
                                            size_t length, uint32_t* flags,
                                            nghttp2_data_source* source, void*) {
  auto* s = static_cast<StreamState*>(source->ptr);
  std::size_t left = 0;
  if (s->handler) {
    if (s->parts.empty()) {
      if (!s->finish_queued) {
        s->data_deferred = true;  // OnStreamWrite / OnStreamFinish resume it
        return NGHTTP2_ERR_DEFERRED;
      }
    } else {
      left = s->parts.front()->bytes.size() - s->part_sent;
    }
  } else {
    left = s->response.body.size() - s->sent;
  }
  // How much the next DATA frame carries; SendDataCb copies nothing but its 9-byte header.
  const std::size_t n = std::min(left, length);
  *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
  const bool last = s->handler ? s->finish_queued && n == left && s->parts.size() <= 1 : n == left;
  if (last) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (!s->response.trailers.empty()) {
      // The trailers carry END_STREAM; nghttp2 copies the fields.
      std::vector<nghttp2_nv> nva;
      nva.reserve(s->response.trailers.size());
      for (const auto& [name, value] : s->response.trailers) {
        nva.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                       reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                       value.size(), NGHTTP2_NV_FLAG_NONE});
      }
      if (nghttp2_submit_trailer(session, stream_id, nva.data(), nva.size()) == 0)
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
  }
  // `sent` advances in SendDataCb; nghttp2 asks again only after that frame is out.
  return static_cast<ssize_t>(n);
}

template <class Stream>
void Http2Connection<Stream>::Flush() {
  if (writing_ || closed_ || in_recv_ || closing_) return;
  owned_.clear();
  segments_.clear();
  batch_bytes_ = 0;
  if (!prefix_.empty()) {
    SendCb(nullptr, reinterpret_cast<const uint8_t*>(prefix_.data()), prefix_.size(), 0, this);
    prefix_.clear();
  }
  const int rv = nghttp2_session_send(session_);
  if (rv != 0) {
    spdlog::debug("http2: send failed: {}", nghttp2_strerror(rv));
    Close();
    return;
  }
  if (segments_.empty()) {
    retired_.clear();
    if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) {
      // GOAWAY sent and every stream finished, or the session failed.
      CloseGracefully();
    }
    return;
  }
  gather_.clear();
  for (const Segment& seg : segments_) {
    const void* p = seg.ptr != nullptr
                        ? static_cast<const void*>(seg.ptr)
                        : static_cast<const void*>(owned_.data() + seg.offset_or_zero);
    gather_.emplace_back(p, seg.size);
  }
  writing_ = true;
  write_started_ = Clock::now();
  asio::async_write(
      stream_, gather_,
      [self = this->shared_from_this()](const error_code& ec, std::size_t) { self->OnWrite(ec); });
}

template <class Stream>
void Http2Connection<Stream>::OnWrite(const error_code& ec) {
  writing_ = false;
  if (closed_) return;
  if (ec) {
    spdlog::debug("http2: write failed (client gone?): {}", ec.message());
    Close();
    return;
  }
  retired_.clear();  // the bodies of streams closed in that batch are out
  if (!parts_pending_.empty()) {
    auto done = std::move(parts_pending_);
    parts_pending_.clear();
    for (auto& part : done)
      if (part->on_written) part->on_written(true);
    if (closed_) return;
  }
  if (!sent_pending_.empty()) {
    const auto now = Clock::now();
    for (auto& on_sent : sent_pending_) ReportSent(&on_sent, true, now);
    sent_pending_.clear();
    if (closed_) return;  // defensive: a callback cannot reach this connection, but be safe
  }
  if (closing_) {  // CloseGracefully() waited for this write
    StartClose();
    return;
  }
  Flush();
}

// ---- Timeouts ------------------------------------------------------------------------------

// One coarse tick per connection (a quarter of the shortest timeout, 10 ms to 1 s) instead of
// a timer per stream: off the request path, and HTTP/2 connections are few and long-lived.
template <class Stream>
void Http2Connection<Stream>::ArmTick() {
  const auto& o = shared_->options;
  auto period =
      std::min({o.keepalive_timeout, o.header_timeout, o.body_timeout, o.write_timeout}) / 4;
  period = std::clamp(period, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  timer_.expires_after(period);
  timer_.async_wait([self = this->shared_from_this()](const error_code& ec) { self->OnTick(ec); });
}

template <class Stream>
void Http2Connection<Stream>::OnTick(const error_code& ec) {
  if (ec || closed_) return;
  const auto now = Clock::now();
  const auto& o = shared_->options;
  if (writing_) {
    // A write that has not completed: progress is the peer acknowledging bytes since the last
    // tick (tcp_progress.h). A client that reads slowly but steadily is not cut off for the
    // kernel's late wake-up of a blocked writer; one that reads nothing is, after the timeout.
    if (const std::optional<uint64_t> acked = BytesAcked(Lowest(stream_).native_handle());
        acked && *acked != acked_seen_) {
      acked_seen_ = *acked;
      write_started_ = now;
    }
    if (now - write_started_ > o.write_timeout) {
      spdlog::debug("http2: closing connection: write timeout");
      Close();
      return;
    }
  }
  if (closing_) {  // close_notify or the drain is under way: only its bound matters now
    const auto bound =
        std::is_same_v<Stream, TlsStream>
            ? std::min<std::chrono::milliseconds>(o.linger_timeout, kTlsCloseNotifyWait)
            : o.linger_timeout;
    if (now - close_started_ > bound) {
      Close();  // the client never answered the close_notify, or never closed
      return;
    }
    ArmTick();
    return;
  }
  // A stream whose body stalls is answered 408 on its own; the connection's other streams go
  // on (as HTTP/1.1 answers 408, but without closing the connection).
  // A header block left unfinished (HEADERS without its CONTINUATION) cannot be answered on its
  // stream: the connection is closed, as HTTP/1.1 closes after a 408 for a stalled header.
  bool stalled = false;
  if (held_streams_ > 0) ResumeHeldStreams();  // a safety net: ReleaseBody resumes them
  // The connection's own progress, for the streams that only its window holds back.
  if (data_bytes_ - data_bytes_seen_ >= kWindowProgressBytes) {
    data_bytes_seen_ = data_bytes_;
    data_progress_at_ = now;
  }
  for (auto& [id, s] : streams_) {
    // A response that the client's flow-control window holds back (it sends no WINDOW_UPDATE)
    // is no socket write that stalls: without this, it held its stream, what was queued for it
    // and a generation for nobody as long as the connection lived (probe 31). Reset, and its
    // producer told, after the write timeout; the connection's other streams go on.
    // Only a closed window counts: a stream starved behind others on a slow connection, whose
    // client does open its window, is the write timeout's to judge (probe 33).
    // A stream whose own window is open waits on the connection's, which its client opens for
    // every stream: it moves when the connection does (probe 69: 16 streams of a client
    // reading a steady 2 KiB/s each got less than 8 KiB in 30 s, and were reset).
    const bool own_window_open = nghttp2_session_get_stream_remote_window_size(session_, id) > 0;
    const bool data_waits =
        s->responded && (s->handler ? !s->parts.empty() : s->sent < s->response.body.size()) &&
        (!own_window_open || nghttp2_session_get_remote_window_size(session_) <= 0);
    const bool moved = s->data_bytes - s->data_bytes_seen >= kWindowProgressBytes ||
                       (own_window_open && data_progress_at_ > s->waiting_since);
    // While a socket write is under way no frame is made: the write timeout judges that.
    if (!data_waits || writing_ || moved || s->waiting_since == Clock::time_point{}) {
      s->data_bytes_seen = s->data_bytes;
      s->waiting_since = now;  // nothing waits, or it moved enough since the wait began
    } else if (!s->stream_cancelled && now - s->waiting_since > o.write_timeout) {
      spdlog::debug(
          "http2: stream {}: the client's window held the response back (less than {} bytes "
          "sent) for the write timeout; resetting it",
          id, kWindowProgressBytes);
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
      CancelStream(s.get());
      s->stream_cancelled = true;  // a plain response has no handler: not again on every tick
      stalled = true;
      continue;
    }
    if (!s->headers_done) {
      if (now - s->begun_at <= o.header_timeout) continue;
      spdlog::debug("http2: closing connection: stream {}'s header block stalled", id);
      CloseGracefully();
      if (!closed_) ArmTick();  // bounds the close_notify
      return;
    }
    // A streamed request's body comes when its client has something to say (a gRPC stream
    // may sit idle between messages): no body timeout then, but inside a message, as for any
    // body (HttpStreamHandler::InsideMessage).
    // Between messages, or while the handler holds the client back, the wait is not the
    // client's: the timeout counts from when that ends (probe 66).
    if (s->handler && !s->request_complete && !s->stream_cancelled && !s->finish_queued &&
        !s->handler->InsideMessage()) {
      s->last_body_bytes = now;
    }
    if (s->handler && !s->request_complete && !s->stream_cancelled && !s->finish_queued &&
        s->handler->InsideMessage() && now - s->last_body_bytes > o.body_timeout) {
      spdlog::debug("http2: stream {}: a message stalled for the body timeout; resetting it", id);
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
      CancelStream(s.get());
      s->stream_cancelled = true;
      stalled = true;
      continue;
    }
    if (s->request_complete || s->refused || s->handler) continue;
    // A stream the connection holds back (HoldBody) waits for the server, not the client.
    if (s->deferred_window > 0) s->last_body_bytes = now;
    if (now - s->last_body_bytes > o.body_timeout) {
      spdlog::debug("http2: stream {}: the request body stalled for the body timeout", id);
      RefuseWithError(id, s.get(), 408, "the request body stalled for longer than the body timeout",
                      s->body.size());
      stalled = true;
    }
  }
  if (stalled) {
    Flush();
    if (closed_) return;
  }
  if (!streams_.empty() || writing_) {
    idle_since_ = now;
  } else if (now - idle_since_ > (any_stream_ ? o.keepalive_timeout : o.header_timeout) &&
             !stopping_) {
    // A connection that has not begun a request gets the header timeout, as over HTTP/1.1: a
    // preface and then silence is cut off as fast as half a header.
    spdlog::debug("http2: idle timeout: GOAWAY");
    OnServerStopping();  // GOAWAY; closes once written
    if (closed_) return;
  } else if (stopping_ && now - idle_since_ > o.keepalive_timeout + o.linger_timeout) {
    Close();  // the client never read our GOAWAY
    return;
  }
  ArmTick();
}

// ---- Streams -------------------------------------------------------------------------------

template <class Stream>
typename Http2Connection<Stream>::StreamState* Http2Connection<Stream>::Find(int32_t stream_id) {
  auto it = streams_.find(stream_id);
  return it == streams_.end() ? nullptr : it->second.get();
}

template <class Stream>
int Http2Connection<Stream>::OnBeginHeadersCb(nghttp2_session*, const nghttp2_frame* frame,
                                              void* user) {
  auto* c = static_cast<Http2Connection*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  auto s = std::make_unique<StreamState>(c->shared_->options.incoming_bodies.get());
  s->request.headers.reserve(8);
  s->begun_at = c->last_read_;
  c->streams_[frame->hd.stream_id] = std::move(s);
  c->any_stream_ = true;
  return 0;
}

template <class Stream>
int Http2Connection<Stream>::OnHeaderCb(nghttp2_session*, const nghttp2_frame* frame,
                                        const uint8_t* name, size_t namelen, const uint8_t* value,
                                        size_t valuelen, uint8_t, void* user) {
  auto* c = static_cast<Http2Connection*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  StreamState* s = c->Find(frame->hd.stream_id);
  if (s == nullptr) return 0;
  s->header_bytes += namelen + valuelen + kHeaderOverhead;
  if (s->header_bytes > c->shared_->options.max_header_bytes) {
    s->header_too_large = true;  // answered with 431 once the block is complete
    // An over-long :path still names the request, as far as the limit: the 431 takes the shape
    // of the API it was for (an OpenAI error under /v1/), and the access log says where it went.
    if (s->request.target.empty() &&
        std::string_view(reinterpret_cast<const char*>(name), namelen) == ":path") {
      s->request.target.assign(
          reinterpret_cast<const char*>(value),
          std::min<std::size_t>(valuelen, c->shared_->options.max_header_bytes));
    }
    return 0;
  }
  const std::string_view n(reinterpret_cast<const char*>(name), namelen);
  const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
  if (!n.empty() && n[0] == ':') {
    if (n == ":method") {
      s->request.method.assign(v);
    } else if (n == ":path") {
      s->request.target.assign(v);
    } else if (n == ":authority") {
      s->request.headers.emplace_back("host", std::string(v));
    }
    return 0;
  }
  // nghttp2 has already refused upper-case and connection-specific header names.
  s->request.headers.emplace_back(std::string(n), std::string(v));
  return 0;
}

template <class Stream>
int Http2Connection<Stream>::OnFrameRecvCb(nghttp2_session*, const nghttp2_frame* frame,
                                           void* user) {
  auto* c = static_cast<Http2Connection*>(user);
  if (frame->hd.type == NGHTTP2_SETTINGS && (frame->hd.flags & NGHTTP2_FLAG_ACK) == 0) {
    // nghttp2 ends a flood of them only when its queue of ACKs to send passes 1,000, which a
    // peer that reads them never lets happen: counted here, whatever the peer reads.
    const Clock::time_point now = c->last_read_;
    if (now - c->settings_window_start_ > kSettingsWindow) {
      c->settings_window_start_ = now;
      c->settings_frames_ = 0;
    }
    if (++c->settings_frames_ > kMaxSettingsFrames) {
      spdlog::debug("http2: more than {} SETTINGS frames in {} s; closing the connection",
                    kMaxSettingsFrames, kSettingsWindow.count());
      nghttp2_session_terminate_session(c->session_, NGHTTP2_ENHANCE_YOUR_CALM);
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
  }
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
  const int32_t id = frame->hd.stream_id;
  StreamState* s = c->Find(id);
  if (s == nullptr) return 0;
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    s->headers_done = true;
    s->last_body_bytes = Clock::now();
    // The header block (HEADERS + CONTINUATION) ended in the bytes read at last_read_.
    s->request.received_at = c->last_read_;
    s->request.version = HttpVersion::kHttp2;
    s->request.tls_version = TlsVersionOf(c->stream_);
    c->OnRequestHeaders(id, s);
  }
  if (c->closed_) return 0;
  if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
    c->OnRequestComplete(id, s);
  } else if (frame->hd.type == NGHTTP2_DATA && !s->handler && !s->refused && !s->dispatched &&
             !s->incoming.GrowTo(s->held_body)) {
    // A body still arriving after this frame is charged to the server-wide budget; one that
    // ends with it never is (probe 75: charging each frame as it came refused small whole
    // bodies over HTTP/2, and so every unary gRPC call, while a slow upload held the budget).
    c->Refuse(
        id, s,
        IncomingBodiesRefusal(*c->shared_->options.incoming_bodies, "content-type", s->request,
                              s->body.size(), c->shared_->options.access_log, c->shared_->handler));
    LogIncomingRefusal(*c->shared_);
  }
  return 0;
}

template <class Stream>
void Http2Connection<Stream>::OnRequestHeaders(int32_t id, StreamState* s) {
  const auto& o = shared_->options;
  s->head_request = s->request.method == "HEAD";
  // A client that leaves its answers unread makes the connection hold no more of them (probe
  // 64: 128 streams' responses): past --max-body-bytes of responses made and not yet sent, a
  // new stream is answered 503 unprocessed.
  if (streams_.size() > 1 && UnsentResponseBytes() > o.max_body_bytes) {
    Refuse(id, s, UnreadResponsesRefusal(s));
    return;
  }
  if (s->header_too_large) {
    RefuseWithError(id, s, 431,
                    "request header list is larger than the server's limit of " +
                        std::to_string(o.max_header_bytes) + " bytes",
                    0);
    return;
  }
  uint64_t claimed = 0;
  if (auto cl = s->request.Header("content-length"); !cl.empty()) {
    std::from_chars(cl.data(), cl.data() + cl.size(), claimed);
    if (claimed > o.max_body_bytes) {
      RefuseWithError(id, s, 413,
                      "Request JSON size exceeds the maximum allowed value of " +
                          std::to_string(o.max_body_bytes) +
                          " bytes. Use --http-max-input-size to increase the limit",
                      0);
      return;
    }
  }
  std::optional<HttpResponse> early;
  try {
    early = shared_->handler->Precheck(s->request);
  } catch (const std::exception& e) {
    spdlog::error("http2: Precheck threw: {}; handling the request normally", e.what());
  }
  if (early) {
    Refuse(id, s, std::move(*early));
    return;
  }
  if (OpenStream(id, s)) return;
  if (claimed > 0)
    s->body.reserve(static_cast<std::size_t>(std::min(claimed, kMaxReserve)) + kBodyPadding);
}

template <class Stream>
int Http2Connection<Stream>::OnDataChunkCb(nghttp2_session*, uint8_t, int32_t stream_id,
                                           const uint8_t* data, size_t len, void* user) {
  auto* c = static_cast<Http2Connection*>(user);
  StreamState* s = c->Find(stream_id);
  if (s != nullptr && s->handler) {
    if (s->stream_cancelled || s->finish_queued) {
      nghttp2_session_consume(c->session_, stream_id, len);  // nobody reads it any more
      return 0;
    }
    s->unconsumed += len;  // reopened when the handler says it has dealt with the bytes
    s->last_body_bytes = c->last_read_;
    s->handler->OnBody(std::string_view(reinterpret_cast<const char*>(data), len));
    // What the handler still holds of an unfinished message counts against the server-wide
    // budget, as a whole request's body does; past it the stream is reset.
    if (!s->stream_cancelled && !s->finish_queued &&
        !s->incoming.Set(s->handler->PartialMessageBytes())) {
      c->ResetOverBudget(stream_id, s);
    }
    return 0;
  }
  // A whole request: the connection's window reopens as it arrives; its stream's too, while
  // the connection's held bodies are within bounds (HoldBody; the body limit bounds each).
  nghttp2_session_consume_connection(c->session_, len);
  const uint64_t limit = c->shared_->options.max_body_bytes;
  const bool too_large = s != nullptr && !s->refused && s->body.size() + len > limit;
  if (s == nullptr || s->refused || too_large) {
    nghttp2_session_consume_stream(c->session_, stream_id, len);  // dropped
  }
  if (s == nullptr || s->refused) return 0;
  if (too_large) {
    c->RefuseWithError(stream_id, s, 413,
                       "Request JSON size exceeds the maximum allowed value of " +
                           std::to_string(limit) +
                           " bytes. Use --http-max-input-size to increase the limit",
                       s->body.size() + len);
    return 0;
  }
  s->body.append(reinterpret_cast<const char*>(data), len);
  s->last_body_bytes = c->last_read_;
  c->HoldBody(stream_id, s, len);
  return 0;
}

template <class Stream>
int32_t Http2Connection<Stream>::OldestBodyStream() const {
  // A stream that has sent nothing holds nothing, and needs no window back to start: the
  // oldest that holds bytes is the one to finish (probe 66: an empty oldest stream that ended
  // left the others waiting for good).
  int32_t oldest = 0;
  for (const auto& [id, s] : streams_) {
    const bool sending =
        s->held_body > 0 && !s->request_complete && !s->refused && !s->dispatched && !s->handler;
    if (sending && (oldest == 0 || id < oldest)) oldest = id;
  }
  return oldest;
}

template <class Stream>
void Http2Connection<Stream>::HoldBody(int32_t id, StreamState* s, std::size_t bytes) {
  held_bodies_ += bytes;
  s->held_body += bytes;
  if (held_bodies_ <= shared_->options.max_body_bytes || id == OldestBodyStream()) {
    nghttp2_session_consume_stream(session_, id, bytes + s->deferred_window);
    if (s->deferred_window > 0) --held_streams_;
    s->deferred_window = 0;
  } else {
    if (s->deferred_window == 0) ++held_streams_;
    s->deferred_window += bytes;
  }
}

template <class Stream>
void Http2Connection<Stream>::ReleaseBody(StreamState* s) {
  held_bodies_ -= s->held_body;
  s->held_body = 0;
  s->incoming.Clear();
  if (s->deferred_window > 0) {  // it sends no more: its window does not matter now
    s->deferred_window = 0;
    --held_streams_;
  }
  if (held_streams_ > 0) ResumeHeldStreams();
}

template <class Stream>
void Http2Connection<Stream>::ResumeHeldStreams() {
  const int32_t oldest = OldestBodyStream();
  for (auto& [id, other] : streams_) {
    if (other->deferred_window == 0) continue;
    if (held_bodies_ <= shared_->options.max_body_bytes || id == oldest) {
      nghttp2_session_consume_stream(session_, id, other->deferred_window);
      other->deferred_window = 0;
      --held_streams_;
    }
  }
}

template <class Stream>
void Http2Connection<Stream>::OnRequestComplete(int32_t id, StreamState* s) {
  s->request_complete = true;
  // END_STREAM on HEADERS (no body) or on the last DATA frame: read at last_read_.
  s->request.body_received_at = last_read_;
  if (s->handler) {
    s->incoming.Clear();  // nothing more arrives
    if (!s->stream_cancelled && !s->finish_queued) s->handler->OnBodyEnd();
    return;
  }
  if (s->refused || s->dispatched) return;
  Dispatch(id, s);
}

template <class Stream>
std::size_t Http2Connection<Stream>::UnsentResponseBytes() const {
  std::size_t total = 0;
  for (const auto& [id, s] : streams_) {
    std::size_t parts = 0;
    for (const auto& part : s->parts) parts += part->bytes.size();
    total += parts - std::min(parts, s->part_sent);
    if (s->responded && !s->handler)
      total += s->response.body.size() - std::min(s->sent, s->response.body.size());
  }
  return total;
}

// Answers a stream without handing it to Handle(): the response, then (if the client is still
// sending) RST_STREAM(NO_ERROR) from OnFrameSendCb once the response's last frame is out.
template <class Stream>
void Http2Connection<Stream>::Refuse(int32_t id, StreamState* s, HttpResponse response) {
  s->refused = true;
  s->body = std::string();
  ReleaseBody(s);
  SubmitResponse(id, s, std::move(response));
}

template <class Stream>
void Http2Connection<Stream>::RefuseWithError(int32_t id, StreamState* s, int status,
                                              std::string_view message, uint64_t request_bytes) {
  Refuse(id, s,
         TransportErrorResponse(status, message, "content-type", s->request, request_bytes,
                                shared_->options.access_log, shared_->handler));
}

// Sole requester (HttpRequest::sole_requester): this stream is the connection's only open one (a
// client that waits for each answer has closed the previous stream by then) and no other
// connection on this thread asked lately.
template <class Stream>
void Http2Connection<Stream>::NoteRequest(StreamState* s) {
  s->request.sole_requester =
      io_->NoteRequest(this, last_read_, shared_->options.sole_requester_window) &&
      streams_.size() == 1;
}

template <class Stream>
void Http2Connection<Stream>::Dispatch(int32_t id, StreamState* s) {
  s->dispatched = true;
  ReleaseBody(s);  // the request holds it now, under the server's admission
  s->cancellation = std::make_shared<CancellationToken>();
  s->request.cancellation = s->cancellation;
  if (s->request.body) {
    // Stream 1 of an Upgrade: the body was read by HTTP/1.1 (padded there).
  } else if (s->body.empty()) {
    s->request.body = EmptyBody();
  } else {
    if (s->body.capacity() < s->body.size() + kBodyPadding)
      s->body.reserve(s->body.size() + kBodyPadding);
    s->request.body = std::make_shared<const std::string>(std::move(s->body));
  }
  NoteRequest(s);
  HttpResponder responder(Responder{this->weak_from_this(), io_->shared_from_this(), id});
  try {
    shared_->handler->Handle(std::move(s->request), std::move(responder));
  } catch (const std::exception& e) {
    spdlog::error("http2: handler threw: {}", e.what());
    if (StreamState* again = Find(id); again != nullptr && !again->responded)
      SubmitResponse(id, again, ErrorResponse(500, "internal error"));
  }
}

template <class Stream>
void Http2Connection<Stream>::Responder::operator()(HttpResponse&& response) const {
  if (io->ioc.get_executor().running_in_this_thread()) {
    if (auto c = connection.lock()) {
      c->OnResponse(stream_id, std::move(response));
    } else {
      ReportSent(&response, false, {});
    }
    return;
  }
  // As the HTTP/1.1 responder posts (http_connection.cc): memory from the thread's post pool,
  // the response in a block of its own.
  asio::post(io->ioc,
             PooledHandler(io->post_pool, [connection = connection, stream_id = stream_id,
                                           response = PoolBox<HttpResponse>::Make(
                                               io->post_pool, std::move(response))]() mutable {
               if (auto c = connection.lock()) {
                 c->OnResponse(stream_id, std::move(*response));
               } else {
                 ReportSent(&*response, false, {});
               }
             }));
}

template <class Stream>
void Http2Connection<Stream>::OnResponse(int32_t id, HttpResponse&& response) {
  if (closed_) {
    ReportSent(&response, false, {});
    return;
  }
  StreamState* s = Find(id);
  if (s == nullptr || s->responded) {
    spdlog::debug("http2: dropping a response: stream {} is gone or answered", id);
    ReportSent(&response, false, {});
    return;
  }
  SubmitResponse(id, s, std::move(response));
  Flush();
}

template <class Stream>
HttpResponse Http2Connection<Stream>::UnreadResponsesRefusal(const StreamState* s) {
  const uint64_t bound = shared_->options.max_body_bytes;
  HttpResponse r = TransportErrorResponse(
      503,
      "this connection holds more than " + std::to_string(bound) +
          " bytes of responses its client has not read yet; read them, or use another "
          "connection",
      "content-type", s->request, s->body.size(), shared_->options.access_log, shared_->handler);
  r.headers.emplace_back("retry-after", "1");
  return r;
}

template <class Stream>
void Http2Connection<Stream>::SubmitResponse(int32_t id, StreamState* s, HttpResponse&& response) {
  s->responded = true;
  s->response = std::move(response);
  int status = s->response.status;
  if (status < 200 || status > 599) {
    spdlog::error("http2: handler returned status {}; sending 500", status);
    status = 500;
    s->response.body = "{\"error\":\"internal error\"}";
  }
  const bool no_body = status == 204 || status == 304;
  if (no_body) s->response.body.clear();
  // A HEAD's answer has the header fields a GET's would (RFC 9110 §9.3.2): for a streamed
  // body, no content-length (its length is not known), though nothing is streamed.
  bool head_of_stream = false;
  if (auto stream = std::move(s->response.stream)) {
    if (no_body || s->head_request || status != s->response.status || s->handler) {
      head_of_stream = s->head_request && !no_body && status == s->response.status;
      stream->Abandon();
    } else {
      s->body_stream = stream;
      s->handler = std::make_shared<ResponseStreamHandler>(stream, s->cancellation);
      auto pump = [connection = this->weak_from_this(), io = io_->shared_from_this(), id] {
        io->PostCoalesced([connection, id] {
          if (auto c = connection.lock()) c->PumpResponseStream(id);
        });
      };
      stream->Attach(pump);
      pump();  // posted: never inside an nghttp2 callback
    }
  }
  s->status = std::to_string(status);
  std::vector<std::string> names;  // lower-cased copies (HTTP/2 field names are lower case)
  names.reserve(s->response.headers.size());
  std::vector<nghttp2_nv> nva;
  nva.reserve(s->response.headers.size() + 2);
  auto add = [&nva](std::string_view n, std::string_view v) {
    nva.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(n.data())),
                   reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(),
                   NGHTTP2_NV_FLAG_NONE});
  };
  add(":status", s->status);
  for (const auto& [name, value] : s->response.headers) {
    if (IsDroppedHeader(name)) continue;
    std::string lower(name);
    for (char& ch : lower)
      if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    names.push_back(std::move(lower));
  }
  std::size_t k = 0;
  for (const auto& [name, value] : s->response.headers) {
    if (IsDroppedHeader(name)) continue;
    add(names[k++], value);
  }
  std::string length;
  const bool streamed = s->handler != nullptr || head_of_stream || !s->response.trailers.empty();
  if (!no_body && !streamed) {
    length = std::to_string(s->response.body.size());
    add("content-length", length);
  }
  if (s->head_request) s->response.body.clear();
  nghttp2_data_provider provider{};
  provider.source.ptr = s;
  provider.read_callback = &ReadBodyCb;
  // nghttp2 copies the name/value pairs; the provider reads s->response.body in place.
  const int rv =
      nghttp2_submit_response(session_, id, nva.data(), nva.size(),
                              s->response.body.empty() && !streamed ? nullptr : &provider);
  if (rv != 0) spdlog::debug("http2: cannot answer stream {}: {}", id, nghttp2_strerror(rv));
}

template <class Stream>
int Http2Connection<Stream>::OnFrameSendCb(nghttp2_session* session, const nghttp2_frame* frame,
                                           void* user) {
  auto* c = static_cast<Http2Connection*>(user);
  if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0)
    return 0;
  StreamState* s = c->Find(frame->hd.stream_id);
  // The response's last frame is in this batch: its on_sent fires when the batch's write
  // completes (the bytes are with the kernel then, not yet when nghttp2 serialised them).
  if (s != nullptr && s->response.on_sent) {
    c->sent_pending_.push_back(std::move(s->response.on_sent));
    s->response.on_sent = nullptr;
  }
  // An early answer while the client is still sending the body: tell it to stop (RFC 9113
  // §8.1: a complete response before the request, then RST_STREAM with NO_ERROR).
  if (s != nullptr && (s->refused || s->handler) && !s->request_complete)
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
  return 0;
}

template <class Stream>
int Http2Connection<Stream>::OnStreamCloseCb(nghttp2_session*, int32_t stream_id, uint32_t,
                                             void* user) {
  auto* c = static_cast<Http2Connection*>(user);
  auto it = c->streams_.find(stream_id);
  if (it == c->streams_.end()) return 0;
  StreamState* s = it->second.get();
  if (s->dispatched && !s->responded && s->cancellation) {
    // Reset by the client (or the connection is going) before we answered.
    s->cancellation->Cancel();
  }
  c->CancelStream(s);
  c->ReleaseBody(s);
  // Body bytes the handler never reported: the connection's window gets them back.
  if (s->unconsumed > 0) {
    nghttp2_session_consume_connection(c->session_, s->unconsumed);
    s->unconsumed = 0;
  }
  // Still here: the END_STREAM frame was never sent (reset, or refused by nghttp2).
  ReportSent(&s->response, false, {});
  // The last DATA frame's payload may still be in the batch being written.
  c->retired_.push_back(std::move(it->second));
  c->streams_.erase(it);
  if (c->streams_.empty()) c->idle_since_ = Clock::now();
  return 0;
}

// ---- Streamed requests (HttpHandler::OpenStream) --------------------------------------------

template <class Stream>
bool Http2Connection<Stream>::OpenStream(int32_t id, StreamState* s) {
  if (!shared_->handler->ServesAsStream(s->request)) return false;  // the common case: no writer
  NoteRequest(s);  // a streamed call is one requester for as long as it lasts
  HttpResponse head;
  std::shared_ptr<HttpStreamHandler> handler;
  auto writer = std::make_shared<StreamWriter>(this->weak_from_this(), io_->shared_from_this(), id);
  try {
    handler = shared_->handler->OpenStream(s->request, writer, &head);
  } catch (const std::exception& e) {
    spdlog::error("http2: OpenStream threw: {}", e.what());
    SubmitResponse(id, s, ErrorResponse(500, "internal error"));
    s->refused = true;
    return true;
  }
  if (!handler) return false;
  s->handler = std::move(handler);
  s->dispatched = true;
  head.body.clear();
  head.trailers.clear();
  SubmitResponse(id, s, std::move(head));
  return true;
}

template <class Stream>
void Http2Connection<Stream>::OnStreamWrite(int32_t id, std::unique_ptr<Part> part) {
  StreamState* s = closed_ ? nullptr : Find(id);
  if (s == nullptr || !s->handler || s->stream_cancelled || s->finish_queued) {
    if (part->on_written) part->on_written(false);
    return;
  }
  if (part->bytes.empty()) {
    if (part->on_written) part->on_written(true);
    return;
  }
  s->parts.push_back(std::move(part));
  if (s->data_deferred) {
    s->data_deferred = false;
    nghttp2_session_resume_data(session_, id);
  }
  Flush();
}

template <class Stream>
void Http2Connection<Stream>::OnStreamFinish(
    int32_t id, std::vector<std::pair<std::string, std::string>> trailers) {
  StreamState* s = closed_ ? nullptr : Find(id);
  if (s == nullptr || !s->handler || s->stream_cancelled || s->finish_queued) return;
  s->finish_queued = true;
  s->response.trailers = std::move(trailers);
  if (s->unconsumed > 0) {  // what the handler will never read now
    nghttp2_session_consume(session_, id, s->unconsumed);
    s->unconsumed = 0;
  }
  if (s->data_deferred) {
    s->data_deferred = false;
    nghttp2_session_resume_data(session_, id);
  }
  Flush();
}

template <class Stream>
void Http2Connection<Stream>::OnStreamConsumed(int32_t id, std::size_t bytes) {
  StreamState* s = closed_ ? nullptr : Find(id);
  if (s == nullptr || !s->handler) return;  // a closed stream gave its bytes back already
  bytes = std::min(bytes, s->unconsumed);
  if (bytes == 0) return;
  s->unconsumed -= bytes;
  nghttp2_session_consume(session_, id, bytes);
  Flush();
}

template <class Stream>
void Http2Connection<Stream>::PumpResponseStream(int32_t id) {
  // Until a Take() comes back empty: that one tells the stream to wake us for the next part.
  for (;;) {
    StreamState* s = closed_ ? nullptr : Find(id);
    if (s == nullptr || !s->body_stream || s->stream_cancelled || s->finish_queued) return;
    auto stream = s->body_stream;  // `s` may go in OnStreamWrite's Flush: not used after it
    ResponseStream::Taken taken;
    stream->Take(&taken);
    if (taken.empty()) return;
    if (!taken.bytes.empty() || !taken.on_written.empty()) {
      // The bytes move into the connection's queue as one part; its report goes through the
      // stream, which counts what is pending.
      const std::size_t size = taken.bytes.size();
      std::function<void(bool)> on_written = [stream, size,
                                              fns = std::move(taken.on_written)](bool ok) mutable {
        stream->Complete(size, fns, ok);
      };
      OnStreamWrite(id, std::make_unique<Part>(Part{std::move(taken.bytes), std::move(on_written)}));
    }
    if (taken.finished) {
      if (StreamState* again = Find(id)) again->body_stream.reset();
      OnStreamFinish(id, std::move(taken.trailers));
      return;
    }
  }
}

template <class Stream>
void Http2Connection<Stream>::ResetOverBudget(int32_t id, StreamState* s) {
  s->incoming.Clear();
  LogIncomingRefusal(*shared_);
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_ENHANCE_YOUR_CALM);
  CancelStream(s);
}

template <class Stream>
void Http2Connection<Stream>::CancelStream(StreamState* s) {
  s->incoming.Clear();
  if (!s->handler) return;
  for (auto& part : s->parts)
    if (part->on_written) part->on_written(false);
  s->parts.clear();
  // A handler that has finished has nothing left to stop, even if its trailers never went out.
  if (s->stream_cancelled || s->finish_queued) return;
  s->stream_cancelled = true;
  s->handler->OnCancel();
}

template class Http2Connection<TcpStream>;
template class Http2Connection<TlsStream>;

}  // namespace harrier::server_internal
