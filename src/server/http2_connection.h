// Http2Connection: one HTTP/2 connection (h2c with prior knowledge, h2c after an HTTP/1.1
// Upgrade, or h2 chosen by ALPN over TLS), driven by nghttp2 from the connection's I/O thread.
//
// nghttp2 does the framing, HPACK, stream states and flow control; this class moves bytes
// between it and the Asio stream and turns streams into HttpRequests for the same HttpHandler
// that HTTP/1.1 uses:
//   - DATA is appended to the stream's body string as it arrives; nghttp2 sends WINDOW_UPDATE
//     as it is consumed, so the client never has more than a window in flight per stream.
//   - After a request's header block, HttpHandler::Precheck may answer it: the response is sent
//     and, if the client is still sending the body, the stream is reset with NO_ERROR
//     (RFC 9113 §8.1); DATA for it is dropped unread.
//   - Per-stream limits: header block over max_header_bytes → 431, body (claimed by
//     content-length, or received) over max_body_bytes → 413, each answered like a Precheck
//     refusal, with X-Request-Id, and written to the access log if there is one (as is a 408
//     for a stalled body). Protocol errors are nghttp2's: RST_STREAM or GOAWAY as RFC 9113
//     says; they are not responses and are not logged.
//   - Responses may come from any thread; they are posted back here. Response bodies are sent
//     from the HttpResponse in place (NGHTTP2_DATA_FLAG_NO_COPY): the DATA frame header is
//     copied into the write batch, the payload is a gather buffer pointing into the body.
//   - A stream the client resets before its response cancels its request's token; losing the
//     connection cancels every open request.
//   - A response whose body is a ResponseStream (HttpResponse::stream) is sent like an
//     OpenStream response: HEADERS at once, then DATA as the producer writes, END_STREAM at its
//     Finish; a reset or a lost connection abandons the stream and cancels the request.
//   - Tracing: a request's received_at is the read that ended its header block, its
//     body_received_at the read with END_STREAM; a response's on_sent fires (true) when the
//     write of the batch holding its END_STREAM frame completes, (false) when the stream or the
//     connection goes first.
//   - The server's own closes (after GOAWAY, a bad preface, a stalled header block) wait for
//     the write in flight, then: over TLS send close_notify, bounded by kTlsCloseNotifyWait;
//     over TCP close, or after an error GOAWAY shut the send side and drain what the client
//     still sends, bounded by linger_timeout (closing with unread input makes the kernel send a
//     reset, which can destroy the GOAWAY before the client reads it).
//   - Stop: GOAWAY with the last stream id seen; streams in flight finish, then the connection
//     closes. Idle (no open stream) for keepalive_timeout: GOAWAY and close. A body that stalls
//     for body_timeout, or a write that stalls for write_timeout, closes the connection. A
//     response that the client's flow-control window holds back for write_timeout (no DATA
//     frame sent for it) is reset (RST_STREAM CANCEL) and its handler cancelled.
//
// Stream is an Asio stream: the TCP socket, or boost::asio::ssl::stream over it. Every member
// function runs on the I/O thread, except that a Responder may be called from any thread.
#pragma once

#include <nghttp2/nghttp2.h>

#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "harrier/http_message.h"
#include "harrier/response_stream.h"
#include "server/io_thread.h"

namespace harrier::server_internal {

// The 24 bytes every HTTP/2 client connection starts with (RFC 9113 §3.4).
inline constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

template <class Stream>
class Http2Connection : public Connection,
                        public std::enable_shared_from_this<Http2Connection<Stream>> {
 public:
  // `stream` is connected (and, for TLS, handshaken). `io` and `shared` outlive every call.
  Http2Connection(Stream stream, IoThread* io, ServerShared* shared);
  ~Http2Connection() override;

  // Registers with the IoThread, sends the server's SETTINGS and starts reading. `preread`:
  // bytes already read from the stream (the client's preface and whatever followed it).
  void Start(std::string_view preread);

  // h2c Upgrade (RFC 7540 §3.2): `settings` is the decoded HTTP2-Settings header. Writes the
  // 101 response, then serves `request` as stream 1 and continues as HTTP/2. False (and
  // nothing sent) when nghttp2 refuses the settings payload.
  bool StartUpgraded(std::string_view settings, HttpRequest request, bool head_request,
                     std::string_view preread);

  void OnServerStopping() override;
  void Close() override;

 private:
  void CloseGracefully();
  void StartClose();
  struct StreamState;
  using Clock = std::chrono::steady_clock;
  using Timer =
      boost::asio::basic_waitable_timer<std::chrono::steady_clock,
                                        boost::asio::wait_traits<std::chrono::steady_clock>,
                                        boost::asio::io_context::executor_type>;

  struct Responder {
    std::weak_ptr<Http2Connection> connection;
    std::shared_ptr<IoThread> io;
    int32_t stream_id;
    void operator()(HttpResponse&& response) const;
  };
  // A streamed response's writer (HttpHandler::OpenStream): every call is posted to the I/O
  // thread, even from it, so that it never runs inside an nghttp2 callback.
  class StreamWriter;
  // A part of a streamed body: its bytes and their report (called once: true when the last
  // byte is with the kernel, false when it never will be).
  struct Part {
    std::string bytes;
    std::function<void(bool written)> on_written;  // may be empty
  };

  bool InitSession();
  void Register();
  void ReadMore();
  void OnRead(const boost::system::error_code& ec, std::size_t n);
  bool Feed(const uint8_t* data, std::size_t n);
  void Flush();
  void OnWrite(const boost::system::error_code& ec);
  void ArmTick();
  void OnTick(const boost::system::error_code& ec);

  StreamState* Find(int32_t stream_id);
  void OnRequestHeaders(int32_t stream_id, StreamState* s);
  void OnRequestComplete(int32_t stream_id, StreamState* s);
  void Refuse(int32_t stream_id, StreamState* s, HttpResponse response);
  // Refuse() with an error of the transport's own (408, 413, 431), which is also written to the
  // access log, if any; `request_bytes`: the stream's body bytes received so far.
  void RefuseWithError(int32_t stream_id, StreamState* s, int status, std::string_view message,
                       uint64_t request_bytes);
  void NoteRequest(StreamState* s);
  // The request bodies the connection holds for streams not yet dispatched are bounded: past
  // max_body_bytes in all, a stream's flow-control window is given back only to the oldest
  // stream still sending its body (so that one always finishes), and to the others as bodies
  // leave (dispatched, refused, or their stream closed): each waits with at most its initial
  // window more (probe 64: each of 128 streams held a body of up to max_body_bytes, 32 GiB
  // from one socket by default).
  void HoldBody(int32_t stream_id, StreamState* s, std::size_t bytes);
  // `s` stops sending its body (dispatched, refused, closed): the streams held back go on as
  // the bounds allow (ResumeHeldStreams).
  void ReleaseBody(StreamState* s);
  // Gives the held-back streams their windows: every one while within bounds, else the oldest.
  // Also on every tick, so that no path that ends a stream can leave the others waiting.
  void ResumeHeldStreams();
  int32_t OldestBodyStream() const;  // of those holding body bytes; 0 when none
  std::size_t UnsentResponseBytes() const;  // of the responses made, not yet sent
  // The 503 for a new stream while UnsentResponseBytes() is past --max-body-bytes (logged).
  HttpResponse UnreadResponsesRefusal(const StreamState* s);
  void Dispatch(int32_t stream_id, StreamState* s);
  void OnResponse(int32_t stream_id, HttpResponse&& response);
  void SubmitResponse(int32_t stream_id, StreamState* s, HttpResponse&& response);
  // Streams (OpenStream): true when the handler took the stream.
  bool OpenStream(int32_t stream_id, StreamState* s);
  void OnStreamWrite(int32_t stream_id, std::unique_ptr<Part> part);
  void OnStreamFinish(int32_t stream_id, std::vector<std::pair<std::string, std::string>> trailers);
  void OnStreamConsumed(int32_t stream_id, std::size_t bytes);
  // A response whose body is a ResponseStream: its parts join the stream's queue as they come.
  void PumpResponseStream(int32_t stream_id);
  // The stream's handler is told it is gone (once), and its queued parts are dropped.
  void CancelStream(StreamState* s);
  // A streamed request whose unfinished message would pass the server-wide budget of bodies
  // still arriving: RST_STREAM(ENHANCE_YOUR_CALM), its handler cancelled, a log line.
  void ResetOverBudget(int32_t stream_id, StreamState* s);

  // nghttp2 callbacks (user_data is the connection).
  static int OnBeginHeadersCb(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int OnHeaderCb(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                        size_t namelen, const uint8_t* value, size_t valuelen, uint8_t flags,
                        void* user);
  static int OnFrameRecvCb(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int OnDataChunkCb(nghttp2_session*, uint8_t flags, int32_t stream_id, const uint8_t* data,
                           size_t len, void* user);
  static int OnStreamCloseCb(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user);
  static int OnFrameSendCb(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static ssize_t SendCb(nghttp2_session*, const uint8_t* data, size_t length, int flags,
                        void* user);
  static int SendDataCb(nghttp2_session*, nghttp2_frame* frame, const uint8_t* framehd,
                        size_t length, nghttp2_data_source* source, void* user);
  static ssize_t ReadBodyCb(nghttp2_session*, int32_t stream_id, uint8_t* buf, size_t length,
                            uint32_t* flags, nghttp2_data_source* source, void* user);

  IoThread* const io_;
  ServerShared* const shared_;
  Stream stream_;
  Timer timer_;
  nghttp2_session* session_ = nullptr;

  bool registered_ = false;
  std::list<std::shared_ptr<Connection>>::iterator registry_pos_;
  bool closed_ = false;
  bool in_recv_ = false;  // inside nghttp2_session_mem_recv: Flush() waits until it returns
  bool stopping_ = false;
  // CloseGracefully() began: TLS close_notify sent (async_shutdown pending), or the TCP send
  // side shut and the input drained; either way nothing more is read or written.
  bool closing_ = false;
  Clock::time_point close_started_;
  bool read_pending_ = false;     // an async_read_some is in flight
  bool linger_on_close_ = false;  // an error GOAWAY: TCP drains the input before it closes
  bool any_stream_ = false;  // a request has begun on this connection (else: header timeout)

  std::unordered_map<int32_t, std::unique_ptr<StreamState>> streams_;
  // Streams nghttp2 has closed while their last DATA may still be in the write in flight.
  std::vector<std::unique_ptr<StreamState>> retired_;
  // HttpResponse::on_sent of the responses whose END_STREAM frame is in the batch being built
  // or written: called with true when that write completes, false if the connection goes first.
  using OnSent = std::function<void(bool, std::chrono::steady_clock::time_point)>;
  std::vector<OnSent> sent_pending_;
  // Streamed parts whose last byte is in the batch being built or written (the gather buffer
  // points into them): on_written(true) when that write completes, (false) if the connection
  // goes first.
  std::vector<std::unique_ptr<Part>> parts_pending_;

  // Read side.
  std::array<uint8_t, 64 * 1024> rbuf_;
  Clock::time_point last_read_;
  // SETTINGS frames (not ACKs) the peer sent since settings_window_start_: past
  // kMaxSettingsFrames within kSettingsWindow the connection ends with GOAWAY
  // ENHANCE_YOUR_CALM (each one costs an ACK; a flood of them is an attack).
  static constexpr int kMaxSettingsFrames = 100;
  static constexpr std::chrono::seconds kSettingsWindow{10};
  int settings_frames_ = 0;
  Clock::time_point settings_window_start_{};

  // Write side: one batch at a time. Control frames and DATA frame headers are copied into
  // `owned_`; DATA payloads point into the responses' bodies. `segments_` records both in
  // order (owned: ptr == nullptr, offset into owned_).
  struct Segment {
    const uint8_t* ptr;
    std::size_t offset_or_zero;
    std::size_t size;
  };
  std::string owned_;
  std::vector<Segment> segments_;
  std::vector<boost::asio::const_buffer> gather_;
  std::size_t batch_bytes_ = 0;
  bool writing_ = false;
  Clock::time_point write_started_;  // or the tick that last saw the peer acknowledge bytes
  uint64_t acked_seen_ = 0;          // the peer's acknowledged bytes at that tick
  // DATA bytes sent on the connection, their count when the tick last saw kWindowProgressBytes
  // more, and that tick's time: the progress of streams held back by the connection's window.
  uint64_t data_bytes_ = 0;
  uint64_t data_bytes_seen_ = 0;
  Clock::time_point data_progress_at_{};
  Clock::time_point idle_since_;
  std::string prefix_;  // bytes to write before nghttp2's (the 101 of an Upgrade)
  uint64_t held_bodies_ = 0;      // HoldBody's bytes, over the streams
  std::size_t held_streams_ = 0;  // streams whose window is held back (deferred_window > 0)
};

}  // namespace harrier::server_internal
