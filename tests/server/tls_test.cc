// TLS through HttpServer with an OpenSSL client on a blocking socket: ALPN, session tickets
// and their key rotation, client certificates. Certificates are made with the openssl tool.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "server/http_server.h"

namespace harrier {
namespace {

using std::chrono::milliseconds;

class OkHandler : public HttpHandler {
 public:
  void Handle(HttpRequest, HttpResponder respond) override {
    HttpResponse r;
    r.body = "ok";
    respond(std::move(r));
  }
};

struct ClientResult {
  bool handshake = false;
  bool reused = false;
  std::string alpn;
  std::string answer;  // the first bytes of the response to one HTTP/1.1 GET
  SSL_SESSION* session = nullptr;
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

TEST_F(TlsTest, PlainHttpOffLeavesOnlyTheTlsPort) {
  options_.plain_http = false;
  StartServer();
  EXPECT_EQ(server_->port(), 0);
  auto r = Connect(server_->tls_port(), nullptr, "");
  EXPECT_TRUE(r.handshake);
  SSL_SESSION_free(r.session);
}

TEST_F(TlsTest, TicketsResumeAndThePreviousKeyStillOpensThemAfterARotation) {
  options_.tls_ticket_key_rotation = std::chrono::seconds(1);
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
  std::this_thread::sleep_for(milliseconds(1200));
  auto after_rotation = Connect(port, first.session, "");
  EXPECT_TRUE(after_rotation.reused);
  SSL_SESSION_free(after_rotation.session);
  // Two rotations later that key is gone (and the ticket's lifetime is over): a full handshake.
  std::this_thread::sleep_for(milliseconds(1300));
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

}  // namespace
}  // namespace harrier
