// HttpFuzzHarness: the HTTP server's own connection classes fed a libFuzzer input over a real
// loopback TCP connection, with everything (server side and client side) on the fuzzer's thread,
// so that one input is one reproducible exchange.
//
// Exchange() is one client connection. The harness accepts it and hands the server's end to a
// BasicHttpConnection<TcpStream> (server/http_connection.h), as HttpServer's acceptor does; that
// class hands a connection that starts with the HTTP/2 preface, or asks for `Upgrade: h2c`, to
// Http2Connection (server/http2_connection.h), as in the server. The client then writes the
// input chunk by chunk; after each chunk the io_context runs until nothing is ready any more (the
// server waits for bytes, or for the handler), so each chunk is one read on the server's side.
// Then the client half-closes and the harness runs until the server has closed the connection.
// Only the public members of the connection class, IoThread and ServerShared are used; no server
// code is copied or changed.
//
// The handler answers by the request's path, so that inputs reach every way a handler answers:
//   Precheck: /refuse...  429 from the header alone (the body is discarded or the stream reset)
//   Handle:   /throw...   throws (the transport answers 500)
//             /twice...   answers twice (the second answer is dropped)
//             /status/N   status N, whatever N is (out of 200..599: the transport sends 500)
//             /defer...   answered later, from outside the io_context (posted to the I/O thread):
//                         after the next chunk, or after the client's half-close for the last
//             otherwise   200, the request body echoed back
// Every answer also carries framing headers the transport must drop (Content-Length,
// Connection, Transfer-Encoding, Upgrade, Keep-Alive) and echoes the request's `x-echo` header.
//
// Findings besides the sanitizers' (each aborts with a message, so libFuzzer keeps the input):
//   - a request handed to Handle() breaks HttpRequest's contract: a null body or one without
//     kBodyPadding spare bytes, an upper-case header name, no method, no version, no
//     cancellation token, or receipt times missing or out of order; a Precheck head with a body
//     or a token;
//   - a response's on_sent called twice, with a time when not sent (or none when sent), or never
//     by the time its connection is gone; a request whose connection closed before its answer
//     whose token was not cancelled;
//   - an access record for a status the transport does not refuse with itself, or with a
//     request id a client could not have sent and the server would not generate;
//   - the server keeping the connection open 10 s after the client closed its side.
//
// Not thread safe: one harness per fuzzer process, used from libFuzzer's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "server/http_server.h"
#include "server/io_thread.h"
#include "server/tls.h"

namespace harrier::fuzz {

// How one input is sent.
struct ExchangeOptions {
  // 0: the input in one write. Else the first kMaxChunks chunks of this many bytes, then the
  // rest in one write.
  std::size_t chunk_bytes = 0;
  // After the first chunk, the server begins to stop (HttpServer::Stop's first step: every
  // connection's OnServerStopping()).
  bool stop_after_first_chunk = false;
  // Every request is answered as /defer... is.
  bool defer_all = false;

  static constexpr std::size_t kMaxChunks = 32;

  // The HTTP targets' first input byte: bits 0-2 choose chunk_bytes (0, 1, 2, 3, 7, 16, 64 or
  // 500), bit 3 stop_after_first_chunk, bit 4 defer_all; the other bits are ignored.
  static ExchangeOptions FromByte(uint8_t byte);
};

// Limits small enough for inputs of a few KiB to pass them (413, 431, flow control); the
// timeouts are HttpServer's defaults, far longer than an exchange.
HttpServer::Options FuzzServerOptions();

class HttpFuzzHarness {
 public:
  // Listens on 127.0.0.1 (a free port). Silences spdlog unless HARRIER_FUZZ_LOG names a level
  // ("debug" shows why the server closed a connection when reproducing a finding). With
  // HARRIER_FUZZ_SHOW_RESPONSES set, what the server writes is copied to stderr.
  explicit HttpFuzzHarness(const HttpServer::Options& options);
  ~HttpFuzzHarness();
  HttpFuzzHarness(const HttpFuzzHarness&) = delete;
  HttpFuzzHarness& operator=(const HttpFuzzHarness&) = delete;

  // One connection: `prologue` in a write of its own (not chunked), then `input` as `options`
  // say, then the client's half-close; returns once the server has closed the connection and
  // every operation on it has finished.
  void Exchange(std::string_view prologue, std::string_view input, const ExchangeOptions& options);

 private:
  class Handler;
  class CountingAccessLog;
  using Acceptor = boost::asio::basic_socket_acceptor<boost::asio::ip::tcp,
                                                      boost::asio::io_context::executor_type>;

  void Send(std::string_view bytes);
  void Pump();
  void BeginStop();
  void Finish();

  std::shared_ptr<server_internal::IoThread> io_;
  server_internal::ServerShared shared_;
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<CountingAccessLog> access_log_;
  Acceptor acceptor_;

  // The exchange in progress.
  std::unique_ptr<server_internal::TcpStream> client_;
  std::string unsent_;       // input the server has not taken yet
  bool client_eof_ = false;  // the server closed (or reset) its side
  std::string sink_;         // the server's output, read and thrown away
  bool show_responses_ = false;
};

}  // namespace harrier::fuzz
