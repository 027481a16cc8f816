#include "auth/auth_handler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "observability/text_exposition.h"
#include "util/fake_clock.h"
#include "util/recording_access_log.h"

namespace harrier::auth {
namespace {

namespace fs = std::filesystem;

// The handler behind AuthHandler: records what reaches it. With `grpc`, answers transport
// errors as the gRPC handler does (a grpc-status in the head).
class RecordingHandler : public HttpHandler {
 public:
  explicit RecordingHandler(bool grpc = false) : grpc_(grpc) {}
  std::optional<HttpResponse> Precheck(const HttpRequest& head) override {
    ++prechecks;
    (void)head;
    return std::nullopt;
  }
  void Handle(HttpRequest&& request, HttpResponder respond) override {
    handled.push_back(request.auth_key_id);
    respond(HttpResponse{});
  }
  std::shared_ptr<HttpStreamHandler> OpenStream(const HttpRequest& head,
                                                std::shared_ptr<HttpStreamWriter> writer,
                                                HttpResponse* response_head) override {
    (void)writer;
    (void)response_head;
    authorizer = head.message_authorizer;
    return nullptr;
  }
  std::shared_ptr<MessageAuthorizer> authorizer;  // what the last OpenStream was handed
  std::optional<HttpResponse> TransportError(int status, std::string_view message,
                                             const HttpRequest& request,
                                             std::string_view code) override {
    refusal_target = request.target;
    refusal_code = code;
    if (!grpc_) return std::nullopt;
    HttpResponse r;
    r.headers.emplace_back("content-type", "application/grpc");
    r.headers.emplace_back("grpc-status", status == 401 ? "16" : status == 403 ? "7" : "8");
    r.headers.emplace_back("grpc-message", std::string(message));
    return r;
  }
  int prechecks = 0;
  std::vector<std::string> handled;  // auth_key_id of each request handled
  std::string refusal_target;        // what the last TransportError was told
  std::string refusal_code;

 private:
  bool grpc_;
};

std::string Header(const HttpResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return std::string(v);
  return {};
}

HttpRequest Request(std::string method, std::string target,
                    std::vector<std::pair<std::string, std::string>> headers = {}) {
  HttpRequest r;
  r.method = std::move(method);
  r.target = std::move(target);
  r.headers = std::move(headers);
  return r;
}

class AuthHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("harrier_auth_handler_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    const std::string path = (dir_ / "keys.json").string();
    std::ofstream(path) << R"({"keys": [
        {"id": "ci", "sha256": ")"
                        << Sha256Hex(Sha256("ci-key"))
                        << R"(", "scopes": ["inference", "metadata"], "rate_limit": "1:2"},
        {"id": "ops", "sha256": ")"
                        << Sha256Hex(Sha256("ops-key"))
                        << R"(", "scopes": ["admin", "metadata"]}]})";
    ApiKeyStore::Options options;
    options.path = path;
    options.poll_interval = std::chrono::milliseconds(0);
    auto store = ApiKeyStore::Create(options);
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(store).value();
  }
  void TearDown() override { fs::remove_all(dir_); }

  AuthHandler::Options Opts(AuthHandler::Routes routes = AuthHandler::Routes::kHttp) {
    AuthHandler::Options o;
    o.routes = routes;
    o.keys = store_.get();
    o.counters = &counters_;
    o.access_log = &log_;
    o.clock = &clock_;
    return o;
  }

  // Precheck, then (when it lets the request through) Handle, as the transports call them.
  static HttpResponse Serve(AuthHandler& auth, HttpRequest request) {
    if (auto early = auth.Precheck(request)) return *early;
    HttpResponse out;
    out.status = -1;
    auth.Handle(std::move(request), [&](HttpResponse r) { out = std::move(r); });
    return out;
  }

  fs::path dir_;
  std::unique_ptr<ApiKeyStore> store_;
  AuthCounters counters_;
  testing::RecordingAccessLog log_;
  testing::FakeClock clock_;
};

TEST_F(AuthHandlerTest, AMissingKeyIs401WithAChallengeAndNeverReachesTheChain) {
  RecordingHandler next;
  AuthHandler auth(&next, Opts());
  HttpResponse r = Serve(auth, Request("POST", "/v2/models/simple/infer"));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(Header(r, "WWW-Authenticate"), "Bearer realm=\"harrier\"");
  EXPECT_NE(r.body.find("an API key is required"), std::string::npos);
  EXPECT_FALSE(Header(r, "X-Request-Id").empty());
  EXPECT_EQ(next.prechecks, 0);  // refused before the chain's own Precheck (admission)
  EXPECT_TRUE(next.handled.empty());
  EXPECT_EQ(counters_.refusals(RefusalReason::kMissingKey), 1u);
  ASSERT_EQ(log_.records().size(), 1u);
  EXPECT_EQ(log_.records()[0].status, 401);
  EXPECT_EQ(log_.records()[0].key_id, "");
}

TEST_F(AuthHandlerTest, AWrongOrMalformedKeyIs401) {
  RecordingHandler next;
  AuthHandler auth(&next, Opts());
  const struct {
    std::pair<std::string, std::string> header;
    RefusalReason reason;
  } cases[] = {
      {{"authorization", "Bearer nope"}, RefusalReason::kInvalidKey},
      {{"x-api-key", "nope"}, RefusalReason::kInvalidKey},
      {{"authorization", "Basic Y2k6a2V5"}, RefusalReason::kMalformedKey},
      {{"authorization", "Bearer"}, RefusalReason::kMalformedKey},
      {{"authorization", "Bearer  "}, RefusalReason::kMalformedKey},
      {{"authorization", "Bearerci-key"}, RefusalReason::kMalformedKey},
      {{"x-api-key", ""}, RefusalReason::kMalformedKey},
      {{"x-api-key", "ci\x01key"}, RefusalReason::kMalformedKey},
      {{"x-api-key", std::string(513, 'k')}, RefusalReason::kMalformedKey},
      {{"authorization", "Bearer " + std::string(100000, 'k')}, RefusalReason::kMalformedKey},
  };
  uint64_t invalid = 0, malformed = 0;
  for (const auto& c : cases) {
    HttpResponse r = Serve(auth, Request("GET", "/v2/models/simple", {c.header}));
    EXPECT_EQ(r.status, 401) << c.header.second.substr(0, 40);
    EXPECT_EQ(Header(r, "WWW-Authenticate"), "Bearer realm=\"harrier\", error=\"invalid_token\"");
    (c.reason == RefusalReason::kInvalidKey ? invalid : malformed)++;
  }
  EXPECT_EQ(counters_.refusals(RefusalReason::kInvalidKey), invalid);
  EXPECT_EQ(counters_.refusals(RefusalReason::kMalformedKey), malformed);
  EXPECT_TRUE(next.handled.empty());
}

TEST_F(AuthHandlerTest, AKeyWithTheScopeReachesTheChainWithItsId) {
  RecordingHandler next;
  AuthHandler auth(&next, Opts());
  EXPECT_EQ(
      Serve(auth, Request("GET", "/v2/models/simple", {{"authorization", "Bearer ci-key"}})).status,
      200);
  EXPECT_EQ(
      Serve(auth, Request("GET", "/v2/models/simple", {{"authorization", "bearer   ops-key "}}))
          .status,
      200);
  EXPECT_EQ(Serve(auth, Request("POST", "/v1/chat/completions", {{"x-api-key", "ci-key"}})).status,
            200);
  EXPECT_EQ(next.handled, (std::vector<std::string>{"ci", "ops", "ci"}));
  EXPECT_EQ(next.prechecks, 3);  // the chain's own Precheck still runs
  EXPECT_EQ(store_->keys()->at(0).counters->allowed.load(), 2u);
}

TEST_F(AuthHandlerTest, AKeyWithoutTheScopeIs403) {
  RecordingHandler next;
  AuthHandler auth(&next, Opts());
  HttpResponse r = Serve(
      auth, Request("POST", "/v2/repository/models/simple/unload", {{"x-api-key", "ci-key"}}));
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("does not have the scope 'admin'"), std::string::npos);
  EXPECT_EQ(Header(r, "WWW-Authenticate"), "");
  EXPECT_EQ(
      Serve(auth, Request("POST", "/v2/models/simple/infer", {{"x-api-key", "ops-key"}})).status,
      403);
  EXPECT_EQ(Serve(auth, Request("POST", "/v2/repository/models/simple/unload",
                                {{"x-api-key", "ops-key"}}))
                .status,
            200);
  EXPECT_EQ(counters_.refusals(RefusalReason::kForbidden), 2u);
  EXPECT_EQ(store_->keys()->at(0).counters->forbidden.load(), 1u);
  ASSERT_EQ(log_.records().size(), 2u);
  EXPECT_EQ(log_.records()[0].key_id, "ci");  // the id, never the key
  EXPECT_EQ(log_.records()[0].error.find("ci-key"), std::string::npos);
}

// The front end shapes the refusal (the OpenAI handler answers /v1/ with OpenAI's error object,
// the reason as its code): it is told the request and the reason.
TEST_F(AuthHandlerTest, TheFrontEndIsToldTheRequestAndTheReason) {
  RecordingHandler next;
  AuthHandler auth(&next, Opts());
  HttpResponse r = Serve(auth, Request("POST", "/v1/chat/completions", {{"x-api-key", "bad"}}));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(next.refusal_target, "/v1/chat/completions");
  EXPECT_EQ(next.refusal_code, "invalid_key");
  EXPECT_EQ(r.body, R"({"error":"unknown API key"})");  // the front end left it to the default
}

TEST_F(AuthHandlerTest, HealthIsOpen) {
  RecordingHandler next;
  AuthHandler auth(&next, Opts());
  EXPECT_EQ(Serve(auth, Request("GET", "/v2/health/live")).status, 200);
  EXPECT_EQ(Serve(auth, Request("GET", "/v2/health/ready")).status, 200);
  EXPECT_EQ(counters_.refusals(RefusalReason::kMissingKey), 0u);
}

TEST_F(AuthHandlerTest, AKeysRateLimitIs429WithRetryAfter) {
  RecordingHandler next;
  AuthHandler auth(&next, Opts());
  auto infer = [&] {
    return Serve(auth, Request("POST", "/v2/models/simple/infer", {{"x-api-key", "ci-key"}}));
  };
  EXPECT_EQ(infer().status, 200);  // burst 2
  EXPECT_EQ(infer().status, 200);
  HttpResponse r = infer();
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(Header(r, "Retry-After"), "1");
  EXPECT_NE(r.body.find("rate limit for API key 'ci' exceeded (1 req/s, burst 2)"),
            std::string::npos)
      << r.body;
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(infer().status, 200);
  EXPECT_EQ(counters_.refusals(RefusalReason::kRateLimited), 1u);
  EXPECT_EQ(store_->keys()->at(0).counters->rate_limited.load(), 1u);
  // A key without a limit of its own is not held.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(Serve(auth, Request("GET", "/v2/models/simple", {{"x-api-key", "ops-key"}})).status,
              200);
  }
}

// A gRPC stream is checked again for each request it carries: the first is the one Precheck
// charged; each later one takes a token of the key's limit; a key gone from the file refuses
// the next request (the front end then ends the stream).
TEST_F(AuthHandlerTest, EachRequestOfAStreamIsCheckedAgain) {
  RecordingHandler next(/*grpc=*/true);
  AuthHandler auth(&next, Opts(AuthHandler::Routes::kGrpc));
  const HttpRequest head = Request("POST", "/inference.GRPCInferenceService/ModelStreamInfer",
                                   {{"authorization", "Bearer ci-key"}});
  ASSERT_FALSE(auth.Precheck(head).has_value());  // token 1 of the burst of 2
  (void)auth.OpenStream(head, nullptr, nullptr);
  ASSERT_NE(next.authorizer, nullptr);
  MessageAuthorizer& each = *next.authorizer;
  EXPECT_EQ(each.AuthorizeNext().http_status, 0);  // the first request: Precheck's token
  EXPECT_EQ(each.AuthorizeNext().http_status, 0);  // token 2
  const MessageAuthorizer::Refusal limited = each.AuthorizeNext();
  EXPECT_EQ(limited.http_status, 429);
  EXPECT_NE(limited.message.find("rate limit for API key 'ci' exceeded"), std::string::npos)
      << limited.message;
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(each.AuthorizeNext().http_status, 0);
  // The key leaves the file while the stream is open.
  std::ofstream((dir_ / "keys.json").string())
      << R"({"keys": [{"id": "ops", "sha256": ")" << Sha256Hex(Sha256("ops-key"))
      << R"(", "scopes": ["admin", "metadata"]}]})";
  ASSERT_TRUE(store_->CheckForChange());
  const MessageAuthorizer::Refusal revoked = each.AuthorizeNext();
  EXPECT_EQ(revoked.http_status, 401);
  EXPECT_EQ(revoked.message, "unknown API key");
  EXPECT_EQ(counters_.refusals(RefusalReason::kInvalidKey), 1u);
}

// A credential header twice is malformed, whatever the two say (a proxy reading the last one
// would see another key than the server reading the first).
TEST_F(AuthHandlerTest, ACredentialHeaderGivenTwiceIsMalformed) {
  RecordingHandler next;
  AuthHandler auth(&next, Opts());
  for (const auto& headers : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"authorization", "Bearer ci-key"}, {"authorization", "Bearer ops-key"}},
           {{"authorization", "Bearer ci-key"}, {"authorization", "Bearer ci-key"}},
           {{"x-api-key", "ci-key"}, {"x-api-key", "nope"}}}) {
    HttpResponse r = Serve(auth, Request("GET", "/v2/models/simple", headers));
    EXPECT_EQ(r.status, 401) << headers[0].first;
    EXPECT_NE(r.body.find("malformed credentials"), std::string::npos) << r.body;
  }
  EXPECT_TRUE(next.handled.empty());
  // One of each: Authorization wins, as documented.
  EXPECT_EQ(Serve(auth, Request("GET", "/v2/models/simple",
                                {{"authorization", "Bearer ops-key"}, {"x-api-key", "nope"}}))
                .status,
            200);
}

TEST_F(AuthHandlerTest, GrpcRefusalsAreAnsweredInTheFrontEndsOwnForm) {
  RecordingHandler next(/*grpc=*/true);
  AuthHandler auth(&next, Opts(AuthHandler::Routes::kGrpc));
  const std::string infer = "/inference.GRPCInferenceService/ModelInfer";
  HttpResponse none = Serve(auth, Request("POST", infer));
  EXPECT_EQ(none.status, 200);
  EXPECT_EQ(Header(none, "grpc-status"), "16");  // UNAUTHENTICATED
  HttpResponse scope =
      Serve(auth, Request("POST", "/inference.GRPCInferenceService/RepositoryModelLoad",
                          {{"authorization", "Bearer ci-key"}}));
  EXPECT_EQ(Header(scope, "grpc-status"), "7");  // PERMISSION_DENIED
  EXPECT_EQ(Serve(auth, Request("POST", infer, {{"authorization", "Bearer ci-key"}})).status, 200);
  EXPECT_EQ(Header(Serve(auth, Request("POST", "/inference.GRPCInferenceService/ServerLive")),
                   "grpc-status"),
            "");  // open: reached the handler
  ASSERT_EQ(log_.records().size(), 2u);
  EXPECT_EQ(log_.records()[0].protocol, "grpc");
  EXPECT_EQ(log_.records()[0].status, 16);  // the grpc-status, as the gRPC access lines hold
  EXPECT_EQ(log_.records()[1].status, 7);
  // The RPC, as an accepted call's line names it, not the HTTP/2 method (probe 32).
  EXPECT_EQ(log_.records()[0].method, "ModelInfer");
  EXPECT_EQ(log_.records()[1].method, "RepositoryModelLoad");
  EXPECT_EQ(next.handled, (std::vector<std::string>{"ci", ""}));
}

TEST_F(AuthHandlerTest, HandleChecksAgainWhenPrecheckWasSkipped) {
  RecordingHandler next;
  AuthHandler auth(&next, Opts());
  HttpResponse out;
  auth.Handle(Request("POST", "/v2/models/simple/infer"), [&](HttpResponse r) { out = r; });
  EXPECT_EQ(out.status, 401);
  EXPECT_TRUE(next.handled.empty());
}

TEST_F(AuthHandlerTest, ATritonRestrictionNeedsItsHeaderAndValue) {
  RecordingHandler next;
  AuthHandler::Options o = Opts();
  o.keys = nullptr;  // restrictions alone, as with Triton's flags
  auto parsed = ParseApiRestrictions({"model-repository,health:admin-key=s3cret"}, "--flag");
  ASSERT_TRUE(parsed.ok());
  o.restrictions = *parsed;
  AuthHandler auth(&next, o);
  const std::string unload = "/v2/repository/models/simple/unload";
  EXPECT_EQ(Serve(auth, Request("POST", unload)).status, 403);
  EXPECT_EQ(Serve(auth, Request("POST", unload, {{"admin-key", "wrong"}})).status, 403);
  EXPECT_EQ(Serve(auth, Request("POST", unload, {{"admin-key", "s3cret!"}})).status, 403);
  EXPECT_EQ(Serve(auth, Request("POST", unload, {{"admin-key", "s3cret"}})).status, 200);
  EXPECT_EQ(Serve(auth, Request("GET", "/v2/health/live")).status, 403);  // health restricted too
  EXPECT_EQ(Serve(auth, Request("POST", "/v2/models/simple/infer")).status, 200);  // not restricted
  EXPECT_EQ(counters_.refusals(RefusalReason::kRestricted), 4u);
  // The header given twice is refused whatever the order: a proxy that reads the other value
  // would disagree about which was sent (probe 47: the first decided).
  EXPECT_EQ(Serve(auth, Request("POST", unload, {{"admin-key", "s3cret"}, {"admin-key", "wrong"}}))
                .status,
            403);
  EXPECT_EQ(Serve(auth, Request("POST", unload, {{"admin-key", "wrong"}, {"admin-key", "s3cret"}}))
                .status,
            403);
  EXPECT_EQ(Serve(auth, Request("POST", unload, {{"admin-key", "s3cret"}, {"admin-key", "s3cret"}}))
                .status,
            403);
  // A model's readiness is health, as in Triton and as gRPC's ModelReady (probe 47).
  EXPECT_EQ(Serve(auth, Request("GET", "/v2/models/simple/ready")).status, 403);
}

TEST_F(AuthHandlerTest, WithKeysTheKeyComesBeforeTheRestriction) {
  RecordingHandler next;
  AuthHandler::Options o = Opts();
  auto parsed = ParseApiRestrictions({"model-repository:admin-key=s3cret"}, "--flag");
  ASSERT_TRUE(parsed.ok());
  o.restrictions = *parsed;
  AuthHandler auth(&next, o);
  const std::string index = "/v2/repository/index";
  HttpResponse none = Serve(auth, Request("POST", index));
  EXPECT_EQ(none.status, 401);  // not told which header the API wants
  EXPECT_EQ(none.body.find("admin-key"), std::string::npos);
  EXPECT_EQ(Serve(auth, Request("POST", index, {{"x-api-key", "ops-key"}})).status, 403);
  EXPECT_EQ(Serve(auth, Request("POST", index, {{"x-api-key", "ops-key"}, {"admin-key", "s3cret"}}))
                .status,
            200);
  EXPECT_EQ(next.handled, (std::vector<std::string>{"ops"}));
  EXPECT_EQ(counters_.refusals(RefusalReason::kMissingKey), 1u);
  EXPECT_EQ(counters_.refusals(RefusalReason::kRestricted), 1u);
}

// Step 0: a browser's cross-site request is refused before its key is looked at (a proxy that
// adds the key to every request would otherwise lend it to any page; probe 61), and counted.
TEST_F(AuthHandlerTest, ABrowsersCrossSiteRequestIsRefusedWhateverItsKey) {
  RecordingHandler next;
  AuthHandler::Options o = Opts();
  o.guard_browsers = true;
  o.allowed_origins = {"https://ui.example"};
  AuthHandler auth(&next, o);
  HttpResponse r =
      Serve(auth, Request("POST", "/v2/repository/models/simple/unload",
                          {{"x-api-key", "ops-key"}, {"origin", "http://evil.example"}}));
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(next.refusal_code, "cross_site");
  EXPECT_EQ(counters_.refusals(RefusalReason::kCrossSite), 1u);
  EXPECT_TRUE(next.handled.empty());
  r = Serve(auth, Request("POST", "/v2/repository/models/simple/unload",
                          {{"x-api-key", "ops-key"}, {"origin", "https://ui.example"}}));
  EXPECT_NE(r.status, 403);
  EXPECT_EQ(next.handled, std::vector<std::string>{"ops"});

  // The guard alone (no keys, no restrictions): everything else passes.
  RecordingHandler open_next;
  AuthHandler::Options guard_only;
  guard_only.counters = &counters_;
  guard_only.guard_browsers = true;
  AuthHandler open(&open_next, guard_only);
  EXPECT_EQ(Serve(open, Request("POST", "/v2/logging", {{"sec-fetch-site", "cross-site"}})).status,
            403);
  Serve(open, Request("POST", "/v2/logging"));
  Serve(open, Request("GET", "/v2/models/simple", {{"origin", "http://evil.example"}}));
  EXPECT_EQ(open_next.handled.size(), 2u);
}

TEST_F(AuthHandlerTest, MetricsNameKeysAndReasons) {
  RecordingHandler next;
  AuthHandler auth(&next, Opts());
  Serve(auth, Request("GET", "/v2/models/simple", {{"x-api-key", "ci-key"}}));
  Serve(auth, Request("GET", "/v2/models/simple"));
  TextExposition out;
  AppendAuthMetrics(counters_, store_.get(), &out);
  const std::string text = out.Text();
  EXPECT_NE(text.find("harrier_auth_requests_total{key=\"ci\",outcome=\"allowed\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("harrier_auth_refusals_total{reason=\"missing_key\"} 1"), std::string::npos);
  EXPECT_NE(text.find("harrier_auth_key_file_reloads_total{result=\"failed\"} 0"),
            std::string::npos);
  EXPECT_EQ(text.find("ci-key"), std::string::npos);
}

}  // namespace
}  // namespace harrier::auth
