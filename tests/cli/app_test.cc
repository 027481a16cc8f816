// The composition root in-process: a whole server built from flags, serving, and stopped by
// Stop() or by its destructor on every way out (src/cli/app.h).
#include "cli/app.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "observability/async_log_sink.h"
#include "server/raw_http_client.h"

namespace harrier {
namespace {

using testing::RawHttpClient;
using testing::RawResponse;

// Flags for a server of the example repository on loopback ports the kernel picks.
ServeFlags ExampleFlags() {
  ServeFlags flags;
  flags.model_repository = std::string(HARRIER_SOURCE_DIR) + "/examples/models";
  flags.http_address = "127.0.0.1";
  flags.http_port = 0;
  flags.grpc_port = 0;
  flags.metrics_port = 0;
  flags.http_threads = 1;
  flags.exit_timeout_secs = 2;
  return flags;
}

std::optional<RawResponse> Get(uint16_t port, const std::string& path) {
  RawHttpClient client(port);
  if (!client.connected()) return std::nullopt;
  if (!client.Send("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")) return std::nullopt;
  return client.ReadResponse();
}

bool Accepts(uint16_t port) {
  return RawHttpClient(port).connected();
}

// A socket listening on a loopback port, so that a server given that port cannot bind it.
class TakenPort {
 public:
  TakenPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        ::listen(fd_, 1) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &length) == 0) {
      port_ = ntohs(addr.sin_port);
    }
  }
  ~TakenPort() { ::close(fd_); }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

class AppTest : public ::testing::Test {
 protected:
  // The server log's sink, writing to /dev/null (the App only reads its dropped-lines count).
  AppTest() : null_fd_(::open("/dev/null", O_WRONLY)) {
    AsyncLogSink::Options options;
    options.fd = null_fd_;
    log_sink_ = std::make_unique<AsyncLogSink>(options);
  }
  ~AppTest() override {
    log_sink_->Stop(AsyncLogSink::kStopGrace);
    ::close(null_fd_);
  }

  int null_fd_;
  std::unique_ptr<AsyncLogSink> log_sink_;
};

TEST_F(AppTest, ServesOnEveryPortAndStopClosesThemAll) {
  App app(ExampleFlags(), log_sink_.get());
  ASSERT_TRUE(app.Build().ok());
  app.LoadModels();
  Status started = app.Start();
  ASSERT_TRUE(started.ok()) << started.message();
  const uint16_t http = app.http_port(), grpc = app.grpc_port(), metrics = app.metrics_port();
  ASSERT_NE(http, 0);
  ASSERT_NE(grpc, 0);
  ASSERT_NE(metrics, 0);

  auto ready = Get(http, "/v2/models/simple/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  EXPECT_TRUE(Accepts(grpc));
  // The scrape gathers every part's families: the models', the server log's, the REST port's.
  auto scrape = Get(metrics, "/metrics");
  ASSERT_TRUE(scrape);
  EXPECT_EQ(scrape->status, 200);
  EXPECT_NE(scrape->body.find("harrier_log_dropped_lines_total 0"), std::string::npos);
  EXPECT_NE(scrape->body.find("harrier_model_state{"), std::string::npos) << scrape->body;
  EXPECT_NE(scrape->body.find("harrier_http_max_connections "), std::string::npos);
  // The access log is off: its family is absent.
  EXPECT_EQ(scrape->body.find("harrier_access_log_dropped_lines_total"), std::string::npos);

  app.Stop();
  EXPECT_FALSE(Accepts(http));
  EXPECT_FALSE(Accepts(grpc));
  EXPECT_FALSE(Accepts(metrics));
  app.Stop();  // a second stop does nothing
}

// Destroyed while serving, without a Stop(): every port closes, and the access line of what it
// answered is written out.
TEST_F(AppTest, DestroyedWhileServingItClosesItsPortsAndWritesItsAccessLog) {
  uint16_t http = 0, metrics = 0;
  const std::string access_file = ::testing::TempDir() + "/app_test_access.log";
  std::remove(access_file.c_str());
  {
    ServeFlags flags = ExampleFlags();
    flags.access_log = "on";
    flags.access_log_file = access_file;
    App app(flags, log_sink_.get());
    ASSERT_TRUE(app.Build().ok());
    app.LoadModels();
    ASSERT_TRUE(app.Start().ok());
    http = app.http_port();
    metrics = app.metrics_port();
    auto scrape = Get(metrics, "/metrics");
    ASSERT_TRUE(scrape);
    EXPECT_NE(scrape->body.find("harrier_access_log_dropped_lines_total 0"), std::string::npos);
    auto live = Get(http, "/v2/health/live");
    ASSERT_TRUE(live);
    EXPECT_EQ(live->status, 200);
  }
  EXPECT_FALSE(Accepts(http));
  EXPECT_FALSE(Accepts(metrics));
  std::ifstream in(access_file);
  std::stringstream lines;
  lines << in.rdbuf();
  EXPECT_NE(lines.str().find("/v2/health/live"), std::string::npos) << lines.str();
  std::remove(access_file.c_str());
}

// A port that cannot be bound fails the start with the port's name, and what had started
// before it (the REST port) is closed again: nothing is left serving half a server.
TEST_F(AppTest, AStartThatFailsClosesWhatHadOpened) {
  TakenPort taken;
  ASSERT_NE(taken.port(), 0);
  ServeFlags flags = ExampleFlags();
  flags.grpc_port = taken.port();
  App app(flags, log_sink_.get());
  ASSERT_TRUE(app.Build().ok());
  app.LoadModels();
  Status started = app.Start();
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.message().rfind("cannot start the gRPC server: ", 0), 0u) << started.message();
  const uint16_t http = app.http_port();
  ASSERT_NE(http, 0);  // REST had opened
  EXPECT_EQ(app.grpc_port(), 0);
  EXPECT_EQ(app.metrics_port(), 0);
  app.Stop();
  EXPECT_FALSE(Accepts(http));
}

TEST_F(AppTest, ABuildThatFailsNamesWhatAndStopsCleanly) {
  ServeFlags flags = ExampleFlags();
  flags.model_repository = ::testing::TempDir() + "/no_such_repository_for_app_test";
  App app(flags, log_sink_.get());
  Status built = app.Build();
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.message().rfind("cannot use model repository '", 0), 0u) << built.message();

  ServeFlags bad_trace = ExampleFlags();
  bad_trace.trace_sample_ratio = 2;
  App traced(bad_trace, log_sink_.get());
  built = traced.Build();
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.message().rfind("tracing: --trace-sample-ratio", 0), 0u) << built.message();

  // Access control's lists are checked here, before the models load (a typo cost a full load
  // before), and its key file too (probe 74: /dev/zero was found only after every load).
  ServeFlags bad_origin = ExampleFlags();
  bad_origin.allowed_origins = {"https://ui.example/"};
  bad_origin.api_key_file = ::testing::TempDir() + "/no_such_key_file_for_app_test";
  App guarded(bad_origin, log_sink_.get());
  built = guarded.Build();
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.message().rfind("access control: --allowed-origins", 0), 0u) << built.message();
  ServeFlags keyed = ExampleFlags();
  keyed.api_key_file = bad_origin.api_key_file;
  App unreadable(keyed, log_sink_.get());
  built = unreadable.Build();
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.message().rfind("access control: cannot read the API key file", 0), 0u)
      << built.message();
}

// A stop begun while the models load (a signal during the start): the loads not begun are
// skipped, and nothing is ready.
TEST_F(AppTest, BeginShutdownBeforeTheLoadsSkipsThem) {
  App app(ExampleFlags(), log_sink_.get());
  ASSERT_TRUE(app.Build().ok());
  app.BeginShutdown();
  app.LoadModels();
  Status started = app.Start();
  ASSERT_TRUE(started.ok()) << started.message();
  auto ready = Get(app.http_port(), "/v2/models/simple/ready");
  ASSERT_TRUE(ready);
  EXPECT_NE(ready->status, 200);
  // The repository was read (its three models are in the index), and none of them loaded.
  RawHttpClient client(app.http_port());
  ASSERT_TRUE(
      client.Send("POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  auto index = client.ReadResponse();
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  for (const char* model : {"\"simple\"", "\"dense_fp32\"", "\"vocab_lookup\""})
    EXPECT_NE(index->body.find(model), std::string::npos) << index->body;
  EXPECT_EQ(index->body.find("READY"), std::string::npos) << index->body;
}

}  // namespace
}  // namespace harrier
