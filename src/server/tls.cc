#include "server/tls.h"

#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace harrier::server_internal {

namespace ssl = boost::asio::ssl;

namespace {

// The SSL_CTX ex_data slot holding our TlsContext (Asio uses the app-data slot itself).
int ContextIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// ALPN (RFC 7301): h2 when the client offers it, else http/1.1, else http/1.0 (curl
// --http1.0 offers only that; both are served by the HTTP/1.1 connection), unless the context
// serves h2 only (the gRPC port: `arg` non-null). A client that offers ALPN but none of ours gets a
// fatal no_application_protocol alert (§3.2; nginx does the same since 1.21.4) rather than a
// connection in a protocol it did not ask for. A client that offers no ALPN never reaches
// here: it is served as the port serves a connection without it (http_server.cc).
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
               unsigned int inlen, void* h2_only) {
  static const unsigned char kBoth[] = "\x02h2\x08http/1.1\x08http/1.0";
  static const unsigned char kH2[] = "\x02h2";
  const unsigned char* server = h2_only != nullptr ? kH2 : kBoth;
  const unsigned int server_len = h2_only != nullptr ? sizeof(kH2) - 1 : sizeof(kBoth) - 1;
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, server, server_len, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

std::string LastError() {
  char buf[256];
  ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
  return buf;
}

// OpenSSL's pass phrase callback: none is given, and that it was asked is noted. Without it,
// an encrypted key made the start-up prompt "Enter PEM pass phrase:" on the terminal, where a
// server started under `docker run -t` or ssh waited for good (probe 36).
int NoPassphrase(char*, int, int, void* asked) {
  *static_cast<bool*>(asked) = true;
  return 0;
}

// Why `path` cannot be read as a TLS file ("the TLS key"), or OK: OpenSSL says "processing
// error" or "unsupported" for an unreadable or empty file.
Status Readable(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return InvalidArgument("cannot read " + what + " '" + path + "': " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return InvalidArgument(what + " '" + path + "' is a directory");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return InvalidArgument("cannot read " + what + " '" + path + "': " + std::strerror(errno));
  ::close(fd);
  if (S_ISREG(st.st_mode) && st.st_size == 0)
    return InvalidArgument(what + " '" + path + "' is empty");
  return Status::Ok();
}

}  // namespace

TlsContext::TlsContext(const Options& options)
    : options_(options), ctx_(ssl::context::tls_server) {}

TlsContext::~TlsContext() = default;

StatusOr<std::unique_ptr<TlsContext>> TlsContext::Create(const Options& options) {
  if (options.cert_file.empty() || options.key_file.empty())
    return InvalidArgument("TLS needs a certificate and a private key");
  if (options.ticket_key_rotation.count() <= 0)
    return InvalidArgument("the TLS ticket key rotation period must be > 0");
  std::unique_ptr<TlsContext> tls(new TlsContext(options));
  SSL_CTX* ctx = tls->ctx_.native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_options(
      ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Forward-secret AEAD suites only for TLS 1.2 (RFC 9113 §9.2.2 forbids the rest for h2).
  SSL_CTX_set_cipher_list(ctx,
                          "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                          "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                          "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305");
  RETURN_IF_ERROR(Readable(options.cert_file, "the TLS certificate"));
  RETURN_IF_ERROR(Readable(options.key_file, "the TLS key"));
  if (!options.client_ca_file.empty())
    RETURN_IF_ERROR(Readable(options.client_ca_file, "the TLS client CA"));
  boost::system::error_code ec;
  tls->ctx_.use_certificate_chain_file(options.cert_file, ec);
  if (ec)
    return InvalidArgument("cannot load TLS certificate '" + options.cert_file +
                           "': " + ec.message());
  // Served all the same (a renewal may be on its way), but said: clients refuse it (probe 36).
  if (X509* cert = SSL_CTX_get0_certificate(ctx); cert != nullptr) {
    const bool expired = X509_cmp_current_time(X509_get0_notAfter(cert)) < 0;
    const bool early = X509_cmp_current_time(X509_get0_notBefore(cert)) > 0;
    if (expired || early) {
      spdlog::warn("the TLS certificate '{}' is {}; clients that check it refuse it",
                   options.cert_file, expired ? "expired" : "not valid yet");
    }
  }
  bool passphrase_asked = false;
  SSL_CTX_set_default_passwd_cb(ctx, &NoPassphrase);
  SSL_CTX_set_default_passwd_cb_userdata(ctx, &passphrase_asked);
  tls->ctx_.use_private_key_file(options.key_file, ssl::context::pem, ec);
  SSL_CTX_set_default_passwd_cb_userdata(ctx, nullptr);
  SSL_CTX_set_default_passwd_cb(ctx, nullptr);
  if (passphrase_asked) {
    return InvalidArgument("the TLS key '" + options.key_file +
                           "' is encrypted, and the server takes no pass phrase: give it the "
                           "key decrypted (openssl pkey -in KEY -out DECRYPTED), readable by "
                           "the server's user only");
  }
  if (ec) return InvalidArgument("cannot load TLS key '" + options.key_file + "': " + ec.message());
  if (SSL_CTX_check_private_key(ctx) != 1)
    return InvalidArgument("the TLS key does not match the certificate: " + LastError());
  if (!options.client_ca_file.empty()) {
    tls->ctx_.load_verify_file(options.client_ca_file, ec);
    if (ec)
      return InvalidArgument("cannot load TLS client CA '" + options.client_ca_file +
                             "': " + ec.message());
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options.client_ca_file.c_str());
    if (names != nullptr) SSL_CTX_set_client_CA_list(ctx, names);
    tls->ctx_.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  }
  // Resumption: stateless tickets (TLS 1.2 and 1.3) under our rotating keys; no server cache.
  static const unsigned char kSessionContext[] = "harrier";
  SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof(kSessionContext) - 1);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  // A ticket lives two periods at most: the key that sealed it is current for one period and
  // still opens tickets for the next.
  SSL_CTX_set_timeout(ctx, static_cast<long>(2 * options.ticket_key_rotation.count()));
  if (!NewKey(&tls->current_)) return Internal("cannot make a TLS ticket key: " + LastError());
  SSL_CTX_set_ex_data(ctx, ContextIndex(), tls.get());
  SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, &TicketKeyCb);
  // Any non-null pointer says "h2 only"; the context outlives every connection.
  SSL_CTX_set_alpn_select_cb(ctx, &SelectAlpn, options.h2_only ? tls.get() : nullptr);
  return tls;
}

bool TlsContext::NewKey(TicketKey* key) {
  if (RAND_bytes(key->name, sizeof(key->name)) != 1 ||
      RAND_bytes(key->aes, sizeof(key->aes)) != 1 || RAND_bytes(key->hmac, sizeof(key->hmac)) != 1)
    return false;
  key->created = std::chrono::steady_clock::now();
  return true;
}

// OpenSSL's ticket key callback. First rotate if the current key is older than the period
// (lazily, here, so no timer is needed: a key is only ever used through this callback), and
// forget the previous key once it is two periods old. Encrypting: seal with the current key.
// Decrypting: the current key (1: ticket fine) or the previous one (2: accepted, and a fresh
// ticket under the current key is issued); any other name is unknown (0: full handshake).
int TlsContext::TicketKeyCb(SSL* ssl, unsigned char* key_name, unsigned char* iv,
                            EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac, int encrypt) {
  auto* self = static_cast<TlsContext*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ContextIndex()));
  if (self == nullptr) return -1;
  TicketKey key;
  int result = 1;
  {
    std::lock_guard<std::mutex> lock(self->mu_);
    const auto now = std::chrono::steady_clock::now();
    const auto period = self->options_.ticket_key_rotation;
    if (now - self->current_.created >= period) {
      TicketKey fresh;
      if (NewKey(&fresh)) {
        self->previous_ = self->current_;
        self->have_previous_ = true;
        self->current_ = fresh;
      }
    }
    // A key made two periods ago sealed no ticket that is still within its lifetime.
    if (self->have_previous_ && now - self->previous_.created >= 2 * period)
      self->have_previous_ = false;
    if (encrypt) {
      key = self->current_;
    } else if (std::memcmp(key_name, self->current_.name, sizeof(key.name)) == 0) {
      key = self->current_;
    } else if (self->have_previous_ &&
               std::memcmp(key_name, self->previous_.name, sizeof(key.name)) == 0) {
      key = self->previous_;
      result = 2;
    } else {
      return 0;
    }
  }
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, key.hmac, sizeof(key.hmac)),
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, const_cast<char*>("SHA256"), 0),
      OSSL_PARAM_construct_end()};
  if (encrypt) {
    std::memcpy(key_name, key.name, sizeof(key.name));
    if (RAND_bytes(iv, 16) != 1) return -1;
    if (EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, key.aes, iv) != 1) return -1;
  } else {
    if (EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, key.aes, iv) != 1) return -1;
  }
  if (EVP_MAC_CTX_set_params(mac, params) != 1) return -1;
  return result;
}

std::string_view TlsContext::Negotiated(TlsStream& stream) {
  const unsigned char* data = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(stream.native_handle(), &data, &len);
  return {reinterpret_cast<const char*>(data), len};
}

bool TlsContext::HandshakeBegun(TlsStream& stream) {
  boost::system::error_code ec;
  const std::size_t unread = stream.lowest_layer().available(ec);
  // TLS_ST_BEFORE until a ClientHello has been read (SSL_in_before() turns false as soon as
  // SSL_accept is first called, so it cannot tell). Bytes OpenSSL has taken from Asio's BIO, or
  // that wait in it, count too: a partial ClientHello, or bytes that are not TLS at all, leave
  // the state where it was (probe 54).
  SSL* ssl = stream.native_handle();
  BIO* in = SSL_get_rbio(ssl);
  const bool bio_bytes = in != nullptr && (BIO_number_read(in) > 0 || BIO_ctrl_pending(in) > 0);
  return SSL_get_state(ssl) != TLS_ST_BEFORE || bio_bytes || (!ec && unread > 0);
}

bool TlsContext::Resumed(TlsStream& stream) {
  return SSL_session_reused(stream.native_handle()) == 1;
}

std::string_view TlsContext::Version(TlsStream& stream) {
  return SSL_get_version(stream.native_handle());
}

}  // namespace harrier::server_internal
