#include "server/http_connection.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/status.hpp>
#include <charconv>
#include <cstring>
#include <ctime>
#include <exception>
#include <type_traits>

#include "server/http2_connection.h"
#include "server/http_common.h"
#include "server/tcp_progress.h"

namespace harrier::server_internal {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;

namespace {

// Bytes asked of the kernel per read while parsing a header or a chunked body. The flat buffer
// keeps its capacity, so this is allocated once per connection.
constexpr std::size_t kReadChunk = 16 * 1024;
// RunPrecheck holds a refusal that is this many refusals into a streak (see there).
constexpr uint32_t kHeldFromStreak = 2;
// A refused body or lingering input is dropped by the kernel this much per receive, into the
// thread's discard sink (IoThread::discard_sink).
constexpr std::size_t kDiscardChunk = IoThread::kDiscardChunk;
// A Content-Length body is read straight into the request's string, at most this much per read;
// the string grows as the bytes arrive, so a client that claims a large body and sends nothing
// costs address space, not memory.
constexpr std::size_t kBodyWindow = 4 * 1024 * 1024;
// While a handler runs, the socket is still read to notice a client that goes away; bytes of a
// pipelined next request are kept in the read buffer up to this much, then reading pauses (TCP
// flow control holds the rest back) until the response is written.
constexpr std::size_t kWatchBufferBytes = 4 * kReadChunk;
// Header fields most clients send (Host, Content-Type, Content-Length, User-Agent, Accept,
// and a few more); more still work, with the vector growing.
constexpr std::size_t kExpectedHeaders = 8;
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
// A body buffer the connection keeps for its next request (BasicHttpConnection::body_ and the
// holder's string) is dropped when it grew past this, so that an idle connection holds at most
// twice this much after a large upload.
constexpr std::size_t kKeepBodyCapacity = 1024 * 1024;

// The server owns message framing; these headers from a handler are ignored.
bool IsFramingHeader(std::string_view name) {
  return IEquals(name, "content-length") || IEquals(name, "transfer-encoding") ||
         IEquals(name, "connection");
}

void AppendNumber(std::string* out, uint64_t value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  (void)ec;
  out->append(buf, end);
}

// "Date: Tue, 15 Nov 1994 08:12:31 GMT\r\n", formatted once per second per thread.
std::string_view DateHeader() {
  thread_local std::time_t cached_second = 0;
  thread_local char line[64];
  thread_local std::size_t length = 0;
  std::time_t now = std::time(nullptr);
  if (now != cached_second) {
    std::tm tm{};
    gmtime_r(&now, &tm);
    length = std::strftime(line, sizeof(line), "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
    cached_second = now;
  }
  return {line, length};
}

// True when the comma-separated header value `list` holds `token` (case-insensitive).
bool ListHasToken(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    if (IEquals(TrimOws(item), token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// base64url without padding (RFC 4648 §5), as HTTP2-Settings uses; padding is tolerated.
bool DecodeBase64Url(std::string_view in, std::string* out) {
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  for (char ch : in) {
    int v;
    if (ch >= 'A' && ch <= 'Z')
      v = ch - 'A';
    else if (ch >= 'a' && ch <= 'z')
      v = ch - 'a' + 26;
    else if (ch >= '0' && ch <= '9')
      v = ch - '0' + 52;
    else if (ch == '-' || ch == '+')
      v = 62;
    else if (ch == '_' || ch == '/')
      v = 63;
    else if (ch == '=')
      break;
    else
      return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return true;
}

// True when `payload` is a SETTINGS frame payload a server may accept (RFC 9113 §6.5): whole
// 6-byte entries (a 16-bit id, a 32-bit value, big-endian) whose values are in range. Unknown
// ids are ignored, as the RFC says. These are the checks nghttp2 makes when the upgraded
// session starts; made here first, a bad header is answered 400 rather than closing silently.
bool IsValidSettingsPayload(std::string_view payload) {
  if (payload.size() % 6 != 0) return false;
  for (std::size_t i = 0; i < payload.size(); i += 6) {
    const auto byte = [&](std::size_t k) { return static_cast<uint32_t>(uint8_t(payload[i + k])); };
    const uint32_t id = byte(0) << 8 | byte(1);
    const uint32_t value = byte(2) << 24 | byte(3) << 16 | byte(4) << 8 | byte(5);
    switch (id) {
      case 0x2:  // ENABLE_PUSH
      case 0x8:  // ENABLE_CONNECT_PROTOCOL (RFC 8441)
      case 0x9:  // NO_RFC7540_PRIORITIES (RFC 9218)
        if (value > 1) return false;
        break;
      case 0x4:  // INITIAL_WINDOW_SIZE
        if (value > 0x7fffffffu) return false;
        break;
      case 0x5:  // MAX_FRAME_SIZE
        if (value < (1u << 14) || value > (1u << 24) - 1) return false;
        break;
      default: break;
    }
  }
  return true;
}

// True when the request line at the start of `buffered` (as far as it came) ends in a
// well-formed HTTP version other than 1.x ("HTTP/2.0"), which Beast refuses as a bad version
// like a malformed one: it is answered 505, not 400 (RFC 9110 §15.6.6, as nginx does).
bool UnsupportedHttpVersion(std::string_view buffered) {
  // The line as far as it came: Beast may refuse the version before the LF, or the CR, is in.
  std::size_t end = buffered.find_first_of("\r\n");
  if (end == std::string_view::npos) end = buffered.size();
  if (end < 9) return false;
  const std::string_view v = buffered.substr(end - 8, 8);  // "HTTP/d.d"
  return v.starts_with("HTTP/") && v[5] >= '0' && v[5] <= '9' && v[5] != '1' && v[6] == '.' &&
         v[7] >= '0' && v[7] <= '9' && buffered[end - 9] == ' ';
}

// The X-Request-Id field among the header lines at the start of `unparsed` (what Beast has not
// taken yet), when its line is whole, for a header refused before Beast parsed it: Beast takes
// a field only once the next line has begun (it could be a folded continuation), so a stalled
// header's last field was lost, and a client's id with it when that field came last (probe 41).
// Empty when there is none.
std::string_view RequestIdLineOf(std::string_view unparsed) {
  constexpr std::string_view kName = "x-request-id:";
  while (!unparsed.empty()) {
    const std::size_t end = unparsed.find("\r\n");
    if (end == std::string_view::npos || end == 0) return {};  // a partial line, or the blank one
    const std::string_view line = unparsed.substr(0, end);
    if (line.size() > kName.size() &&
        std::equal(kName.begin(), kName.end(), line.begin(), [](char a, char b) {
          return a == (b >= 'A' && b <= 'Z' ? static_cast<char>(b - 'A' + 'a') : b);
        })) {
      std::string_view value = line.substr(kName.size());
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
        value.remove_prefix(1);
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
        value.remove_suffix(1);
      // A next line that begins with a space or tab folds into this one (obs-fold), which the
      // parser refuses (400): not a value to take (probe 42).
      const std::string_view next = unparsed.substr(end + 2);
      if (!next.empty() && (next.front() == ' ' || next.front() == '\t')) return {};
      return value;
    }
    unparsed.remove_prefix(end + 2);
  }
  return {};
}

// When the request line at the start of `line` ends in "HTTP/1.x" with x of 2 to 9, makes it
// "HTTP/1.1" in place and says so. Beast refuses every version but 1.0 and 1.1
// as malformed; RFC 9112 §2.3 has a higher minor version of HTTP/1 served as the highest one
// the server speaks, as nginx does (probe 40 F7: "HTTP/1.2" was a 400).
bool LowerHigherMinorVersion(char* line, std::size_t size) {
  const std::string_view text(line, size);
  // The line as far as it came: Beast refuses the version as soon as its 8 bytes are in.
  std::size_t end = text.find_first_of("\r\n");
  if (end == std::string_view::npos) end = text.size();
  if (end < 9) return false;
  const std::string_view v = text.substr(end - 8, 8);  // "HTTP/1.x"
  if (!v.starts_with("HTTP/1.") || v[7] < '2' || v[7] > '9' || text[end - 9] != ' ') return false;
  line[end - 1] = '1';
  return true;
}

// The method and target of the request line at the start of `buffered`, as far as they were
// read ("METHOD SP target ..."), for a request whose start line or headers went past the limit
// before Beast parsed the line: Beast reads the start line only once it is whole, so an
// over-long request line left the 431 without a target, and so without the shape its API
// answers errors in (an OpenAI error under /v1/; probe 31). The access log's record says as
// much of the target as was read, as its other fields do. False when not even the method and
// the target's first byte are there.
bool RequestLineOf(std::string_view buffered, std::string* method, std::string* target) {
  const std::string_view line = buffered.substr(0, buffered.find("\r\n"));
  const std::size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0 || sp1 + 1 >= line.size()) return false;
  const std::size_t sp2 = line.find(' ', sp1 + 1);
  method->assign(line.substr(0, sp1));
  target->assign(line.substr(sp1 + 1, sp2 == std::string_view::npos ? sp2 : sp2 - sp1 - 1));
  return true;
}

}  // namespace

template <class Stream>
BasicHttpConnection<Stream>::BasicHttpConnection(Socket socket, IoThread* io, ServerShared* shared)
    : io_(io),
      shared_(shared),
      socket_(std::move(socket)),
      timer_(io->ioc.get_executor()),
      incoming_(shared->options.incoming_bodies.get()) {}

template <class Stream>
BasicHttpConnection<Stream>::~BasicHttpConnection() = default;

template <class Stream>
void BasicHttpConnection<Stream>::Start(Http2Preface preface) {
  protocol_known_ = preface == Http2Preface::kRefused;
  registry_pos_ = io_->connections.insert(io_->connections.end(), this->shared_from_this());
  registered_ = true;
  shared_->live_connections.fetch_add(1);
  StartRequest();  // during a stop: serves a request that is already here, else closes
}

// A request the client sent before the stop must not be dropped, wherever it is when the stop
// reaches the connection:
//   - being read or handled: answered, with Connection: close (StartWrite adds it);
//   - after a response whose head had gone out without Connection: close: StartRequest serves
//     the next request if it is already here (pipelined, or in the kernel), else closes;
//   - idle, the request still in the kernel: served like that;
//   - idle, the request read by the reactor but its completion queued behind this call: a post
//     goes behind what is queued, so the connection looks again once that has run.
// Only a request that arrives after the last look meets the close: the race every keep-alive
// server has (RFC 9112 section 9.3.1 lets clients retry it).
template <class Stream>
void BasicHttpConnection<Stream>::OnServerStopping() {
  switch (phase_) {
    case Phase::kIdle:
      if (InputWaiting()) return;
      asio::post(io_->ioc, [self = this->shared_from_this(), sequence = sequence_] {
        if (self->phase_ != Phase::kIdle || self->sequence_ != sequence) return;
        if (!self->InputWaiting()) self->CloseGracefully();
      });
      return;
    case Phase::kWriting:  // the head is out; StartRequest decides once it is written
    case Phase::kLinger:
    case Phase::kClosed: return;
    default: close_after_response_ = true;
  }
}

template <class Stream>
void BasicHttpConnection<Stream>::Close() {
  if (phase_ == Phase::kClosed) return;
  auto self = this->shared_from_this();  // the registry may hold the last reference
  // A streamed response still being produced counts as handling: its producer must stop.
  const bool handling = phase_ == Phase::kHandling || stream_ != nullptr;
  phase_ = Phase::kClosed;
  // Nobody will receive this request's answer (client gone, or Stop gave up on it): let the
  // scheduler and the backend drop the work. Callbacks run here, on the I/O thread.
  if (handling && cancellation_) cancellation_->Cancel();
  cancellation_.reset();
  incoming_.Clear();
  if (stream_) AbandonStream();
  ++timer_generation_;
  timer_armed_ = false;
  timer_.cancel();
  error_code ignored;
  socket_.lowest_layer().shutdown(asio::socket_base::shutdown_both, ignored);
  socket_.lowest_layer().close(ignored);
  // Responses that will never be written (or whose write did not finish) say so.
  ReportSent(&response_, false, {});
  if (inline_response_) ReportSent(&*inline_response_, false, {});
  if (early_response_) ReportSent(&*early_response_, false, {});
  inline_response_.reset();
  early_response_.reset();
  if (registered_) {
    registered_ = false;
    io_->connections.erase(registry_pos_);
    shared_->OnConnectionClosed();
  }
}

// ---- Reading a request -------------------------------------------------------------------

template <class Stream>
void BasicHttpConnection<Stream>::StartRequest() {
  ++sequence_;
  // A new request, but the last one's header vector (emptied; a handler that kept the headers
  // moved them away) keeps its room: none allocated for the usual handful of headers, and one
  // for a connection's first instead of a growing vector's three or four. Its fields' strings
  // go to the parser's spares.
  auto headers = std::move(request_.headers);
  spare_header_fields_.Reclaim(&headers);
  request_ = HttpRequest{};
  request_.headers = std::move(headers);
  request_.version = HttpVersion::kHttp11;  // known from the start, for a refusal's shape too
  request_.tls_version = TlsVersionOf(socket_);
  request_.headers.reserve(kExpectedHeaders);
  body_.clear();
  if (body_.capacity() > kKeepBodyCapacity) std::string().swap(body_);
  for (auto& holder : body_holders_) {
    if (holder != nullptr && holder->capacity() > kKeepBodyCapacity) {
      holder.reset();  // whoever still holds it frees it
    }
  }
  parser_.emplace(&request_, &body_, &spare_header_fields_, shared_->options.max_body_bytes,
                  shared_->options.max_header_bytes);
  body_received_ = 0;
  body_expected_ = 0;
  head_request_ = false;
  http10_ = false;
  continue_sent_ = false;
  close_after_response_ = false;
  linger_on_close_ = false;

  const auto now = Clock::now();
  if (buffer_.size() > 0) {  // a pipelined request is already here
    phase_ = Phase::kHeader;
    SetDeadline(now + shared_->options.header_timeout);
    if (watch_pending_) {
      // The last request's disconnect watch is still reading into buffer_'s free space. Parsing
      // now would move the bytes under it (consuming all of a flat_buffer rewinds it), and a
      // read for the rest of this request would be a second one beside it, taking bytes out
      // of order. So the watch is stopped first, and OnWatchRead parses.
      parse_after_watch_ = true;
      CancelWatch();
      return;
    }
    Parse();
    return;
  }
  if (shared_->stopping.load(std::memory_order_relaxed) && !InputWaiting()) {
    CloseGracefully();
    return;
  }
  phase_ = Phase::kIdle;
  // A fresh connection gets header_timeout from the accept, so connecting and sending nothing
  // is cut off as fast as sending half a header.
  SetDeadline(now + (first_request_ ? shared_->options.header_timeout
                                    : shared_->options.keepalive_timeout));
  // The last request's disconnect watch is still reading: it becomes this request's read
  // (OnWatchRead hands it to OnRead). A new read now would find nothing (one system call) and
  // the cancelled watch would cost a handler run.
  if (watch_pending_) return;
  ReadMore();
}

template <class Stream>
void BasicHttpConnection<Stream>::ReadMore() {
  socket_.async_read_some(buffer_.prepare(kReadChunk),
                          [self = this->shared_from_this()](const error_code& ec, std::size_t n) {
                            self->OnRead(ec, n);
                          });
}

template <class Stream>
void BasicHttpConnection<Stream>::OnRead(const error_code& ec, std::size_t n) {
  // Anything but a reading phase: the read was cancelled (timeout answered with 408) or the
  // connection closed; nothing to do.
  if (phase_ != Phase::kIdle && phase_ != Phase::kHeader && phase_ != Phase::kBody) return;
  if (ec) {
    if (ec == asio::error::eof && (phase_ == Phase::kBody || buffer_.size() > 0)) {
      // The client half-closed in the middle of a request (a body shorter than its
      // Content-Length, say): it may still be reading, so tell it why.
      SendError(400, "the connection was closed before the request was complete");
      return;
    }
    // EOF between requests is how keep-alive connections normally end.
    if (ec != asio::error::eof && ec != asio::error::connection_reset)
      spdlog::debug("http: read failed: {}", ec.message());
    Close();
    return;
  }
  buffer_.commit(n);
  if (!protocol_known_ && CheckHttp2Preface()) return;
  if (phase_ == Phase::kIdle) {
    phase_ = Phase::kHeader;
    if (!first_request_) SetDeadline(Clock::now() + shared_->options.header_timeout);
  } else if (phase_ == Phase::kBody) {
    SetDeadline(Clock::now() + shared_->options.body_timeout);
  }
  Parse();
}

template <class Stream>
bool BasicHttpConnection<Stream>::CheckHttp2Preface() {
  const auto data = buffer_.data();
  const std::string_view got(static_cast<const char*>(data.data()),
                             std::min(data.size(), kHttp2Preface.size()));
  if (!first_request_ || sequence_ != 1 || kHttp2Preface.substr(0, got.size()) != got) {
    protocol_known_ = true;  // HTTP/1.x
    return false;
  }
  if (got.size() < kHttp2Preface.size()) {  // a prefix of it so far
    if (phase_ == Phase::kIdle) phase_ = Phase::kHeader;
    ReadMore();
    return true;
  }
  // HTTP/2 with prior knowledge: the socket and the bytes read so far move to an
  // Http2Connection.
  protocol_known_ = true;
  const std::string preread(static_cast<const char*>(data.data()), data.size());
  auto self = this->shared_from_this();
  auto h2 = std::make_shared<Http2Connection<Stream>>(std::move(socket_), io_, shared_);
  h2->client_slot = std::move(this->client_slot);
  Detach();
  h2->Start(preread);
  return true;
}

// Leaves the registry without touching the socket (it has moved to an Http2Connection).
template <class Stream>
void BasicHttpConnection<Stream>::Detach() {
  auto self = this->shared_from_this();
  phase_ = Phase::kClosed;
  ++timer_generation_;
  timer_armed_ = false;
  timer_.cancel();
  if (registered_) {
    registered_ = false;
    io_->connections.erase(registry_pos_);
    shared_->OnConnectionClosed();
  }
}

// `Upgrade: h2c` with an HTTP2-Settings header (RFC 7540 §3.2), on a complete request: answer
// 101 and serve this request as HTTP/2 stream 1. Without those headers (h2 over cleartext, no
// HTTP2-Settings) or over HTTP/1.0, it is served as plain HTTP/1.1. With them but an invalid
// HTTP2-Settings -- not base64url, not a valid SETTINGS payload, or the header twice -- the
// server must not upgrade (RFC 7540 §3.2.1): 400 and close (docs/server.md). True when the
// request has been taken care of here.
template <class Stream>
bool BasicHttpConnection<Stream>::MaybeUpgrade() {
  // h2c is HTTP/2 in clear (RFC 9113 §3.1): over TLS, Upgrade: h2c is ignored and the request
  // served as HTTP/1.1, as nginx does; upgrading there let a client past the ALPN it chose, and
  // is the "h2c smuggling" way past a proxy's rules (probe 40).
  if constexpr (std::is_same_v<Stream, TlsStream>) return false;
  // Off unless asked for (--http2-upgrade on): through a proxy it is a tunnel past the proxy's
  // rules (HttpServer::Options::h2c_upgrade; probe 57).
  if (!shared_->options.h2c_upgrade) return false;
  if (http10_ || !request_.HasHeader("http2-settings") ||
      !ListHasToken(request_.Header("upgrade"), "h2c") ||
      !ListHasToken(request_.Header("connection"), "upgrade"))
    return false;
  const auto settings_fields =
      std::count_if(request_.headers.begin(), request_.headers.end(),
                    [](const auto& field) { return field.first == "http2-settings"; });
  std::string settings;
  if (settings_fields != 1 || !DecodeBase64Url(request_.Header("http2-settings"), &settings) ||
      !IsValidSettingsPayload(settings)) {
    SendError(400, "invalid HTTP2-Settings header: the connection is not upgraded to h2c");
    return true;
  }
  cancellation_.reset();
  if (!body_.empty()) {
    if (body_.capacity() < body_.size() + kBodyPadding) body_.reserve(body_.size() + kBodyPadding);
    request_.body = std::make_shared<const std::string>(std::move(body_));
  }
  parser_.reset();
  const auto data = buffer_.data();
  const std::string preread(static_cast<const char*>(data.data()), data.size());
  auto self = this->shared_from_this();
  auto h2 = std::make_shared<Http2Connection<Stream>>(std::move(socket_), io_, shared_);
  h2->client_slot = std::move(this->client_slot);
  Detach();
  if (!h2->StartUpgraded(settings, std::move(request_), head_request_, preread)) {
    spdlog::debug("http: refusing an h2c upgrade: bad HTTP2-Settings");
    h2->Close();
  }
  return true;
}

template <class Stream>
void BasicHttpConnection<Stream>::Parse() {
  if (phase_ == Phase::kBody) {
    ParseChunked();
    return;
  }
  while (phase_ == Phase::kHeader) {
    // Empty lines before the request line are skipped, as RFC 9112 §2.2 asks (a client's stray
    // CRLF after a body, probe 57: the next request was a 400 and the connection closed). The
    // header timeout still runs: a stream of them is cut off as a slow header is.
    if (!parser_->got_some()) {
      const auto data = buffer_.data();
      const std::string_view unparsed(static_cast<const char*>(data.data()), data.size());
      std::size_t empty = 0;
      while (unparsed.substr(empty, 2) == "\r\n") empty += 2;
      buffer_.consume(empty);
      if (buffer_.size() == 0 || (buffer_.size() == 1 && unparsed.back() == '\r')) {
        ReadMore();
        return;
      }
    }
    error_code ec;
    const std::size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec == http::error::need_more) {
      ReadMore();
      return;
    }
    // Beast refuses a version only in the request line, which it takes whole or not at all: the
    // buffer still starts with it.
    if (ec == http::error::bad_version &&
        LowerHigherMinorVersion(static_cast<char*>(buffer_.data().data()), buffer_.size())) {
      // Served as HTTP/1.1: the refused line was not taken, and a new parser reads it again.
      parser_.emplace(&request_, &body_, &spare_header_fields_, shared_->options.max_body_bytes,
                      shared_->options.max_header_bytes);
      continue;
    }
    if (ec) {
      FailParse(ec);
      return;
    }
    if (parser_->is_header_done()) {
      OnHeaderDone();
      return;
    }
    if (used == 0) {  // defensive: no progress without need_more
      ReadMore();
      return;
    }
  }
}

template <class Stream>
void BasicHttpConnection<Stream>::OnHeaderDone() {
  request_.received_at = Clock::now();
  http10_ = parser_->version() < 11;
  // No body: complete with its header. Else Dispatch() stamps the body's end.
  if (parser_->is_done()) request_.body_received_at = request_.received_at;
  head_request_ = request_.method == "HEAD";
  if (!parser_->keep_alive()) close_after_response_ = true;
  if (RunPrecheck()) return;
  if (parser_->is_done()) {  // no body
    Dispatch();
    return;
  }
  phase_ = Phase::kBody;
  SetDeadline(Clock::now() + shared_->options.body_timeout);
  const bool need_continue = parser_->expects_continue() && !http10_ && buffer_.size() == 0;

  if (parser_->chunked()) {
    parser_->eager(true);
    if (need_continue) {
      SendContinue();
      return;
    }
    ParseChunked();
    return;
  }

  // Content-Length body (the parser already refused one over max_body_bytes): copy what came
  // with the header, read the rest straight into the string.
  body_expected_ = parser_->content_length().value_or(0);
  body_.reserve(static_cast<std::size_t>(body_expected_) + kBodyPadding);
  const std::size_t take =
      static_cast<std::size_t>(std::min<uint64_t>(buffer_.size(), body_expected_));
  body_.resize(take);
  std::memcpy(body_.data(), buffer_.data().data(), take);
  buffer_.consume(take);
  body_received_ = take;
  if (body_received_ == body_expected_) {
    Dispatch();
    return;
  }
  // The first window is charged before the body is invited (100 Continue) or read: a body the
  // budget has no room for is refused before the client sends it.
  if (!ChargeIncoming(body_received_ + NextBodyWindow())) return;
  if (need_continue) {
    SendContinue();
    return;
  }
  ReadBodyDirect();
}

// Asks the handler about the request from its header alone. A response answers it without the
// body ever being stored: with a Content-Length the body is read past (discarded by the kernel
// on plain TCP, never copied) and the connection kept; a chunked body, or a client waiting for
// `100 Continue`, is answered at once and the connection closed after a linger. A refusal on a
// connection that was refused a moment ago is held first (options.refusal_hold).
template <class Stream>
bool BasicHttpConnection<Stream>::RunPrecheck() {
  std::optional<HttpResponse> early;
  try {
    early = shared_->handler->Precheck(request_);
  } catch (const std::exception& e) {
    spdlog::error("http: Precheck threw: {}; handling the request normally", e.what());
    return false;
  }
  if (!early) return false;
  const Clock::time_point now = Clock::now();
  const auto hold = shared_->options.refusal_hold;
  // Refusals that follow each other within the window form a streak; the third of a streak and
  // every one after it is held. Two in a row happen to an open-loop client's connection now
  // and then; a client that resends at once makes a streak at once and keeps it.
  const bool quick = last_refusal_ != Clock::time_point{} &&
                     now - last_refusal_ < shared_->options.refusal_repeat_window;
  refusal_streak_ = quick ? refusal_streak_ + 1 : 0;
  early_response_ = std::move(early);
  if (refusal_streak_ >= kHeldFromStreak && hold.count() > 0) {
    // A client that sends again at once after a refusal: answer it later, and read none of its
    // body meanwhile, so that it waits (on its socket's back-pressure when the body is large)
    // instead of making the server and itself spin through refusals on the model's cores.
    phase_ = Phase::kRefusalHold;
    SetDeadline(now + hold);
    return true;
  }
  AnswerEarly();
  return true;
}

// Writes early_response_ (Precheck's answer) after the body, as RunPrecheck describes.
template <class Stream>
void BasicHttpConnection<Stream>::AnswerEarly() {
  last_refusal_ = Clock::now();
  if (parser_->is_done()) {  // no body
    parser_.reset();
    StartEarlyResponse();
    return;
  }
  if (parser_->chunked() || parser_->expects_continue()) {
    close_after_response_ = true;
    linger_on_close_ = true;
    parser_.reset();
    StartEarlyResponse();
    return;
  }
  uint64_t remaining = parser_->content_length().value_or(0);
  parser_.reset();
  const std::size_t take = static_cast<std::size_t>(std::min<uint64_t>(buffer_.size(), remaining));
  buffer_.consume(take);
  remaining -= take;
  if (remaining == 0) {
    StartEarlyResponse();
    return;
  }
  body_expected_ = remaining;  // left to discard
  phase_ = Phase::kDiscard;
  SetDeadline(Clock::now() + shared_->options.body_timeout);
  DiscardMore();
}

template <class Stream>
void BasicHttpConnection<Stream>::StartEarlyResponse() {
  HttpResponse response = std::move(*early_response_);
  early_response_.reset();
  StartWrite(std::move(response));
}

template <class Stream>
void BasicHttpConnection<Stream>::DiscardMore() {
  // The buffer is empty here (what came with the header was consumed); never read past the
  // body, so a pipelined next request stays on the socket.
  const auto on_read = [self = this->shared_from_this()](const error_code& ec, std::size_t n) {
    self->OnDiscardRead(ec, n);
  };
  if constexpr (std::is_same_v<Stream, TcpStream>) {
    // MSG_TRUNC: the kernel drops the bytes instead of copying them (tcp(7)); the buffer is
    // never written.
    const std::size_t want =
        static_cast<std::size_t>(std::min<uint64_t>(body_expected_, kDiscardChunk));
    socket_.async_receive(asio::buffer(io_->discard_sink.get(), want), MSG_TRUNC, on_read);
  } else {  // TLS: the bytes must be decrypted to find the body's end
    const std::size_t want =
        static_cast<std::size_t>(std::min<uint64_t>(body_expected_, kReadChunk));
    socket_.async_read_some(buffer_.prepare(want), on_read);
  }
}

template <class Stream>
void BasicHttpConnection<Stream>::OnDiscardRead(const error_code& ec, std::size_t n) {
  if (phase_ != Phase::kDiscard) return;  // timed out, or closed
  if (ec) {
    spdlog::debug("http: connection ended inside a refused request's body: {}", ec.message());
    Close();
    return;
  }
  body_expected_ -= std::min<uint64_t>(n, body_expected_);  // not committed: thrown away
  if (body_expected_ == 0) {
    StartEarlyResponse();
    return;
  }
  SetDeadline(Clock::now() + shared_->options.body_timeout);
  DiscardMore();
}

template <class Stream>
void BasicHttpConnection<Stream>::ParseChunked() {
  for (;;) {
    if (buffer_.size() == 0) {
      // Every read that leaves the body incomplete is charged, whatever the parser stopped in
      // (probe 75: charged only inside a chunk-size line, one large chunk was never charged).
      if (!ChargeIncoming(body_.size())) return;
      ReadMore();
      return;
    }
    error_code ec;
    const std::size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec == http::error::need_more) {
      if (!ChargeIncoming(body_.size())) return;
      // Beast keeps a chunk-size line with its extensions, and the trailer section, until they
      // end, whatever their length: its header limit covers the header section only, its body
      // limit the chunks' data. Bounded here by the header's limit (RFC 9112 §7.1.1 and §7.1.2:
      // a server ought to limit them; probe 57: one connection held 400 MB).
      if (buffer_.size() > shared_->options.max_header_bytes) {
        std::string message =
            "a chunk-size line with its extensions, or the trailer section, is larger than the "
            "server's limit of ";
        AppendNumber(&message, shared_->options.max_header_bytes);
        message += " bytes";
        SendError(400, message);
        return;
      }
      ReadMore();
      return;
    }
    if (ec) {
      FailParse(ec);
      return;
    }
    if (parser_->is_done()) {
      Dispatch();
      return;
    }
    if (used == 0) {
      if (!ChargeIncoming(body_.size())) return;
      ReadMore();
      return;
    }
  }
}

template <class Stream>
std::size_t BasicHttpConnection<Stream>::NextBodyWindow() const {
  return static_cast<std::size_t>(std::min<uint64_t>(body_expected_ - body_received_, kBodyWindow));
}

template <class Stream>
void BasicHttpConnection<Stream>::ReadBodyDirect() {
  const std::size_t window = NextBodyWindow();
  // What the resize below touches (it zero-fills the window) is what the body holds: charged
  // before it is allocated (probe 75: charging only the bytes received left 4 MiB per
  // connection outside the budget).
  if (!ChargeIncoming(body_received_ + window)) return;
  body_.resize(static_cast<std::size_t>(body_received_) + window);
  socket_.async_read_some(asio::buffer(body_.data() + body_received_, window),
                          [self = this->shared_from_this()](const error_code& ec, std::size_t n) {
                            self->OnBodyRead(ec, n);
                          });
}

template <class Stream>
void BasicHttpConnection<Stream>::OnBodyRead(const error_code& ec, std::size_t n) {
  if (phase_ != Phase::kBody) return;  // cancelled by a timeout, or closed
  if (ec) {
    if (ec == asio::error::eof) {
      SendError(400, "the connection was closed before the request body was complete");
      return;
    }
    spdlog::debug("http: connection ended inside a request body: {}", ec.message());
    Close();
    return;
  }
  body_received_ += n;
  body_.resize(static_cast<std::size_t>(body_received_));
  if (body_received_ == body_expected_) {
    Dispatch();
    return;
  }
  SetDeadline(Clock::now() + shared_->options.body_timeout);
  ReadBodyDirect();
}

// Holds `bytes` of the body that is still arriving against the server-wide budget; past it,
// answers 503 with Retry-After and closes (SendError: the rest of the body is drained while the
// answer lingers, never stored). False when it refused.
template <class Stream>
bool BasicHttpConnection<Stream>::ChargeIncoming(uint64_t bytes) {
  if (incoming_.GrowTo(bytes)) return true;
  incoming_.Clear();
  LogIncomingRefusal(*shared_);
  // The access record counts the body bytes read, as SendError's does, not the window.
  const uint64_t read = parser_ && parser_->chunked() ? body_.size() : body_received_;
  HttpResponse response =
      IncomingBodiesRefusal(*shared_->options.incoming_bodies, "Content-Type", request_, read,
                            shared_->options.access_log, shared_->handler);
  SendResponseAndClose(std::move(response));
  return false;
}

template <class Stream>
void BasicHttpConnection<Stream>::SendContinue() {
  continue_sent_ = true;
  asio::async_write(socket_, asio::buffer(kContinue.data(), kContinue.size()),
                    [self = this->shared_from_this()](const error_code& ec, std::size_t) {
                      if (self->phase_ != Phase::kBody) return;  // timed out, or closed
                      if (ec) {
                        self->Close();
                        return;
                      }
                      if (self->parser_->chunked()) {
                        self->ParseChunked();
                      } else {
                        self->ReadBodyDirect();
                      }
                    });
}

template <class Stream>
void BasicHttpConnection<Stream>::FailParse(const error_code& ec) {
  std::string message;
  if (parser_ && parser_->refusal()) {  // a rule of RFC 9112 that Beast does not enforce
    message = parser_->refusal()->message;
    SendError(parser_->refusal()->status, message);
  } else if (ec == http::error::body_limit) {
    // Triton's words (its QA tests match them); Harrier's status stays 413.
    message = "Request JSON size exceeds the maximum allowed value of ";
    AppendNumber(&message, shared_->options.max_body_bytes);
    message += " bytes. Use --http-max-input-size to increase the limit";
    SendError(413, message);
  } else if (ec == http::error::bad_version &&
             UnsupportedHttpVersion(
                 {static_cast<const char*>(buffer_.data().data()), buffer_.data().size()})) {
    // A client that chose http/1.1 by ALPN and then sent the HTTP/2 preface meets this too.
    SendError(505,
              "only HTTP/1.0 and HTTP/1.1 are spoken on an HTTP/1.1 connection: HTTP/2 over TLS "
              "needs ALPN h2; in clear, the preface or Upgrade: h2c");
  } else if (ec == http::error::header_limit) {
    if (request_.target.empty()) {
      const auto data = buffer_.data();
      const std::string_view read(
          static_cast<const char*>(data.data()),
          std::min<std::size_t>(data.size(), shared_->options.max_header_bytes));
      RequestLineOf(read, &request_.method, &request_.target);
    }
    message = "request line and headers are larger than the server's limit of ";
    AppendNumber(&message, shared_->options.max_header_bytes);
    message += " bytes";
    SendError(431, message);
  } else {
    SendError(400, "malformed HTTP request: " + ec.message());
  }
}

template <class Stream>
void BasicHttpConnection<Stream>::SendError(int status, std::string_view message) {
  spdlog::debug("http: answering {} and closing: {}", status, message);
  // Body bytes read so far: a chunked body is assembled in body_; a Content-Length body is
  // read into body_ too, but body_ is sized ahead of each read, so body_received_ counts it.
  const uint64_t body_bytes =
      parser_ && parser_->is_header_done() && parser_->chunked() ? body_.size() : body_received_;
  SendResponseAndClose(TransportErrorResponse(status, message, "Content-Type", request_, body_bytes,
                                              shared_->options.access_log, shared_->handler));
}

template <class Stream>
void BasicHttpConnection<Stream>::SendResponseAndClose(HttpResponse response) {
  incoming_.Clear();
  close_after_response_ = true;
  linger_on_close_ = true;  // the rest of the request may still be on its way
  head_request_ = false;
  StartWrite(std::move(response));
}

// ---- Handing the request over -----------------------------------------------------------

template <class Stream>
void BasicHttpConnection<Stream>::Dispatch() {
  incoming_.Clear();  // the in-flight limit counts it from here
  if (request_.body_received_at == Clock::time_point{}) request_.body_received_at = Clock::now();
  if (MaybeUpgrade()) return;
  phase_ = Phase::kHandling;
  ClearDeadline();  // the handler's time is the scheduler's business, not a read timeout
  cancellation_ =
      std::allocate_shared<CancellationToken>(PoolAllocator<CancellationToken>(io_->token_pool));
  request_.cancellation = cancellation_;
  if (body_.empty()) {
    request_.body = EmptyBody();
  } else {
    if (body_.capacity() < body_.size() + kBodyPadding) body_.reserve(body_.size() + kBodyPadding);
    request_.body = HoldBody();
  }
  parser_.reset();

  request_.sole_requester =
      io_->NoteRequest(this, request_.body_received_at, shared_->options.sole_requester_window);
  HttpResponder responder(Responder{this->weak_from_this(), io_->shared_from_this(), sequence_});
  in_handler_ = true;
  try {
    shared_->handler->Handle(std::move(request_), std::move(responder));
  } catch (const std::exception& e) {
    spdlog::error("http: handler threw: {}", e.what());
    if (phase_ == Phase::kHandling && !inline_response_) {
      HttpResponse error;
      error.status = 500;
      error.headers.emplace_back("Content-Type", "application/json");
      error.body = "{\"error\":\"internal error\"}";
      inline_response_.emplace(std::move(error));
      close_after_response_ = true;
    }
  }
  in_handler_ = false;
  if (inline_response_) {
    HttpResponse response = std::move(*inline_response_);
    inline_response_.reset();
    StartWrite(std::move(response));
    return;
  }
  if (phase_ == Phase::kHandling) WatchForDisconnect();
}

template <class Stream>
std::shared_ptr<const std::string> BasicHttpConnection<Stream>::HoldBody() {
  // A holder nobody else holds any more (the last request's is often still with the model's
  // worker, which lets go of it just after its answer); else a new one in the next slot, the old
  // one freed by its last holder.
  std::shared_ptr<std::string>* holder = nullptr;
  for (auto& h : body_holders_) {
    if (h != nullptr && h.use_count() == 1) {
      holder = &h;
      break;
    }
  }
  if (holder != nullptr) {
    // The relaxed count read plus this fence order the other holders' last reads (their
    // releasing decrements) before the swap below writes the string.
    std::atomic_thread_fence(std::memory_order_acquire);
  } else {
    holder = &body_holders_[next_body_holder_];
    next_body_holder_ = (next_body_holder_ + 1) % body_holders_.size();
    *holder = std::make_shared<std::string>();
  }
  // The body moves into the holder; body_ takes the holder's old string (an earlier body, with
  // its capacity) for the next request to read into.
  (*holder)->swap(body_);
  body_.clear();
  return *holder;
}

template <class Stream>
void BasicHttpConnection<Stream>::WatchForDisconnect() {
  if (buffer_.size() >= kWatchBufferBytes) return;  // a lot pipelined: the client is there
  watch_pending_ = true;
  socket_.async_read_some(buffer_.prepare(kReadChunk),
                          [self = this->shared_from_this()](const error_code& ec, std::size_t n) {
                            self->OnWatchRead(ec, n);
                          });
}

// Stops the watch of a connection that closes after its response. The read's handler still
// runs (aborted, or with bytes it already read); OnWriteDone waits for it before it lingers or
// closes (Linger reads the socket itself, and bytes the watch read decide whether it lingers).
template <class Stream>
void BasicHttpConnection<Stream>::CancelWatch() {
  if (!watch_pending_) return;
  error_code ignored;
  socket_.lowest_layer().cancel(ignored);
}

template <class Stream>
void BasicHttpConnection<Stream>::OnWatchRead(const error_code& ec, std::size_t n) {
  watch_pending_ = false;
  if (phase_ == Phase::kClosed) return;
  if (parse_after_watch_) {  // stopped for a pipelined request (StartRequest)
    parse_after_watch_ = false;
    if (n > 0) buffer_.commit(n);
    // An error or the client's EOF comes back from the next read, if the request needs one.
    if (phase_ == Phase::kHeader) Parse();  // else a timeout answered it meanwhile
    return;
  }
  if (phase_ == Phase::kIdle) {  // the response is out: this is the next request's read
    OnRead(ec, n);
    return;
  }
  if (n > 0) buffer_.commit(n);  // a pipelined request: parsed after this response
  const bool client_gone = ec && ec != asio::error::operation_aborted;
  if (phase_ == Phase::kHandling) {
    if (client_gone) {
      spdlog::debug("http: client went away while its request was handled ({}); cancelling it",
                    ec.message());
      Close();  // cancels the token; the response, when it comes, is dropped
      return;
    }
    if (!ec) WatchForDisconnect();
    return;
  }
  if (stream_ && !resume_after_watch_) {  // a streamed response's body is still coming
    if (client_gone) {
      spdlog::debug("http: client went away during a streamed response ({}); cancelling it",
                    ec.message());
      Close();  // cancels the token and abandons the stream
      return;
    }
    if (!ec) WatchForDisconnect();  // bytes of a pipelined request: keep watching
    return;
  }
  // The response is being written (or is written): finish it, then close if the client left.
  if (client_gone) close_after_response_ = true;
  if (resume_after_watch_) {
    resume_after_watch_ = false;
    OnWriteDone();
  }
}

template <class Stream>
void BasicHttpConnection<Stream>::Responder::operator()(HttpResponse&& response) const {
  if (io->ioc.get_executor().running_in_this_thread()) {
    if (auto c = connection.lock()) {
      c->OnResponse(sequence, std::move(response));
    } else {
      spdlog::debug("http: dropping a response: its connection is closed");
      ReportSent(&response, false, {});
    }
    return;
  }
  // After the server stopped this lands in a stopped io_context and is destroyed with it; it
  // holds only a weak reference, so nothing is kept alive in a cycle. Its memory comes from the
  // I/O thread's post pool: Asio recycles a handler's memory only on its own threads, and this
  // is most often a model's worker (issue 10). (PostCoalesced, which streamed parts use, was
  // tried here: no difference at 1 or 16 connections, docs/benchmarks.md; a busy thread takes an
  // asio::post without a wake-up, where a drained coalescing queue makes the next response pay
  // an eventfd write and two reads.) The response itself waits in a block of the same pool, so
  // that Asio's moves of the handler do not copy it (PoolBox).
  asio::post(io->ioc,
             PooledHandler(io->post_pool, [connection = connection, sequence = sequence,
                                           response = PoolBox<HttpResponse>::Make(
                                               io->post_pool, std::move(response))]() mutable {
               if (auto c = connection.lock()) {
                 c->OnResponse(sequence, std::move(*response));
               } else {
                 spdlog::debug("http: dropping a response: its connection is closed");
                 ReportSent(&*response, false, {});
               }
             }));
}

template <class Stream>
void BasicHttpConnection<Stream>::OnResponse(uint64_t sequence, HttpResponse&& response) {
  // Closed meanwhile (client gone, timeout, Stop), or a second call: drop it.
  if (phase_ != Phase::kHandling || sequence != sequence_) {
    if (phase_ == Phase::kClosed) spdlog::debug("http: dropping a response: connection closed");
    ReportSent(&response, false, {});
    return;
  }
  if (in_handler_) {  // answered inside Handle(): write once Handle() has returned
    if (!inline_response_) {
      inline_response_.emplace(std::move(response));
    } else {
      ReportSent(&response, false, {});  // a second answer: dropped
    }
    return;
  }
  // The watch keeps reading while the response is written: a client that leaves meanwhile
  // closes the connection after it, a pipelined request's bytes wait in the buffer, and once
  // the response is out the same read waits for the next request (StartRequest).
  StartWrite(std::move(response));
}

// ---- Writing the response ----------------------------------------------------------------

template <class Stream>
void BasicHttpConnection<Stream>::FormatHead() {
  // Literals as string_views: `+= "..."` would measure each with strlen (13 per response).
  using namespace std::string_view_literals;
  int status = response_.status;
  if (status < 200 || status > 599) {
    spdlog::error("http: handler returned status {}; sending 500", status);
    status = 500;
    response_.body = "{\"error\":\"internal error\"}";
    if (stream_) AbandonStream();
  }
  const bool no_body = status == 204 || status == 304;
  if (no_body && stream_) AbandonStream();
  head_.clear();
  head_ += "HTTP/1.1 "sv;
  AppendNumber(&head_, static_cast<uint64_t>(status));
  head_ += ' ';
  auto reason = http::obsolete_reason(static_cast<http::status>(status));
  head_.append(reason.data(), reason.size());
  head_ += "\r\n"sv;
  for (const auto& [name, value] : response_.headers) {
    if (IsFramingHeader(name)) continue;
    head_ += name;
    head_ += ": "sv;
    head_ += value;
    head_ += "\r\n"sv;
  }
  if (no_body) {
    response_.body.clear();
  } else if (stream_) {
    if (!http10_) head_ += "Transfer-Encoding: chunked\r\n"sv;  // HTTP/1.0: the close ends it
  } else {
    head_ += "Content-Length: "sv;
    AppendNumber(&head_, response_.body.size());
    head_ += "\r\n"sv;
  }
  if (close_after_response_) {
    head_ += "Connection: close\r\n"sv;
  } else if (http10_) {
    head_ += "Connection: keep-alive\r\n"sv;
  }
  head_ += DateHeader();
  head_ += "\r\n"sv;
}

template <class Stream>
void BasicHttpConnection<Stream>::StartWrite(HttpResponse&& response) {
  response_ = std::move(response);
  if (shared_->stopping.load(std::memory_order_relaxed)) close_after_response_ = true;
  if (response_.stream) {
    stream_ = std::move(response_.stream);
    if (http10_) close_after_response_ = true;
    stream_->Attach(
        [connection = this->weak_from_this(), io = io_->shared_from_this(), sequence = sequence_] {
          io->PostCoalesced([connection, sequence] {
            auto c = connection.lock();
            if (c && c->stream_ && !c->stream_writing_ && c->sequence_ == sequence) c->PumpStream();
          });
        });
  }
  FormatHead();
  if (stream_ && head_request_) AbandonStream();
  out_[0] = asio::buffer(head_);
  out_[1] = head_request_ || stream_ ? asio::const_buffer() : asio::buffer(response_.body);
  phase_ = Phase::kWriting;
  SetDeadline(Clock::now() + shared_->options.write_timeout);
  WriteSome();
}

template <class Stream>
void BasicHttpConnection<Stream>::WriteSome() {
  // One gather write (sendmsg with two iovecs) for header and body; Asio tries it at once, so a
  // response that fits the socket buffer costs one system call.
  // Its operation's memory from the thread's pool: with responses posted from a worker through
  // that pool too, Asio's per-thread cache no longer has a block for it (issue 10).
  socket_.async_write_some(
      out_, PooledHandler(io_->post_pool,
                          [self = this->shared_from_this()](const error_code& ec, std::size_t n) {
                            self->OnWrite(ec, n);
                          }));
}

// A write's completion: true when the connection is closed (by now, or by this failed write:
// the client is gone, most likely), and the completion has nothing left to do.
template <class Stream>
bool BasicHttpConnection<Stream>::EndedByWriteError(const error_code& ec) {
  if (phase_ == Phase::kClosed) return true;
  if (!ec) return false;
  spdlog::debug("http: write failed (client gone?): {}", ec.message());
  Close();
  return true;
}

template <class Stream>
void BasicHttpConnection<Stream>::OnWrite(const error_code& ec, std::size_t n) {
  if (EndedByWriteError(ec)) return;
  for (auto& b : out_) {
    const std::size_t k = std::min(n, b.size());
    b += k;
    n -= k;
  }
  if (out_[0].size() + out_[1].size() > 0) {
    SetDeadline(Clock::now() + shared_->options.write_timeout);
    WriteSome();
    return;
  }
  if (stream_) {  // the head of a streamed response is out: now its body
    PumpStream();
    return;
  }
  OnWriteDone();
}

// ---- Streamed responses ------------------------------------------------------------------

template <class Stream>
void BasicHttpConnection<Stream>::PumpStream() {
  stream_->Take(&stream_taken_);
  if (stream_taken_.empty()) {
    // The producer's turn (it wakes us through the stream). Its pace is its own business: no
    // deadline, but a client that leaves meanwhile is noticed.
    ClearDeadline();
    if (!watch_pending_) WatchForDisconnect();
    return;
  }
  // Everything taken goes out as one chunk (the parts' boundaries mean nothing to the body):
  // one gather write of its size line, its bytes and its end, the last chunk after it when the
  // stream is finished (no trailers over HTTP/1.1). HTTP/1.0 has no chunks: the close ends it.
  static constexpr std::string_view kChunkEnd = "\r\n";
  static constexpr std::string_view kChunkEndAndLast = "\r\n0\r\n\r\n";
  static constexpr std::string_view kLastChunk = "0\r\n\r\n";
  const std::string& bytes = stream_taken_.bytes;
  stream_finishing_ = stream_taken_.finished;
  stream_out_.fill(asio::const_buffer());
  if (http10_) {
    stream_out_[1] = asio::buffer(bytes);
  } else if (!bytes.empty()) {
    char* const end = std::to_chars(stream_chunk_size_,
                                    stream_chunk_size_ + 2 * sizeof(std::size_t), bytes.size(), 16)
                          .ptr;
    end[0] = '\r';
    end[1] = '\n';
    stream_out_[0] =
        asio::buffer(stream_chunk_size_, static_cast<std::size_t>(end + 2 - stream_chunk_size_));
    stream_out_[1] = asio::buffer(bytes);
    stream_out_[2] = asio::buffer(stream_finishing_ ? kChunkEndAndLast : kChunkEnd);
  } else if (stream_finishing_) {
    stream_out_[2] = asio::buffer(kLastChunk);
  }
  if (asio::buffer_size(stream_out_) == 0) {  // reports only, or the end of an HTTP/1.0 body
    stream_->Complete(stream_taken_, true);
    if (stream_finishing_) {
      EndStream();
      return;
    }
    PumpStream();
    return;
  }
  stream_writing_ = true;
  SetDeadline(Clock::now() + shared_->options.write_timeout);
  StreamWriteSome();
}

template <class Stream>
void BasicHttpConnection<Stream>::StreamWriteSome() {
  socket_.async_write_some(stream_out_,
                           [self = this->shared_from_this()](const error_code& ec, std::size_t n) {
                             self->OnStreamWrite(ec, n);
                           });
}

template <class Stream>
void BasicHttpConnection<Stream>::OnStreamWrite(const error_code& ec, std::size_t n) {
  if (EndedByWriteError(ec)) return;
  for (auto& b : stream_out_) {
    const std::size_t k = std::min(n, b.size());
    b += k;
    n -= k;
  }
  if (asio::buffer_size(stream_out_) > 0) {
    SetDeadline(Clock::now() + shared_->options.write_timeout);
    StreamWriteSome();
    return;
  }
  stream_writing_ = false;
  stream_->Complete(stream_taken_, true);
  if (stream_finishing_) {
    EndStream();
    return;
  }
  PumpStream();
}

// The streamed body is out. Its buffer stays for the connection's next stream unless a burst
// (a resumed stream's replay, say) made it large.
template <class Stream>
void BasicHttpConnection<Stream>::EndStream() {
  constexpr std::size_t kKeptBufferBytes = 64 * 1024;
  if (stream_taken_.bytes.capacity() > kKeptBufferBytes) std::string().swap(stream_taken_.bytes);
  stream_finishing_ = false;
  stream_.reset();
  OnWriteDone();
}

// The client is gone or the response cannot go on: the parts in flight and queued report false.
template <class Stream>
void BasicHttpConnection<Stream>::AbandonStream() {
  auto stream = std::move(stream_);
  stream_.reset();
  stream->Abandon();
  stream->Complete(stream_taken_, false);
  stream_writing_ = false;
  stream_finishing_ = false;
}

template <class Stream>
void BasicHttpConnection<Stream>::OnWriteDone() {
  // The last byte is with the kernel (for TLS: encrypted and written). Reported before the next
  // request is read, so a pipelined request's receipt never precedes this one's send.
  ReportSent(&response_, true, Clock::now());
  response_ = HttpResponse{};
  if (watch_pending_ && close_after_response_) {
    // Closing: OnWatchRead calls back once the cancelled read has finished (see CancelWatch).
    // Kept alive, the read carries on into the next request.
    resume_after_watch_ = true;
    CancelWatch();
    return;
  }
  cancellation_.reset();
  if (close_after_response_) {
    if (linger_on_close_ || buffer_.size() > 0) {
      Linger();
    } else {
      // TLS: a clean close (close_notify) so that the client can tell the end of the response
      // from a truncation.
      CloseGracefully();
    }
    return;
  }
  first_request_ = false;
  StartRequest();
}

// Bytes the kernel holds for this connection that no read has taken yet (for TLS, raw record
// bytes: enough to tell that the client has started a request).
template <class Stream>
bool BasicHttpConnection<Stream>::InputWaiting() {
  error_code ec;
  return Tcp().available(ec) > 0 && !ec;
}

// Ends a connection on the server's initiative with nothing (more) to say: at once for TCP; for
// TLS, close_notify first (the client can then tell a clean end from a truncation), and the
// close once the client answers it or after kTlsCloseNotifyWait (at most linger_timeout). Never
// blocks. async_shutdown may run beside a pending read (Asio's SSL stream serialises transport
// reads; that read's handler then sees a non-reading phase and returns), never beside a write:
// every caller runs with no write in flight (Asio would lose the close_notify otherwise).
template <class Stream>
void BasicHttpConnection<Stream>::CloseGracefully() {
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kLinger;
    SetDeadline(Clock::now() + std::min(shared_->options.linger_timeout,
                                        std::chrono::milliseconds(kTlsCloseNotifyWait)));
    socket_.async_shutdown([self = this->shared_from_this()](const error_code&) { self->Close(); });
  } else {
    Close();
  }
}

// Closing right away with unread input makes the kernel send a reset, which can destroy the
// response before the client reads it; so shut the send side and drain for a while first. TLS
// sends close_notify before the send side is shut; the drain then reads the raw socket (the
// bytes are thrown away, so there is no point in decrypting them).
template <class Stream>
void BasicHttpConnection<Stream>::Linger() {
  phase_ = Phase::kLinger;
  SetDeadline(Clock::now() + shared_->options.linger_timeout);
  buffer_.clear();
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    socket_.async_shutdown([self = this->shared_from_this()](const error_code& ec) {
      if (self->phase_ == Phase::kClosed) return;
      if (!ec) {  // the client answered with its own close_notify: nothing more will come
        self->Close();
        return;
      }
      self->DrainRaw();
    });
    return;
  }
  DrainRaw();
}

template <class Stream>
void BasicHttpConnection<Stream>::DrainRaw() {
  error_code ignored;
  socket_.lowest_layer().shutdown(asio::socket_base::shutdown_send, ignored);
  OnLingerRead({});
}

template <class Stream>
void BasicHttpConnection<Stream>::OnLingerRead(const error_code& ec) {
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    Close();
    return;
  }
  // Thrown away by the kernel (MSG_TRUNC), never copied.
  Tcp().async_receive(asio::buffer(io_->discard_sink.get(), kDiscardChunk), MSG_TRUNC,
                      [self = this->shared_from_this()](const error_code& ec2, std::size_t) {
                        self->OnLingerRead(ec2);
                      });
}

// ---- Deadlines ---------------------------------------------------------------------------

template <class Stream>
void BasicHttpConnection<Stream>::SetDeadline(Clock::time_point deadline) {
  deadline_ = deadline;
  write_probe_ = false;
  if (!timer_armed_ || deadline < timer_at_) ArmTimer(deadline);
}

template <class Stream>
void BasicHttpConnection<Stream>::ArmTimer(Clock::time_point at) {
  timer_at_ = at;
  timer_armed_ = true;
  const uint64_t generation = ++timer_generation_;
  timer_.expires_at(at);  // cancels a pending wait; its handler sees a stale generation
  timer_.async_wait([self = this->shared_from_this(), generation](const error_code& ec) {
    self->OnTimer(generation, ec);
  });
}

template <class Stream>
void BasicHttpConnection<Stream>::OnTimer(uint64_t generation, const error_code&) {
  if (generation != timer_generation_ || phase_ == Phase::kClosed) return;
  timer_armed_ = false;
  if (deadline_ == Clock::time_point::max()) return;  // handling: no read/write deadline
  if (Clock::now() < deadline_) {
    ArmTimer(deadline_);  // the deadline moved later since the timer was set
    return;
  }
  if (phase_ == Phase::kHeader || phase_ == Phase::kBody) {
    // Part of a request came, the rest did not: cancel the read and say so (408). A client that
    // is not reading either is cut off by the write timeout.
    error_code ignored;
    socket_.lowest_layer().cancel(ignored);
    if (phase_ == Phase::kHeader && parser_ && parser_->got_some() &&
        request_.Header("x-request-id").empty()) {
      const auto data = buffer_.data();
      const std::string_view id =
          RequestIdLineOf({static_cast<const char*>(data.data()), data.size()});
      if (!id.empty()) request_.headers.push_back({"x-request-id", std::string(id)});
    }
    SendError(408, phase_ == Phase::kHeader
                       ? "the request header was not received within the header timeout"
                       : "the request body stalled for longer than the body timeout");
    return;
  }
  if (phase_ == Phase::kRefusalHold) {  // the hold is over: answer the refusal
    AnswerEarly();
    return;
  }
  if (phase_ == Phase::kIdle || phase_ == Phase::kDiscard) {
    // Idle keep-alive (or silent fresh) connection, or a refused body that stalled: nothing to
    // answer; TLS still says goodbye with close_notify.
    CloseGracefully();
    return;
  }
  if (phase_ == Phase::kWriting) {
    // No write progressed for the timeout. A client that reads slowly but steadily still
    // acknowledges bytes, though the kernel wakes a blocked writer only once half its send
    // buffer has drained (tcp_progress.h): sampled now and a moment later, it gets another
    // timeout if the count moved.
    if (const std::optional<uint64_t> acked = BytesAcked(socket_.lowest_layer().native_handle())) {
      if (!write_probe_) {
        write_probe_ = true;
        acked_seen_ = *acked;
        deadline_ = Clock::now() + std::min<Clock::duration>(std::chrono::seconds(1),
                                                             shared_->options.write_timeout / 4);
        ArmTimer(deadline_);
        return;
      }
      if (*acked != acked_seen_) {
        SetDeadline(Clock::now() + shared_->options.write_timeout);
        return;
      }
    }
    // The client is not reading (a close_notify would not get through either): close now.
    spdlog::debug("http: closing connection: write timeout");
  }
  // Or lingering after an error or a close_notify: close now.
  Close();
}

template class BasicHttpConnection<TcpStream>;
template class BasicHttpConnection<TlsStream>;

}  // namespace harrier::server_internal
