// HttpServer: Harrier's HTTP front end: HTTP/1.1 (Boost.Asio + Beast's parser) and HTTP/2
// (nghttp2; h2c on the plain port, h2 over TLS by ALPN), both on the same I/O threads and
// handing requests to the same HttpHandler.
//
// It accepts TCP connections, parses requests into harrier::HttpRequest, hands each one to an
// HttpHandler and writes the handler's HttpResponse back. It knows nothing about KServe.
//
// Threading: `io_threads` threads, each running its own io_context. One acceptor (on the first
// thread) hands accepted sockets round-robin to the threads; a connection then lives on its
// thread for good, and only that thread touches its socket. The handler is called on the
// connection's thread and must not block; its HttpResponder may be called from any thread (the
// response is posted back to the connection's thread, or dropped if the connection is gone).
//
// Per connection: one request at a time (pipelined requests wait in the read buffer; the socket
// is still read while a request is handled, so that a client that closes or resets the
// connection cancels its request's CancellationToken and the late response is dropped), keep-alive
// (HTTP/1.1 default, HTTP/1.0 with `Connection: keep-alive`), Content-Length and chunked bodies,
// `Expect: 100-continue`. Protocol errors are answered and the connection closed:
//   400 malformed request line, header, chunk or Content-Length; HTTP/1.1 without Host (or two
//       Host fields, or an invalid value); obs-fold; Transfer-Encoding not ending in one
//       `chunked` (RFC 9112); a chunk-size line (with its extensions) or trailer section over
//       max_header_bytes
//   501 a transfer coding before the final `chunked` (only chunked is decoded)
//   413 body over max_body_bytes (a Content-Length claim is refused before reading the body)
//   431 request line + headers over max_header_bytes
//   408 part of a request arrived but the rest did not within header_timeout / body_timeout
//   400 the client half-closed the connection in the middle of a request
// Error bodies are `{"error": "..."}` and carry X-Request-Id (the request's own when it was read
// and is acceptable, else a generated one; core/request_id.h). With Options::access_log each of
// these answers is also one access record. A connection idle between requests (or silent since
// the accept) is closed without a response, and without a record, when its timeout passes.
//
// Empty lines before a request line are skipped (RFC 9112 §2.2); an absolute-form target is
// served as its path (§3.2.2); a chunked body's trailer fields are dropped.
//
// HTTP/2 (server/http2_connection.h): a plain connection that starts with the HTTP/2 preface, or
// (with Options::h2c_upgrade) an HTTP/1.1 request with `Upgrade: h2c`, continues as HTTP/2 on
// the same thread; with a TLS
// certificate a second listener serves h2 or HTTP/1.1 by ALPN (server/tls.h). The limits and
// timeouts below apply per stream there; Stop() sends GOAWAY and lets open streams finish.
// Handlers see the same HttpRequest whichever the transport, and Precheck() is called after
// every request's header, before its body (see harrier/http_message.h).
//
// Connections: at most Options::max_connections open at once (derived from RLIMIT_NOFILE by
// default); one over it is accepted and closed at once. accept() failing for lack of file
// descriptors is retried every 100 ms and logged at most once per 10 s (docs/server.md).
//
// TLS connections the server ends itself (timeouts, error answers, Connection: close, GOAWAY,
// Stop) get close_notify first, asynchronously and bounded (docs/server.md, "Closing TLS
// connections").
//
// Tracing: every HttpRequest carries its `version` and its receipt times, and a response's
// `on_sent` is called once on the connection's thread (see harrier/http_message.h).
//
// Lifecycle: Create() validates options; Start() binds, listens and starts the threads; Stop()
// (also run by the destructor) stops accepting, closes idle connections (and TLS handshakes
// that have not heard from their client), lets in-flight requests and handshakes finish for up
// to `shutdown_timeout`, then closes what is left and joins the threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harrier/access_log.h"
#include "harrier/http_message.h"
#include "harrier/status.h"

namespace harrier {

class IncomingBodies;

namespace server_internal {
class IoThread;
struct ServerShared;
class Acceptor;
class TlsContext;
}  // namespace server_internal

class HttpServer {
 public:
  struct Options {
    // What the server's connection-limit log lines call it, and the flag that sets its limit:
    // "http" and "--max-connections" (REST), "grpc", "metrics".
    std::string name = "http";
    std::string limit_flag = "--max-connections";
    // Address to listen on: an IPv4 or IPv6 literal. Default: every IPv4 interface.
    std::string address = "0.0.0.0";
    // TCP port; 0 picks a free one (see port()). Default 8000, as Triton.
    uint16_t port = 8000;
    // I/O threads, each with its own io_context. 0 (default): the usable cores (cgroup quota and
    // affinity aware, see core/cpu_quota.h).
    int io_threads = 0;
    // Largest request body. Default 256 MiB: a 100 MB binary image batch fits with room; JSON
    // tensors are 3-10x their binary size, so raise it for large JSON requests.
    uint64_t max_body_bytes = 256ull << 20;
    // Largest request line + header fields. Default 64 KiB.
    uint32_t max_header_bytes = 64u << 10;
    // Time from the first byte of a request (or from accepting the connection) until its header
    // is complete. Default 10 s. Slow-header ("slowloris") clients are cut off by it.
    std::chrono::milliseconds header_timeout{10'000};
    // Longest gap between two reads of a request body. Default 30 s.
    std::chrono::milliseconds body_timeout{30'000};
    // How long a keep-alive connection may sit idle between requests. Default 60 s.
    std::chrono::milliseconds keepalive_timeout{60'000};
    // Longest gap between two writes of a response (a client that stops reading). Default 30 s.
    std::chrono::milliseconds write_timeout{30'000};
    // A request refused from its header (HttpHandler::Precheck: admission control's 429) on a
    // connection refused twice already, each refusal less than refusal_repeat_window after the
    // one before, is held this long before it is answered, its body not read meanwhile. A client
    // that resends at once after a 429, ignoring Retry-After (wrk, naive retry loops), then costs
    // one refusal per hold instead of spinning through refusals on the model's cores; a client that
    // waits, or is refused only now and then, is answered at once. 0: off. HTTP/1.1 only (an HTTP/2
    // refusal resets its stream without reading the body). Default 15 ms.
    std::chrono::milliseconds refusal_hold{15};
    // HttpRequest::sole_requester: a request is its I/O thread's sole requester when no other
    // connection on that thread sent one within this window. 1 ms: at the request rates where
    // running requests on the I/O threads would keep them from ever sleeping, every thread
    // sees requests from several connections far more often than that.
    std::chrono::microseconds sole_requester_window{1'000};
    // Busy polling (issue 10, docs/server.md): an I/O thread whose latest request came from its
    // sole requester, after an idle spell no longer than this, polls for this long before it
    // sleeps, so that a client which sends its next request at once finds the thread awake
    // instead of paying the wake-up (one connection: ~1.2x the throughput, a lower p99). It
    // spends that CPU; at most half the usable cores poll at once, none with concurrent
    // clients (no sole requester) or an idle thread. 0: off. 50 us measured (docs/benchmarks.md).
    std::chrono::microseconds busy_poll{50};
    std::chrono::milliseconds refusal_repeat_window{50};
    // After an error response, how long unread request bytes are drained before closing, so
    // the client sees the response instead of a connection reset. Default 2 s.
    std::chrono::milliseconds linger_timeout{2'000};
    // Stop(): how long in-flight requests may take to finish before their connections are
    // closed. Default 30 s (tritonserver's --exit-timeout-secs).
    std::chrono::milliseconds shutdown_timeout{30'000};
    // Most connections open at once, both listeners together (HTTP/1.1, HTTP/2, TLS
    // handshakes; a connection counts from its accept until its socket is closed). One over it
    // is accepted and closed at once, without a byte -- so the client learns at once and a load
    // balancer tries elsewhere, rather than waiting in the backlog -- counted
    // (refused_connections()) and logged at most once per 10 s. 0 (default): derived at Start()
    // from the soft RLIMIT_NOFILE, see MaxConnectionsFor(): 896 with the usual 1024.
    uint64_t max_connections = 0;
    // Most connections one client address may hold open at once (both listeners together).
    // One over it is closed at once, as one over max_connections is, and counted with them: so
    // that one client cannot take every connection of a small limit (the metrics port's: probe
    // 52) and lock the others out. 0 (default): no such limit.
    uint32_t max_connections_per_client = 0;

    // HTTP/2 (h2c on `port`, by prior knowledge or `Upgrade: h2c`; h2 on `tls_port` by ALPN).
    // The limits above apply per stream. SETTINGS_MAX_CONCURRENT_STREAMS; default 128.
    uint32_t http2_max_concurrent_streams = 128;
    // SETTINGS_INITIAL_WINDOW_SIZE: how much of one stream's body the client may send ahead of
    // the server (1..2^31-1). Default 1 MiB.
    uint32_t http2_initial_window_bytes = 1u << 20;
    // The connection's receive window (all streams together), opened by a WINDOW_UPDATE on
    // stream 0 right after SETTINGS (65535..2^31-1). Default 16 MiB: several streams' windows.
    uint32_t http2_connection_window_bytes = 16u << 20;
    // SETTINGS_MAX_FRAME_SIZE: largest frame payload the client may send (16 KiB..16 MiB).
    // Default 64 KiB.
    uint32_t http2_max_frame_bytes = 64u << 10;

    // TLS: with a certificate and key, a second listener on `tls_port` (same address) serves h2
    // or HTTP/1.1 as ALPN chooses, TLS 1.2 and 1.3 only. PEM files.
    std::string tls_cert_file;
    std::string tls_key_file;
    // Non-empty: clients must present a certificate signed by one of these CAs (PEM bundle).
    std::string tls_client_ca_file;
    // 0 picks a free port (see tls_port()).
    uint16_t tls_port = 8443;
    // Session tickets are sealed with a key replaced this often; the previous key still opens
    // tickets (which are then renewed), so a ticket resumes for at most two periods. 1 h; > 0.
    std::chrono::seconds tls_ticket_key_rotation{3600};
    // ALPN offers h2 alone (the gRPC port): a client that offers only http/1.1, or only
    // protocols the server does not speak, gets a no_application_protocol alert. Default false:
    // h2, else http/1.1. A client that offers no ALPN is served as on the plain port (HTTP/1.1,
    // or HTTP/2 when it starts with the preface).
    bool tls_h2_only = false;
    // False: no plain (h2c/HTTP/1.1) listener, TLS only. Needs a certificate.
    bool plain_http = true;
    // Honour `Upgrade: h2c` on the plain listener (RFC 7540 §3.2). Default false: the request is
    // served as HTTP/1.1. A proxy that forwards the Upgrade header (HAProxy does, as for
    // WebSocket) relays the 101 and then a tunnel whose later requests none of its rules see
    // ("h2c smuggling"; probe 57: a denied admin route answered 200 through it). Prior-knowledge
    // h2c (the preface) is always served. Never over TLS.
    bool h2c_upgrade = false;

    // The server-wide budget of request bodies still arriving (server/incoming_bodies.h),
    // shared by every server given the same one (REST and gRPC): a request whose body would
    // take it past its limit is answered 503 with Retry-After: 1 and, over HTTP/1.1, its
    // connection closed. Null (default): no such budget.
    std::shared_ptr<IncomingBodies> incoming_bodies;

    // Where the server reports the requests it answers itself with an error (400, 408, 413,
    // 431 over HTTP/1.1; 408, 413, 431 on an HTTP/2 stream): one AccessRecord each, protocol
    // "http", with what was parsed of the request. Requests the handler answers are the
    // handler's to log. Not owned; must outlive the server; called on the I/O threads. Default
    // null: nothing is logged, and the error paths pay one pointer test for it.
    AccessLog* access_log = nullptr;
  };

  // kInvalidArgument for an unparsable address, a zero limit/timeout, or an HTTP/2 setting or
  // ticket rotation outside the range its comment gives. `handler` is not
  // owned and must outlive the server (it is called until Stop() returns).
  static StatusOr<std::unique_ptr<HttpServer>> Create(const Options& options, HttpHandler* handler);
  // Whether a server could load these TLS files (the certificate, the key, the client CA if
  // any), with Create()'s errors: the start checks them before any model loads, so that a bad
  // file stops it at once rather than after every model has loaded (probe 36).
  static Status CheckTlsFiles(const std::string& cert_file, const std::string& key_file,
                              const std::string& client_ca_file);

  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens, then starts the I/O threads. kUnavailable when the address cannot be
  // bound (in use, no permission); kInvalidArgument when called twice.
  Status Start();

  // The bound port (the real one when Options::port was 0). Valid after Start().
  uint16_t port() const { return port_; }
  // The bound TLS port, or 0 without TLS.
  uint16_t tls_port() const { return tls_port_; }
  int io_threads() const { return static_cast<int>(io_.size()); }

  // The limit max_connections stands for when it is 0: `descriptor_limit` (the soft
  // RLIMIT_NOFILE; RLIM_INFINITY counts as 2^20) less DescriptorReserveFor() it, for what else
  // the process opens (model files, gRPC and metrics connections, logs, epoll and timer
  // descriptors); at least 1. 1024 -> 896, 65536 -> 57344, 64 -> 16.
  static uint64_t MaxConnectionsFor(uint64_t descriptor_limit);
  // That reserve: an eighth of the limit, at least 64 but at most three quarters of it.
  static uint64_t DescriptorReserveFor(uint64_t descriptor_limit);

  // The connection limit in force (Options::max_connections, or the derived one, from the
  // descriptor limit when the server was made).
  uint64_t max_connections() const;
  // Connections open now (as the limit counts them), and those refused for the limit so far.
  // Any thread.
  int64_t open_connections() const;
  uint64_t refused_connections() const;

  // accept() calls that failed, both listeners (file descriptors exhausted: EMFILE, ENFILE;
  // a connection reset before it was accepted). While descriptors are exhausted the acceptor
  // retries every 100 ms and logs one warning per 10 s with the count since the previous one.
  // Any thread.
  uint64_t failed_accepts() const;

  // TLS handshakes on the TLS listener so far; all zero without one. Any thread.
  struct TlsHandshakes {
    uint64_t tls12 = 0;    // finished as TLS 1.2 (full or resumed)
    uint64_t tls13 = 0;    // finished as TLS 1.3
    uint64_t resumed = 0;  // of those, the ones that resumed a session (a ticket)
    // Failed after the client began: no protocol version, cipher or ALPN protocol in common, a
    // client certificate missing or not trusted, not TLS at all, the client gone mid-way. A
    // connection closed before its client sent anything (a TCP health check) is not counted.
    uint64_t failed = 0;
    uint64_t timed_out = 0;  // not finished within Options::header_timeout
  };
  TlsHandshakes tls_handshakes() const;

  // Graceful stop; see the header comment. Blocks for at most shutdown_timeout plus a little.
  // Idempotent. REQUIRES: not called from an I/O thread or from inside the handler.
  void Stop();
  // The same with another bound on in-flight requests than Options::shutdown_timeout.
  void Stop(std::chrono::milliseconds shutdown_timeout);

 private:
  HttpServer(const Options& options, HttpHandler* handler);

  Options options_;
  std::shared_ptr<server_internal::ServerShared> shared_;
  std::vector<std::shared_ptr<server_internal::IoThread>> io_;
  std::unique_ptr<server_internal::TlsContext> tls_;
  std::unique_ptr<server_internal::Acceptor> acceptor_;  // after io_: destroyed first
  std::unique_ptr<server_internal::Acceptor> tls_acceptor_;
  uint16_t port_ = 0;
  uint16_t tls_port_ = 0;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace harrier
