// TLS for the HTTP server: the stream types and the server's SSL context (certificate, TLS 1.2
// and 1.3 only, ALPN choosing h2 or http/1.1, client certificates, rotating session-ticket
// keys). OpenSSL's own API is called only from tls.cc; the connections see TLS as an Asio
// stream (boost::asio::ssl::stream).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "harrier/status.h"

namespace harrier::server_internal {

// Concrete io_context executors (not any_io_executor): no type-erased dispatch per operation.
using TcpStream =
    boost::asio::basic_stream_socket<boost::asio::ip::tcp, boost::asio::io_context::executor_type>;
using TlsStream = boost::asio::ssl::stream<TcpStream>;

class TlsContext {
 public:
  struct Options {
    std::string cert_file;       // PEM certificate chain
    std::string key_file;        // PEM private key
    std::string client_ca_file;  // PEM CA bundle; non-empty: client certificates required
    // A new session-ticket key replaces the current one once it is `ticket_key_rotation` old
    // (checked on every ticket operation); the one before still decrypts (its tickets are
    // renewed) until it is two periods old, and sessions time out after two periods.
    std::chrono::seconds ticket_key_rotation{3600};
    // ALPN offers h2 alone (the gRPC port): a client offering only http/1.1 is refused with
    // no_application_protocol. Default: h2, else http/1.1.
    bool h2_only = false;
  };

  // kInvalidArgument when a file cannot be read or the key does not match the certificate.
  static StatusOr<std::unique_ptr<TlsContext>> Create(const Options& options);
  ~TlsContext();

  boost::asio::ssl::context& context() { return ctx_; }

  // The protocol ALPN chose on a finished handshake: "h2", "http/1.1" or "" (no ALPN).
  static std::string_view Negotiated(TlsStream& stream);
  // Whether a server handshake (in progress, or failed) has heard from the client: a ClientHello
  // read, or any byte taken or waiting. False: the client has said nothing yet.
  static bool HandshakeBegun(TlsStream& stream);
  // Of a finished handshake: whether it resumed a session (a ticket), and the TLS version as
  // OpenSSL names it ("TLSv1.2", "TLSv1.3"), a static string.
  static bool Resumed(TlsStream& stream);
  static std::string_view Version(TlsStream& stream);

 private:
  struct TicketKey {
    unsigned char name[16];
    unsigned char aes[32];
    unsigned char hmac[32];
    std::chrono::steady_clock::time_point created;
  };

  explicit TlsContext(const Options& options);
  static int TicketKeyCb(SSL* ssl, unsigned char* key_name, unsigned char* iv,
                         EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac, int encrypt);
  static bool NewKey(TicketKey* key);

  Options options_;
  boost::asio::ssl::context ctx_;
  std::mutex mu_;  // the callback runs on every I/O thread
  TicketKey current_{};
  TicketKey previous_{};
  bool have_previous_ = false;
};

// The connection's TLS version for HttpRequest::tls_version: empty in clear text.
inline std::string_view TlsVersionOf(TcpStream&) {
  return {};
}
inline std::string_view TlsVersionOf(TlsStream& stream) {
  return TlsContext::Version(stream);
}

}  // namespace harrier::server_internal
