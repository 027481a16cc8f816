// HttpConnection: one accepted HTTP/1.1 connection and its request/response loop, over TCP or
// TLS (BasicHttpConnection<Stream>). A TCP connection whose first bytes are the HTTP/2 preface,
// or a request asking for `Upgrade: h2c`, is handed to an Http2Connection (the socket moves
// there; this object unregisters and goes away).
//
// States, one request at a time:
//   kIdle      waiting for the first byte of a request (keep-alive idle, or a fresh connection)
//   kHeader    reading the request line and header fields          (header_timeout, total)
//   kBody      reading the body                                     (body_timeout, per read)
//   kHandling  the handler has the request. The socket is still read ("watched"): bytes of a
//              pipelined next request are appended to buffer_ (up to kWatchBufferBytes, then
//              reading pauses), and EOF or a reset means the client is gone: the request's
//              CancellationToken is cancelled and the connection closed, so a late response
//              is dropped. A half-close (shutdown(SHUT_WR)) reads exactly like a close, so it
//              cancels too (docs/server.md, "Client disconnects").
//   kWriting   writing the response with one gather write           (write_timeout, per write)
//              A streamed response (HttpResponse::stream) stays here until its body ends: the
//              head, then the parts as the producer writes them (chunked; HTTP/1.0: until the
//              close), several to a gather write when they come faster than the socket takes
//              them. No deadline while it waits for the producer; the socket is watched
//              meanwhile, so a client that goes away cancels the request and abandons the stream
//   kRefusalHold  HttpHandler::Precheck refused the request from its header, and this
//              connection's previous two refusals each came less than refusal_repeat_window
//              after the one before: nothing is read for refusal_hold, then as kDiscard
//              (docs/admission.md, "Clients that do not back off")
//   kDiscard   HttpHandler::Precheck answered from the header: the Content-Length body is read
//              past and thrown away (plain TCP: by the kernel, MSG_TRUNC; TLS: into the read
//              buffer's spare space) (body_timeout, per read), then the early response is
//              written and the connection kept
//   kLinger    after an error response: send side shut, unread input drained (linger_timeout);
//              TLS: close_notify sent first. Also a TLS connection closed on the server's
//              initiative (timeout, Stop) waiting, at most linger_timeout, for close_notify to go
//              out and be answered
//   kClosed
//
// Timeouts use one steady_timer lazily: a new deadline is only stored, and the timer is re-armed
// when it fires early, so the common request path makes no timer system calls.
//
// Ownership: while open, the IoThread's connection list holds it; pending Asio operations hold
// it through shared_from_this(). A responder holds only a weak_ptr, so a response for a closed
// connection is dropped. Thread safety: every member function runs on the connection's I/O
// thread, except that Responder (below) may be called from any thread.
#pragma once

#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "harrier/http_message.h"
#include "harrier/response_stream.h"
#include "server/incoming_bodies.h"
#include "server/io_thread.h"
#include "server/request_parser.h"
#include "server/tls.h"

namespace harrier::server_internal {

template <class Stream>
class BasicHttpConnection : public Connection,
                            public std::enable_shared_from_this<BasicHttpConnection<Stream>> {
 public:
  using Socket = Stream;
  using Timer =
      boost::asio::basic_waitable_timer<std::chrono::steady_clock,
                                        boost::asio::wait_traits<std::chrono::steady_clock>,
                                        boost::asio::io_context::executor_type>;

  // `socket` must belong to io->ioc. `io` and `shared` must outlive every call into this object
  // (they do: calls only happen on io's thread, which the server joins before it goes away).
  BasicHttpConnection(Socket socket, IoThread* io, ServerShared* shared);
  ~BasicHttpConnection() override;

  // Registers with the IoThread and starts reading. On the I/O thread. `preface` kAllowed: a
  // first request that is the HTTP/2 preface moves the connection to HTTP/2 (h2c with prior
  // knowledge; TLS without ALPN); kRefused: the client chose http/1.1 by ALPN, so the preface is
  // read as an HTTP/1.1 request of version 2.0 (a 505).
  enum class Http2Preface { kAllowed, kRefused };
  void Start(Http2Preface preface = Http2Preface::kAllowed);
  // The server is stopping: close now if idle, otherwise after the current response.
  void OnServerStopping() override;
  // Closes the socket now; an in-flight response will be dropped. Idempotent.
  void Close() override;

 private:
  enum class Phase {
    kIdle,
    kHeader,
    kBody,
    kHandling,
    kRefusalHold,
    kDiscard,
    kWriting,
    kLinger,
    kClosed
  };
  using Clock = std::chrono::steady_clock;

  // Delivers a handler's response; any thread.
  struct Responder {
    std::weak_ptr<BasicHttpConnection> connection;
    std::shared_ptr<IoThread> io;
    uint64_t sequence;
    void operator()(HttpResponse&& response) const;
  };

  void StartRequest();
  bool CheckHttp2Preface();
  bool MaybeUpgrade();
  void Detach();
  void ReadMore();
  void OnRead(const boost::system::error_code& ec, std::size_t n);
  void Parse();
  void ParseChunked();
  void OnHeaderDone();
  bool RunPrecheck();
  void AnswerEarly();
  void StartEarlyResponse();
  void DiscardMore();
  void OnDiscardRead(const boost::system::error_code& ec, std::size_t n);
  void ReadBodyDirect();
  void OnBodyRead(const boost::system::error_code& ec, std::size_t n);
  void Dispatch();
  // body_ as the request's shared body (in one of body_holders_). REQUIRES: body_ not empty.
  std::shared_ptr<const std::string> HoldBody();
  void WatchForDisconnect();
  void OnWatchRead(const boost::system::error_code& ec, std::size_t n);
  void CancelWatch();
  void OnResponse(uint64_t sequence, HttpResponse&& response);
  void StartWrite(HttpResponse&& response);
  void WriteSome();
  bool EndedByWriteError(const boost::system::error_code& ec);
  void OnWrite(const boost::system::error_code& ec, std::size_t n);
  void OnWriteDone();
  // Streamed responses: takes what the producer has written and writes it (or waits for it).
  void PumpStream();
  void EndStream();
  void StreamWriteSome();
  void OnStreamWrite(const boost::system::error_code& ec, std::size_t n);
  void AbandonStream();
  void SendContinue();
  // Answers the request being read with an error of the transport's own (400, 408, 413, 431),
  // writes its access record when there is an access log, and closes after a linger.
  void SendError(int status, std::string_view message);
  // Writes a transport's answer to the request being read, then closes after a linger.
  void SendResponseAndClose(HttpResponse response);
  bool ChargeIncoming(uint64_t bytes);
  // The bytes the next direct read of a Content-Length body may take.
  std::size_t NextBodyWindow() const;
  void FailParse(const boost::system::error_code& ec);
  // The TCP socket under the stream (itself for plain TCP).
  TcpStream& Tcp() {
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      return socket_.next_layer();
    } else {
      return socket_;
    }
  }
  void CloseGracefully();
  void Linger();
  void DrainRaw();
  bool InputWaiting();
  void OnLingerRead(const boost::system::error_code& ec);
  void FormatHead();

  void SetDeadline(Clock::time_point deadline);
  void ClearDeadline() { deadline_ = Clock::time_point::max(); }
  void ArmTimer(Clock::time_point at);
  void OnTimer(uint64_t generation, const boost::system::error_code& ec);

  // Constant after construction.
  IoThread* const io_;
  ServerShared* const shared_;

  Socket socket_;
  Timer timer_;

  Phase phase_ = Phase::kIdle;
  bool registered_ = false;
  std::list<std::shared_ptr<Connection>>::iterator registry_pos_;
  bool first_request_ = true;
  bool protocol_known_ = false;        // the first bytes were checked for the HTTP/2 preface
  bool close_after_response_ = false;  // set by an error, Connection: close, HTTP/1.0 or Stop
  bool linger_on_close_ = false;       // unread request bytes may remain
  bool in_handler_ = false;            // inside HttpHandler::Handle on this thread
  uint64_t sequence_ = 0;              // of the request in flight

  // Read side. buffer_ is reused for the connection's life.
  boost::beast::flat_buffer buffer_;
  HttpRequest request_;
  std::string body_;
  // The shared strings the last requests' bodies were handed over in (HttpRequest::body), each
  // reused for a later body once nobody else holds it, so that a body costs no allocation
  // (issue 10); when both are still held, one is replaced, the old one freed by its last holder.
  // HoldBody() hands them out. Two: the previous request's is often still held when the next
  // arrives.
  std::array<std::shared_ptr<std::string>, 2> body_holders_;
  std::size_t next_body_holder_ = 0;  // the slot a new holder takes
  std::optional<RequestParser> parser_;
  SpareHeaderFields spare_header_fields_;  // the last requests' field strings (RequestParser)
  uint64_t body_received_ = 0;  // Content-Length bodies read directly into body_
  uint64_t body_expected_ = 0;
  // The body's share of the server-wide budget (Options::incoming_bodies) while it arrives:
  // charged after each read that leaves it incomplete, cleared when it is handed on or dropped.
  IncomingBodyCharge incoming_;
  bool head_request_ = false;
  bool http10_ = false;

  // The request in the handler's hands: cancelled when the client goes away before its
  // response is written. Null between requests.
  std::shared_ptr<CancellationToken> cancellation_;
  bool watch_pending_ = false;       // a read is outstanding while handling or writing, and on into
                                     // the next request's wait (StartRequest)
  bool resume_after_watch_ = false;  // OnWriteDone waits for that read to complete
  bool parse_after_watch_ = false;   // StartRequest waits for it before parsing (pipelined)

  // Write side.
  std::optional<HttpResponse> inline_response_;  // answered inside Handle(): written after it
  std::optional<HttpResponse> early_response_;   // Precheck's answer, written after kDiscard
  Clock::time_point last_refusal_{};             // when a Precheck answer was last started
  uint32_t refusal_streak_ = 0;                  // refusals each within the window of the last
  HttpResponse response_;                        // keeps the body alive during the write
  std::string head_;                             // status line + headers, reused
  std::array<boost::asio::const_buffer, 2> out_;
  // A streamed response's body (response_.stream while it is sent): the parts in the write in
  // flight, their chunk framing (one string, so that the buffers below point into it without
  // moving) and the gather list.
  std::shared_ptr<ResponseStream> stream_;
  ResponseStream::Taken stream_taken_;  // in the write in flight; its buffer is reused
  char stream_chunk_size_[2 * sizeof(std::size_t) + 2];  // the chunk's "<hex>\r\n"
  // The write in flight: the chunk's size line, its bytes, its end (and the last chunk).
  // An array: Asio copies the buffer sequence into its operation, which for a vector allocates.
  std::array<boost::asio::const_buffer, 3> stream_out_;
  bool stream_writing_ = false;
  bool stream_finishing_ = false;  // the last chunk is in the write in flight
  bool continue_sent_ = false;

  // Lazy deadline timer.
  Clock::time_point deadline_ = Clock::time_point::max();
  Clock::time_point timer_at_ = Clock::time_point::max();
  bool timer_armed_ = false;
  // A write's deadline passed and the peer's acknowledged bytes were sampled (acked_seen_); the
  // timer looks again shortly (OnTimer). Any new deadline ends it.
  bool write_probe_ = false;
  uint64_t acked_seen_ = 0;
  uint64_t timer_generation_ = 0;
};

// The plain-TCP connection (TLS connections are BasicHttpConnection<TlsStream>).
using HttpConnection = BasicHttpConnection<TcpStream>;

}  // namespace harrier::server_internal
