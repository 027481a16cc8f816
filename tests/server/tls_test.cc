// TLS through HttpServer with an OpenSSL client on a blocking socket: ALPN, session tickets
// and their key rotation, client certificates. Certificates are made with the openssl tool.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "server/http_server.h"
#include "server/raw_http_client.h"
#include "server/sent_recorder.h"
#include "util/recording_log.h"

namespace harrier {
namespace {

using std::chrono::milliseconds;

class OkHandler : public HttpHandler {
 public:
  testing::SentRecorder* sent = nullptr;  // set: every response reports to it
  std::atomic<HttpVersion> version{HttpVersion::kUnknown};
  std::mutex mu;
  std::string tls_version;  // the last request's (guarded by mu)
  std::string TlsVersion() {
    std::lock_guard lock(mu);
    return tls_version;
  }

  std::atomic<bool> from_another_thread{false};  // answer 10 ms later, as a model's worker

  void Handle(HttpRequest&& request, HttpResponder respond) override {
    version = request.version;
    {
      std::lock_guard lock(mu);
      tls_version = std::string(request.tls_version);
    }
    HttpResponse r;
    r.body = "ok";
    if (sent != nullptr) r.on_sent = sent->Callback();
    if (from_another_thread) {
      std::thread([r = std::move(r), respond = std::move(respond)]() mutable {
        std::this_thread::sleep_for(milliseconds(10));
        respond(std::move(r));
      }).detach();
      return;
    }
    respond(std::move(r));
  }
};

struct ClientResult {
  bool handshake = false;
  bool reused = false;
  std::string alpn;
  std::string answer;  // the first bytes of the response to one HTTP/1.1 GET
  SSL_SESSION* session = nullptr;
  unsigned long error = 0;  // a failed handshake's OpenSSL error
};

// One TLS 1.2 connection (the ticket comes inside the handshake), one GET, close.
ClientResult Connect(uint16_t port, SSL_SESSION* resume, const std::string& alpn_wire,
                     const std::string& cert = "", const std::string& key = "") {
  ClientResult out;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return out;
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  if (!cert.empty()) {
    SSL_CTX_use_certificate_file(ctx, cert.c_str(), SSL_FILETYPE_PEM);
    SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM);
  }
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  if (resume != nullptr) SSL_set_session(ssl, resume);
  if (!alpn_wire.empty()) {
    SSL_set_alpn_protos(ssl, reinterpret_cast<const unsigned char*>(alpn_wire.data()),
                        static_cast<unsigned>(alpn_wire.size()));
  }
  if (SSL_connect(ssl) == 1) {
    out.handshake = true;
    out.reused = SSL_session_reused(ssl) == 1;
    const unsigned char* p = nullptr;
    unsigned len = 0;
    SSL_get0_alpn_selected(ssl, &p, &len);
    out.alpn.assign(reinterpret_cast<const char*>(p), len);
    if (out.alpn != "h2") {
      const std::string get = "GET /x HTTP/1.1\r\nHost: t\r\n\r\n";
      if (SSL_write(ssl, get.data(), static_cast<int>(get.size())) > 0) {
        char buf[256];
        const int n = SSL_read(ssl, buf, sizeof(buf));
        if (n > 0) out.answer.assign(buf, static_cast<std::size_t>(n));
      }
    }
    out.session = SSL_get1_session(ssl);
    // A connection freed without close_notify marks its session not resumable.
    SSL_shutdown(ssl);
  } else {
    out.error = ERR_peek_last_error();
  }
  ERR_clear_error();
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  ::close(fd);
  return out;
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A client's write to a connection the server has closed (a handshake that outlived a short
    // timeout on a loaded machine) is an error for the test to see, not a SIGPIPE that ends it.
    std::signal(SIGPIPE, SIG_IGN);
    dir_ = new std::string(std::filesystem::temp_directory_path() /
                           ("harrier-tls-test-" + std::to_string(::getpid())));
    std::filesystem::create_directories(*dir_);
    const std::string d = *dir_;
    const std::string quiet = " >/dev/null 2>&1";
    auto key = [&](const std::string& name) {
      return "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + d + "/" +
             name + ".key";
    };
    ok_ =
        std::system(
            (key("ca") + " -x509 -out " + d + "/ca.crt -days 1 -subj /CN=ca" + quiet).c_str()) ==
            0 &&
        std::system(
            (key("server") + " -x509 -out " + d + "/server.crt -days 1 -subj /CN=localhost" + quiet)
                .c_str()) == 0 &&
        std::system(
            (key("client") + " -out " + d + "/client.csr -subj /CN=client" + quiet).c_str()) == 0 &&
        std::system(("openssl x509 -req -in " + d + "/client.csr -CA " + d + "/ca.crt -CAkey " + d +
                     "/ca.key -CAcreateserial -out " + d + "/client.crt -days 1" + quiet)
                        .c_str()) == 0;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
    ASSERT_TRUE(ok_) << "openssl could not make the test certificates";
    options_.address = "127.0.0.1";
    options_.port = 0;
    options_.tls_port = 0;
    options_.io_threads = 1;
    options_.tls_cert_file = File("server.crt");
    options_.tls_key_file = File("server.key");
  }
  void StartServer() {
    auto server = HttpServer::Create(options_, &handler_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_NE(server_->tls_port(), 0);
  }
  static std::string File(const std::string& name) { return *dir_ + "/" + name; }

  static std::string* dir_;
  static bool ok_;
  HttpServer::Options options_;
  OkHandler handler_;
  std::unique_ptr<HttpServer> server_;
};

std::string* TlsTest::dir_ = nullptr;
bool TlsTest::ok_ = false;

TEST_F(TlsTest, CreateRejectsHalfAConfiguration) {
  HttpServer::Options bad = options_;
  bad.tls_key_file.clear();
  EXPECT_EQ(HttpServer::Create(bad, &handler_).status().code(), StatusCode::kInvalidArgument);
  bad = options_;
  bad.tls_cert_file = File("missing.crt");
  EXPECT_EQ(HttpServer::Create(bad, &handler_).status().code(), StatusCode::kInvalidArgument);
  bad = options_;
  bad.tls_cert_file = File("ca.crt");  // not the key's certificate
  EXPECT_EQ(HttpServer::Create(bad, &handler_).status().code(), StatusCode::kInvalidArgument);
  bad = HttpServer::Options{};
  bad.plain_http = false;  // and no TLS: nothing to serve
  EXPECT_EQ(HttpServer::Create(bad, &handler_).status().code(), StatusCode::kInvalidArgument);
}

// A bad TLS file is named with its cause. An encrypted key was a prompt for a pass phrase on
// the terminal (a start under `docker run -t` waited for good), and otherwise "processing
// error"; an empty key was "unsupported" (probe 36).
TEST_F(TlsTest, BadFilesAreNamedWithTheirCauseAndAnEncryptedKeyIsNeverPromptedFor) {
  const std::string encrypted = File("encrypted.key");
  ASSERT_EQ(std::system(("openssl pkey -in " + File("server.key") +
                         " -aes256 -passout pass:secret -out " + encrypted)
                            .c_str()),
            0);
  const Status refused = HttpServer::CheckTlsFiles(File("server.crt"), encrypted, "");
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("is encrypted, and the server takes no pass phrase"),
            std::string::npos)
      << refused.ToString();
  const std::string empty = File("empty.key");
  { std::ofstream(empty).flush(); }
  EXPECT_EQ(HttpServer::CheckTlsFiles(File("server.crt"), empty, "").message(),
            "the TLS key '" + empty + "' is empty");
  EXPECT_EQ(HttpServer::CheckTlsFiles(File("server.crt"), *dir_, "").message(),
            "the TLS key '" + *dir_ + "' is a directory");
  EXPECT_EQ(
      HttpServer::CheckTlsFiles(File("nope.crt"), File("server.key"), "").message(),
      "cannot read the TLS certificate '" + File("nope.crt") + "': No such file or directory");
  EXPECT_TRUE(HttpServer::CheckTlsFiles(File("server.crt"), File("server.key"), "").ok());
}

// An expired certificate is served (a renewal may be on its way), with a warning: it started
// without a word (probe 36).
TEST_F(TlsTest, AnExpiredCertificateIsServedWithAWarning) {
  const std::string d = *dir_ + "/expired";
  const std::string script =
      "mkdir -p " + d + " && cd " + d +
      " && printf '[ca]\\ndefault_ca = x\\n[x]\\ndatabase = index.txt\\nnew_certs_dir = "
      ".\\nserial = serial\\ndefault_md = sha256\\npolicy = p\\n[p]\\ncommonName = "
      "supplied\\n' > ca.cnf && : > index.txt && echo 01 > serial"
      " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout key.pem"
      " -subj /CN=localhost -out req.csr 2>/dev/null"
      " && openssl ca -batch -selfsign -keyfile key.pem -in req.csr -startdate 20200101000000Z"
      " -enddate 20200102000000Z -config ca.cnf -out cert.pem 2>/dev/null";
  ASSERT_EQ(std::system(script.c_str()), 0) << script;
  testing::RecordingLog log;
  EXPECT_TRUE(HttpServer::CheckTlsFiles(d + "/cert.pem", d + "/key.pem", "").ok());
  EXPECT_EQ(log.Find(spdlog::level::warn, "is expired; clients that check it refuse it").size(),
            1u);
  EXPECT_TRUE(HttpServer::CheckTlsFiles(File("server.crt"), File("server.key"), "").ok());
  EXPECT_EQ(log.Find(spdlog::level::warn, "is expired").size(), 1u);  // a valid one: no word
}

TEST_F(TlsTest, AlpnChoosesH2OrHttp11) {
  StartServer();
  auto r = Connect(server_->tls_port(), nullptr, std::string("\x02h2\x08http/1.1", 12));
  ASSERT_TRUE(r.handshake);
  EXPECT_EQ(r.alpn, "h2");
  SSL_SESSION_free(r.session);
  r = Connect(server_->tls_port(), nullptr, std::string("\x08http/1.1", 9));
  ASSERT_TRUE(r.handshake);
  EXPECT_EQ(r.alpn, "http/1.1");
  EXPECT_EQ(r.answer.rfind("HTTP/1.1 200", 0), 0u) << r.answer;
  SSL_SESSION_free(r.session);
  r = Connect(server_->tls_port(), nullptr, "");  // no ALPN: HTTP/1.1
  ASSERT_TRUE(r.handshake);
  EXPECT_EQ(r.alpn, "");
  EXPECT_EQ(r.answer.rfind("HTTP/1.1 200", 0), 0u) << r.answer;
  SSL_SESSION_free(r.session);
}

// RFC 7301 §3.2: a client that offers ALPN, but none of the server's protocols, is refused with
// a no_application_protocol alert rather than served HTTP/1.1 it did not ask for (probe 36).
TEST_F(TlsTest, AlpnWithNoProtocolInCommonIsRefusedWithAnAlert) {
  StartServer();
  auto r = Connect(server_->tls_port(), nullptr, std::string("\x08spdy/3.1\x02h3", 12));
  EXPECT_FALSE(r.handshake);
  EXPECT_EQ(ERR_GET_REASON(r.error), SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL)
      << ERR_reason_error_string(r.error);
  // http/1.0 alone (curl --http1.0) is served, by the HTTP/1.1 connection (probe 40).
  r = Connect(server_->tls_port(), nullptr, std::string("\x08http/1.0", 9));
  ASSERT_TRUE(r.handshake);
  EXPECT_EQ(r.alpn, "http/1.0");
  EXPECT_EQ(r.answer.rfind("HTTP/1.1 200", 0), 0u) << r.answer;
  SSL_SESSION_free(r.session);
  r = Connect(server_->tls_port(), nullptr, std::string("\x08http/1.1", 9));  // the next is served
  ASSERT_TRUE(r.handshake);
  EXPECT_EQ(r.answer.rfind("HTTP/1.1 200", 0), 0u) << r.answer;
  SSL_SESSION_free(r.session);
}

// The gRPC port's setting: ALPN offers h2 alone, so a client offering only http/1.1 is refused.
TEST_F(TlsTest, H2OnlyRefusesAClientThatOffersOnlyHttp11) {
  options_.tls_h2_only = true;
  StartServer();
  auto r = Connect(server_->tls_port(), nullptr, std::string("\x08http/1.1", 9));
  EXPECT_FALSE(r.handshake);
  EXPECT_EQ(ERR_GET_REASON(r.error), SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL)
      << ERR_reason_error_string(r.error);
  r = Connect(server_->tls_port(), nullptr, std::string("\x08http/1.1\x02h2", 12));
  ASSERT_TRUE(r.handshake);
  EXPECT_EQ(r.alpn, "h2");
  SSL_SESSION_free(r.session);
}

TEST_F(TlsTest, PlainHttpOffLeavesOnlyTheTlsPort) {
  options_.plain_http = false;
  StartServer();
  EXPECT_EQ(server_->port(), 0);
  auto r = Connect(server_->tls_port(), nullptr, "");
  EXPECT_TRUE(r.handshake);
  SSL_SESSION_free(r.session);
}

TEST_F(TlsTest, TicketsResumeAndThePreviousKeyStillOpensThemAfterARotation) {
  // Two seconds a period: the margins below (1.6 s before the second rotation, 1 s past the
  // ticket's lifetime) hold on a loaded machine under the sanitizers, where one of 1 s did not.
  options_.tls_ticket_key_rotation = std::chrono::seconds(2);
  StartServer();
  const uint16_t port = server_->tls_port();
  auto first = Connect(port, nullptr, "");
  ASSERT_TRUE(first.handshake);
  EXPECT_FALSE(first.reused);
  ASSERT_NE(first.session, nullptr);
  auto again = Connect(port, first.session, "");
  EXPECT_TRUE(again.reused);
  SSL_SESSION_free(again.session);
  // One period later the key has rotated; the ticket, sealed under the previous key, resumes.
  std::this_thread::sleep_for(milliseconds(2400));
  auto after_rotation = Connect(port, first.session, "");
  EXPECT_TRUE(after_rotation.reused);
  SSL_SESSION_free(after_rotation.session);
  // Two rotations later that key is gone (and the ticket's lifetime is over): a full handshake.
  std::this_thread::sleep_for(milliseconds(2600));
  auto expired = Connect(port, first.session, "");
  EXPECT_TRUE(expired.handshake);
  EXPECT_FALSE(expired.reused);
  SSL_SESSION_free(expired.session);
  SSL_SESSION_free(first.session);
}

TEST_F(TlsTest, ClientCertificateIsRequired) {
  options_.tls_client_ca_file = File("ca.crt");
  StartServer();
  auto none = Connect(server_->tls_port(), nullptr, "");
  EXPECT_FALSE(none.handshake);
  auto wrong = Connect(server_->tls_port(), nullptr, "", File("server.crt"), File("server.key"));
  EXPECT_FALSE(wrong.handshake);
  auto good = Connect(server_->tls_port(), nullptr, "", File("client.crt"), File("client.key"));
  EXPECT_TRUE(good.handshake);
  EXPECT_EQ(good.answer.rfind("HTTP/1.1 200", 0), 0u) << good.answer;
  SSL_SESSION_free(good.session);
}

// A blocking TLS client that reports how the server ended the connection: with close_notify
// (SSL_read returns 0, SSL_ERROR_ZERO_RETURN) or with a bare TCP close (SSL_ERROR_SYSCALL /
// SSL_ERROR_SSL: "unexpected EOF").
class TlsSession {
 public:
  enum class End { kCloseNotify, kBareEof, kTimeout };

  // `nonblocking_start`: only the ClientHello is sent; Finish() completes the handshake.
  TlsSession(uint16_t port, const std::string& alpn_wire, bool nonblocking_start = false) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return;
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_NONE, nullptr);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    if (!alpn_wire.empty()) {
      SSL_set_alpn_protos(ssl_, reinterpret_cast<const unsigned char*>(alpn_wire.data()),
                          static_cast<unsigned>(alpn_wire.size()));
    }
    if (nonblocking_start) {
      // The ClientHello goes through memory BIOs and is copied to the socket by hand, so that
      // this SSL_connect cannot also read the server's answer and finish the handshake (with
      // TLS 1.3 on loopback it could: the server answers faster than the call returns).
      BIO* rbio = BIO_new(BIO_s_mem());
      BIO* wbio = BIO_new(BIO_s_mem());
      SSL_set_bio(ssl_, rbio, wbio);
      const int rv = SSL_connect(ssl_);  // writes the ClientHello into wbio, then wants to read
      char* hello = nullptr;
      const long hello_size = BIO_get_mem_data(wbio, &hello);
      started_ = rv < 0 && SSL_get_error(ssl_, rv) == SSL_ERROR_WANT_READ && hello_size > 0 &&
                 ::send(fd_, hello, static_cast<size_t>(hello_size), 0) == hello_size;
      SSL_set_fd(ssl_, fd_);  // Finish() goes on over the socket
      return;
    }
    handshake_ = SSL_connect(ssl_) == 1;
  }
  ~TlsSession() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    if (fd_ >= 0) ::close(fd_);
    ERR_clear_error();
  }

  bool handshake() const { return handshake_; }
  bool started() const { return started_; }

  // Completes a handshake begun with `nonblocking_start` (blocking from here on).
  bool Finish() {
    handshake_ = SSL_connect(ssl_) == 1;
    return handshake_;
  }

  bool Write(const std::string& data) {
    return SSL_write(ssl_, data.data(), static_cast<int>(data.size())) ==
           static_cast<int>(data.size());
  }

  // One SSL_read's worth, appended to `received`; false when the connection ended.
  bool ReadSome(std::string* received) {
    char buf[16384];
    const int n = SSL_read(ssl_, buf, sizeof(buf));
    if (n <= 0) return false;
    received->append(buf, static_cast<std::size_t>(n));
    return true;
  }

  // Reads (appending to `received`) until the server ends the connection, or 5 s pass.
  End ReadToEnd(std::string* received) {
    char buf[4096];
    for (;;) {
      const int n = SSL_read(ssl_, buf, sizeof(buf));
      if (n > 0) {
        received->append(buf, static_cast<std::size_t>(n));
        continue;
      }
      const int err = SSL_get_error(ssl_, n);
      if (err == SSL_ERROR_ZERO_RETURN) return End::kCloseNotify;
      if (err == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK))
        return End::kTimeout;
      return End::kBareEof;
    }
  }

 private:
  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  bool handshake_ = false;
  bool started_ = false;
};

using End = TlsSession::End;
const std::string kAlpnHttp11("\x08http/1.1", 9);
const std::string kAlpnH2("\x02h2", 3);

// A client that chose http/1.1 by ALPN and then sends the HTTP/2 preface gets a 505; one that
// offered no ALPN may start HTTP/2 with the preface, as over h2c (probe 36).
// The counts behind harrier_tls_handshakes_total and its kin: by version, resumed ones, and
// failures by reason; a connection that closes before saying anything is not a handshake.
TEST_F(TlsTest, HandshakesAreCountedByVersionResumptionAndFailure) {
  options_.header_timeout = milliseconds(300);
  StartServer();
  const uint16_t port = server_->tls_port();
  auto counts_reach = [&](uint64_t tls12, uint64_t tls13, uint64_t resumed, uint64_t failed,
                          uint64_t timed_out) {
    HttpServer::TlsHandshakes h;
    for (int i = 0; i < 200; ++i) {
      h = server_->tls_handshakes();
      if (h.tls12 == tls12 && h.tls13 == tls13 && h.resumed == resumed && h.failed == failed &&
          h.timed_out == timed_out) {
        return true;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
    ADD_FAILURE() << "tls12 " << h.tls12 << " tls13 " << h.tls13 << " resumed " << h.resumed
                  << " failed " << h.failed << " timed_out " << h.timed_out;
    return false;
  };
  auto first = Connect(port, nullptr, "");  // TLS 1.2
  ASSERT_TRUE(first.handshake);
  ASSERT_TRUE(counts_reach(1, 0, 0, 0, 0));
  auto again = Connect(port, first.session, "");
  EXPECT_TRUE(again.reused);
  SSL_SESSION_free(again.session);
  SSL_SESSION_free(first.session);
  ASSERT_TRUE(counts_reach(2, 0, 1, 0, 0));
  {
    TlsSession c(port, kAlpnHttp11);
    ASSERT_TRUE(c.handshake());
    ASSERT_TRUE(counts_reach(2, 1, 1, 0, 0));
  }
  auto refused = Connect(port, nullptr, std::string("\x08spdy/3.1", 9));
  EXPECT_FALSE(refused.handshake);
  ASSERT_TRUE(counts_reach(2, 1, 1, 1, 0));
  {
    testing::RawHttpClient not_tls(port);  // plain HTTP to the TLS port: a failure too
    ASSERT_TRUE(not_tls.Send("GET / HTTP/1.1\r\nHost: t\r\n\r\n"));
    ASSERT_TRUE(counts_reach(2, 1, 1, 2, 0));
  }
  {
    testing::RawHttpClient silent(port);  // closes without a byte
    ASSERT_TRUE(silent.connected());
  }
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(counts_reach(2, 1, 1, 2, 0));
  {
    testing::RawHttpClient silent(port);  // silent past the header timeout
    ASSERT_TRUE(silent.connected());
    ASSERT_TRUE(counts_reach(2, 1, 1, 2, 1));
  }
}

// The plain and the TLS listener log their refusals together: one line per 10 s for the server,
// not one per listener (probe 56).
TEST_F(TlsTest, BothListenersShareOneRefusalLogLine) {
  testing::RecordingLog log;
  options_.max_connections = 1;
  StartServer();
  testing::RawHttpClient held(server_->port());
  ASSERT_TRUE(held.Send("GET /x HTTP/1.1\r\nHost: t\r\n\r\n"));
  ASSERT_TRUE(held.ReadResponse());
  testing::RawHttpClient plain(server_->port());
  EXPECT_TRUE(plain.WaitClosed(milliseconds(2000)));
  testing::RawHttpClient tls(server_->tls_port());
  EXPECT_TRUE(tls.WaitClosed(milliseconds(2000)));
  EXPECT_EQ(server_->refused_connections(), 2u);
  EXPECT_EQ(log.Find(spdlog::level::warn, "refused").size() +
                log.Find(spdlog::level::warn, "connection limit reached").size(),
            1u);
}

TEST_F(TlsTest, TheHttp2PrefaceIsRefusedAfterAlpnChoseHttp11AndServedWithoutAlpn) {
  StartServer();
  const std::string preface("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  const std::string empty_settings("\0\0\0\x04\0\0\0\0\0", 9);
  {
    TlsSession session(server_->tls_port(), kAlpnHttp11);
    ASSERT_TRUE(session.handshake());
    ASSERT_TRUE(session.Write(preface + empty_settings));
    std::string received;
    session.ReadToEnd(&received);
    EXPECT_EQ(received.rfind("HTTP/1.1 505", 0), 0u) << received;
    EXPECT_NE(received.find("needs ALPN h2"), std::string::npos) << received;
  }
  TlsSession session(server_->tls_port(), "");
  ASSERT_TRUE(session.handshake());
  ASSERT_TRUE(session.Write(preface + empty_settings));
  std::string received;
  ASSERT_TRUE(session.ReadSome(&received));
  ASSERT_GE(received.size(), 9u);
  EXPECT_EQ(received[3], '\x04') << "the server's first frame is its SETTINGS";
}

// h2c is HTTP/2 in clear: over TLS an Upgrade: h2c is ignored and the request served as
// HTTP/1.1 (RFC 9113 §3.1, as nginx does; probe 40: it was upgraded, past the ALPN chosen).
TEST_F(TlsTest, UpgradeToH2cIsIgnoredOverTls) {
  options_.h2c_upgrade = true;  // even with --http2-upgrade on
  StartServer();
  for (const std::string& alpn : {kAlpnHttp11, std::string()}) {
    TlsSession session(server_->tls_port(), alpn);
    ASSERT_TRUE(session.handshake());
    ASSERT_TRUE(session.Write(
        "GET /x HTTP/1.1\r\nHost: t\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: "
        "h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"));
    std::string received;
    ASSERT_TRUE(session.ReadSome(&received));
    EXPECT_EQ(received.rfind("HTTP/1.1 200", 0), 0u) << received;
  }
}

TEST_F(TlsTest, OnSentAndTheVersionOverTls) {
  testing::SentRecorder sent;
  handler_.sent = &sent;
  StartServer();
  TlsSession c(server_->tls_port(), kAlpnHttp11);
  ASSERT_TRUE(c.handshake());
  ASSERT_TRUE(c.Write("GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
  std::string got;
  EXPECT_EQ(c.ReadToEnd(&got), End::kCloseNotify);  // Connection: close ends cleanly
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  ASSERT_TRUE(sent.WaitForCalls(1));
  std::this_thread::sleep_for(milliseconds(20));
  ASSERT_EQ(sent.calls().size(), 1u);
  EXPECT_TRUE(sent.calls()[0].sent);
  EXPECT_EQ(handler_.version.load(), HttpVersion::kHttp11);
  EXPECT_EQ(handler_.TlsVersion(), "TLSv1.3");
}

// The TLS port's requests carry the TLS version; the plain port's none.
TEST_F(TlsTest, OnlyTheTlsPortsRequestsHaveATlsVersion) {
  StartServer();
  {
    TlsSession c(server_->tls_port(), kAlpnHttp11);
    ASSERT_TRUE(c.handshake());
    ASSERT_TRUE(c.Write("GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
    std::string got;
    EXPECT_EQ(c.ReadToEnd(&got), End::kCloseNotify);
    EXPECT_EQ(handler_.TlsVersion(), "TLSv1.3");
  }
  testing::RawHttpClient plain(server_->port());
  ASSERT_TRUE(plain.Send("GET /x HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto answer = plain.ReadResponse();
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(handler_.TlsVersion(), "");
}

// Answered from another thread, a request's disconnect watch (a TLS read) is pending while its
// response is written, and then reads the next request: keep-alive, then the idle timeout's
// close_notify, all on that one read.
TEST_F(TlsTest, KeepAliveRequestsAnsweredFromAnotherThreadThenTheIdleClose) {
  handler_.from_another_thread = true;
  options_.keepalive_timeout = milliseconds(300);
  StartServer();
  TlsSession c(server_->tls_port(), kAlpnHttp11);
  ASSERT_TRUE(c.handshake());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.Write("GET /x HTTP/1.1\r\nHost: t\r\n\r\n")) << i;
    std::string got;
    while (got.size() < 2 || got.compare(got.size() - 2, 2, "ok") != 0) {
      ASSERT_TRUE(c.ReadSome(&got)) << i << ": " << got;
    }
    EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
    std::this_thread::sleep_for(milliseconds(30));  // the next request finds the watch reading
  }
  std::string rest;
  EXPECT_EQ(c.ReadToEnd(&rest), TlsSession::End::kCloseNotify);
  EXPECT_EQ(rest, "");
}

// A pipelined request cut across an answer from another thread, over TLS: the disconnect watch
// (a TLS read) took its first part; it is stopped before the rest is read, and the TLS stream
// reads on from where the cancelled read left it (http_server_test has the plain-TCP cases).
TEST_F(TlsTest, APipelinedRequestCutAcrossAnAnswerIsReadWhole) {
  handler_.from_another_thread = true;
  StartServer();
  TlsSession c(server_->tls_port(), kAlpnHttp11);
  ASSERT_TRUE(c.handshake());
  auto read_answer = [&c](std::string* got) {
    while (got->find("\r\n\r\nok") == std::string::npos) {
      if (!c.ReadSome(got)) return false;
    }
    return true;
  };
  ASSERT_TRUE(c.Write("GET /a HTTP/1.1\r\nHost: t\r\n\r\nPOST /b HTTP/1.1\r\nHost: t\r\n"));
  std::string first;
  ASSERT_TRUE(read_answer(&first)) << first;
  EXPECT_EQ(first.rfind("HTTP/1.1 200", 0), 0u) << first;
  std::this_thread::sleep_for(milliseconds(30));  // the next request is parsed as far as it goes
  ASSERT_TRUE(c.Write("Content-Length: 5\r\n\r\nhello"));
  std::string second;
  ASSERT_TRUE(read_answer(&second)) << second;
  EXPECT_EQ(second.rfind("HTTP/1.1 200", 0), 0u) << second;
}

// One HTTP/2 frame: 9-byte header and payload.
std::string H2Frame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload) {
  std::string f;
  f += static_cast<char>((payload.size() >> 16) & 0xff);
  f += static_cast<char>((payload.size() >> 8) & 0xff);
  f += static_cast<char>(payload.size() & 0xff);
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  for (int shift = 24; shift >= 0; shift -= 8) f += static_cast<char>((stream >> shift) & 0xff);
  return f + payload;
}

// HPACK literal fields without indexing, no Huffman (names and values under 127 bytes).
std::string Hpack(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (const auto& [name, value] : fields) {
    out += '\0';
    out += static_cast<char>(name.size());
    out += name;
    out += static_cast<char>(value.size());
    out += value;
  }
  return out;
}

TEST_F(TlsTest, OnSentAndTheVersionOverH2) {
  testing::SentRecorder sent;
  handler_.sent = &sent;
  StartServer();
  TlsSession c(server_->tls_port(), kAlpnH2);
  ASSERT_TRUE(c.handshake());
  const std::string headers =
      Hpack({{":method", "GET"}, {":scheme", "https"}, {":path", "/x"}, {":authority", "t"}});
  ASSERT_TRUE(c.Write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + H2Frame(4, 0, 0, "") +
                      H2Frame(1, 0x4 | 0x1, 1, headers)));  // END_HEADERS | END_STREAM
  // Read frames until stream 1 ends (its DATA with END_STREAM carries "ok").
  std::string buf;
  bool ended = false;
  while (!ended) {
    std::string more;
    ASSERT_TRUE(c.ReadSome(&more));
    buf += more;
    while (buf.size() >= 9) {
      const std::size_t length = (static_cast<uint8_t>(buf[0]) << 16) |
                                 (static_cast<uint8_t>(buf[1]) << 8) | static_cast<uint8_t>(buf[2]);
      if (buf.size() < 9 + length) break;
      const uint8_t type = static_cast<uint8_t>(buf[3]), flags = static_cast<uint8_t>(buf[4]);
      const uint32_t stream = static_cast<uint32_t>(static_cast<uint8_t>(buf[8]));
      if (stream == 1 && (type == 0 || type == 1) && (flags & 0x1) != 0) ended = true;
      buf.erase(0, 9 + length);
    }
  }
  ASSERT_TRUE(sent.WaitForCalls(1));
  std::this_thread::sleep_for(milliseconds(20));
  ASSERT_EQ(sent.calls().size(), 1u);
  EXPECT_TRUE(sent.calls()[0].sent);
  EXPECT_EQ(handler_.version.load(), HttpVersion::kHttp2);
  EXPECT_EQ(handler_.TlsVersion(), "TLSv1.3");
}

TEST_F(TlsTest, HeaderTimeoutAnswers408ThenSendsCloseNotify) {
  options_.header_timeout = milliseconds(300);
  StartServer();
  TlsSession c(server_->tls_port(), kAlpnHttp11);
  ASSERT_TRUE(c.handshake());
  ASSERT_TRUE(c.Write("GET /x HTTP/1.1\r\nHo"));
  std::string got;
  EXPECT_EQ(c.ReadToEnd(&got), End::kCloseNotify);
  EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got;
}

TEST_F(TlsTest, BodyTimeoutAnswers408ThenSendsCloseNotify) {
  options_.body_timeout = milliseconds(300);
  StartServer();
  TlsSession c(server_->tls_port(), kAlpnHttp11);
  ASSERT_TRUE(c.handshake());
  ASSERT_TRUE(c.Write("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nabc"));
  std::string got;
  EXPECT_EQ(c.ReadToEnd(&got), End::kCloseNotify);
  EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got;
}

TEST_F(TlsTest, MalformedRequestAnswers400ThenSendsCloseNotify) {
  StartServer();
  TlsSession c(server_->tls_port(), kAlpnHttp11);
  ASSERT_TRUE(c.handshake());
  ASSERT_TRUE(c.Write("NOT HTTP AT ALL\r\n\r\n"));
  std::string got;
  EXPECT_EQ(c.ReadToEnd(&got), End::kCloseNotify);
  EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got;
}

TEST_F(TlsTest, BodyOverTheLimitAnswers413AndCloseNotifyWhileTheClientStillSends) {
  options_.max_body_bytes = 1000;
  StartServer();
  TlsSession c(server_->tls_port(), kAlpnHttp11);
  ASSERT_TRUE(c.handshake());
  // Refused from the header; the body keeps coming while the server says goodbye.
  ASSERT_TRUE(c.Write("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n" +
                      std::string(256 << 10, 'b')));
  std::string got;
  EXPECT_EQ(c.ReadToEnd(&got), End::kCloseNotify);
  EXPECT_EQ(got.rfind("HTTP/1.1 413", 0), 0u) << got;
}

TEST_F(TlsTest, SilentConnectionIsClosedWithCloseNotify) {
  options_.header_timeout = milliseconds(1000);  // past the handshake, even on a loaded machine
  StartServer();
  TlsSession c(server_->tls_port(), kAlpnHttp11);
  ASSERT_TRUE(c.handshake());
  std::string got;
  EXPECT_EQ(c.ReadToEnd(&got), End::kCloseNotify);
  EXPECT_EQ(got, "");
}

TEST_F(TlsTest, StopSendsCloseNotifyToIdleConnections) {
  StartServer();
  TlsSession h1(server_->tls_port(), kAlpnHttp11);
  ASSERT_TRUE(h1.handshake());
  ASSERT_TRUE(h1.Write("GET /x HTTP/1.1\r\nHost: t\r\n\r\n"));
  TlsSession h2(server_->tls_port(), kAlpnH2);
  ASSERT_TRUE(h2.handshake());
  ASSERT_TRUE(
      h2.Write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + std::string("\0\0\0\x04\0\0\0\0\0", 9)));
  std::this_thread::sleep_for(milliseconds(100));  // the GET is answered; h2 is idle
  const auto start = std::chrono::steady_clock::now();
  std::thread stopper([&] { server_->Stop(); });
  std::string got1, got2;
  EXPECT_EQ(h1.ReadToEnd(&got1), End::kCloseNotify);
  EXPECT_EQ(got1.rfind("HTTP/1.1 200", 0), 0u) << got1;
  EXPECT_EQ(h2.ReadToEnd(&got2), End::kCloseNotify);  // SETTINGS, GOAWAY, then close_notify
  EXPECT_NE(got2.find(std::string("\x07\0\0\0\0\0", 6)), std::string::npos);  // GOAWAY
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(3000));
}

TEST_F(TlsTest, Http2ProtocolErrorEndsWithCloseNotify) {
  StartServer();
  TlsSession c(server_->tls_port(), kAlpnH2);
  ASSERT_TRUE(c.handshake());
  ASSERT_TRUE(c.Write("GET / HTTP/1.1\r\nHost: t\r\n\r\n"));  // not the HTTP/2 preface
  std::string got;
  EXPECT_EQ(c.ReadToEnd(&got), End::kCloseNotify);
}

TEST_F(TlsTest, StopClosesAConnectionThatHasNotBegunItsHandshake) {
  options_.header_timeout = milliseconds(10000);
  options_.shutdown_timeout = milliseconds(10000);
  StartServer();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server_->tls_port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::this_thread::sleep_for(milliseconds(100));  // accepted, waiting for a ClientHello
  const auto start = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
  char buf[16];
  EXPECT_EQ(::recv(fd, buf, sizeof(buf), 0), 0);  // closed, not left hanging
  ::close(fd);
}

TEST_F(TlsTest, StopLetsAHandshakeInProgressFinishThenSaysGoodbye) {
  options_.header_timeout = milliseconds(10000);
  options_.shutdown_timeout = milliseconds(10000);
  StartServer();
  TlsSession c(server_->tls_port(), kAlpnHttp11, /*nonblocking_start=*/true);
  ASSERT_TRUE(c.started());
  std::this_thread::sleep_for(milliseconds(100));  // the server has the ClientHello
  const auto start = std::chrono::steady_clock::now();
  std::thread stopper([&] { server_->Stop(); });
  std::this_thread::sleep_for(milliseconds(100));  // Stop has begun
  ASSERT_TRUE(c.Finish());
  std::string got;
  EXPECT_EQ(c.ReadToEnd(&got), End::kCloseNotify);
  EXPECT_EQ(got, "");
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(3000));
}

}  // namespace
}  // namespace harrier
