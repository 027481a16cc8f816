#include "scheduler/admission_controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "core/status_mapping.h"
#include "util/fake_clock.h"

namespace harrier {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using testing::FakeClock;

AdmissionController::Options NoLimits(const Clock* clock) {
  AdmissionController::Options o;
  o.clock = clock;
  o.max_inflight = 0;
  o.overload_protection = false;
  return o;
}

std::unique_ptr<AdmissionController> MakeController(const AdmissionController::Options& o) {
  auto c = AdmissionController::Create(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

std::unique_ptr<ModelAdmission> MakeModel(AdmissionController& c,
                                          std::map<std::string, std::string> params = {},
                                          std::string name = "m") {
  AdmissionController::ModelSpec spec;
  spec.name = std::move(name);
  spec.parameters = std::move(params);
  auto m = c.ForModel(spec);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

TEST(AdmissionControllerTest, CreateValidatesOptions) {
  FakeClock clock;
  auto o = NoLimits(&clock);
  o.max_inflight = -1;
  EXPECT_EQ(AdmissionController::Create(o).status().code(), StatusCode::kInvalidArgument);
  o = NoLimits(&clock);
  o.per_client = {5, 0};
  EXPECT_EQ(AdmissionController::Create(o).status().code(), StatusCode::kInvalidArgument);
  o = NoLimits(&clock);
  o.clock = nullptr;
  EXPECT_EQ(AdmissionController::Create(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(AdmissionControllerTest, DefaultsAreOverloadProtectionAndA1024InflightLimit) {
  AdmissionController::Options o;
  EXPECT_TRUE(o.overload_protection);
  EXPECT_EQ(o.max_inflight, 1024);
  EXPECT_FALSE(o.per_client.enabled());
  EXPECT_FALSE(o.per_model.enabled());
  auto c = MakeController(o);
  auto m = MakeModel(*c);
  EXPECT_TRUE(m->config().overload.enabled);
  EXPECT_FALSE(m->config().model_rate.enabled());
}

TEST(ResolveModelAdmissionTest, ParametersOverrideServerDefaults) {
  AdmissionController::Options server;
  server.per_model = {100, 100};
  server.target_queue_delay = milliseconds(7);
  struct Case {
    const char* what;
    std::map<std::string, std::string> params;
    RateLimit model_rate;
    RateLimit per_client_rate;
    bool overload;
    std::chrono::nanoseconds target;
  };
  const Case cases[] = {
      {"server defaults", {}, {100, 100}, {}, true, milliseconds(7)},
      {"model rate", {{"harrier.rate_limit.rps", "20"}}, {20, 20}, {}, true, milliseconds(7)},
      {"model rate and burst",
       {{"harrier.rate_limit.rps", "20"}, {"harrier.rate_limit.burst", "5"}},
       {20, 5},
       {},
       true,
       milliseconds(7)},
      {"burst alone uses the server's rate",
       {{"harrier.rate_limit.burst", "7"}},
       {100, 7},
       {},
       true,
       milliseconds(7)},
      {"model rate off", {{"harrier.rate_limit.rps", "off"}}, {}, {}, true, milliseconds(7)},
      {"per client",
       {{"harrier.rate_limit.per_client_rps", "0.5"}, {"harrier.rate_limit.per_client_burst", "2"}},
       {100, 100},
       {0.5, 2},
       true,
       milliseconds(7)},
      {"overload off",
       {{"harrier.overload.protection", "off"}},
       {100, 100},
       {},
       false,
       milliseconds(7)},
      {"target",
       {{"harrier.overload.target_queue_delay_us", "2500"}},
       {100, 100},
       {},
       true,
       microseconds(2500)},
      {"target 0 = derived",
       {{"harrier.overload.target_queue_delay_us", "0"}},
       {100, 100},
       {},
       true,
       microseconds(0)},
      {"other keys ignored",
       {{"session.intra_op.allow_spinning", "1"}},
       {100, 100},
       {},
       true,
       milliseconds(7)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    AdmissionController::ModelSpec spec;
    spec.parameters = c.params;
    auto config = ResolveModelAdmission(server, spec);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_EQ(config->model_rate.per_second, c.model_rate.per_second);
    EXPECT_EQ(config->model_rate.burst, c.model_rate.burst);
    EXPECT_EQ(config->per_client_rate.per_second, c.per_client_rate.per_second);
    EXPECT_EQ(config->per_client_rate.burst, c.per_client_rate.burst);
    EXPECT_EQ(config->overload.enabled, c.overload);
    EXPECT_EQ(config->overload.target_queue_delay, c.target);
  }
}

TEST(ResolveModelAdmissionTest, OverloadOptionsFromTheModel) {
  AdmissionController::ModelSpec spec;
  spec.instance_count = 3;
  spec.requests_per_run = 8;
  spec.batching_delay = microseconds(500);
  spec.parameters = {{"harrier.overload.interval_us", "50000"},
                     {"harrier.overload.max_concurrency", "64"}};
  auto config = ResolveModelAdmission({}, spec);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->overload.instance_count, 3);
  EXPECT_EQ(config->overload.requests_per_run, 8);
  EXPECT_EQ(config->overload.batching_delay, microseconds(500));
  EXPECT_EQ(config->overload.interval, milliseconds(50));
  EXPECT_EQ(config->overload.max_limit, 64);
}

TEST(ResolveModelAdmissionTest, BadValuesNameTheParameter) {
  struct Case {
    std::map<std::string, std::string> params;
    const char* key;
  };
  const Case cases[] = {
      {{{"harrier.rate_limit.rps", "fast"}}, "harrier.rate_limit.rps"},
      {{{"harrier.rate_limit.rps", "10:20"}}, "harrier.rate_limit.rps"},
      {{{"harrier.rate_limit.rps", "10"}, {"harrier.rate_limit.burst", "0"}},
       "harrier.rate_limit.burst"},
      {{{"harrier.rate_limit.per_client_burst", "3"}}, "harrier.rate_limit.per_client_burst"},
      {{{"harrier.overload.protection", "maybe"}}, "harrier.overload.protection"},
      {{{"harrier.overload.target_queue_delay_us", "-5"}},
       "harrier.overload.target_queue_delay_us"},
      {{{"harrier.overload.interval_us", "10"}}, "harrier.overload.interval_us"},
      {{{"harrier.overload.max_concurrency", "0"}}, "harrier.overload.max_concurrency"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    AdmissionController::ModelSpec spec;
    spec.parameters = c.params;
    auto config = ResolveModelAdmission({}, spec);
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(config.status().message().find(c.key), std::string::npos)
        << config.status().message();
  }
}

TEST(AdmissionControllerTest, InflightLimitWithTickets) {
  FakeClock clock;
  auto o = NoLimits(&clock);
  o.max_inflight = 3;
  auto c = MakeController(o);
  auto a = MakeModel(*c, {}, "a");
  auto b = MakeModel(*c, {}, "b");
  std::vector<AdmissionTicket> tickets;
  for (ModelAdmission* m : {a.get(), b.get(), a.get()}) {
    auto t = m->Admit("");
    ASSERT_TRUE(t.ok());
    tickets.push_back(std::move(t).value());
  }
  EXPECT_EQ(c->in_flight(), 3);
  auto refused = b->Admit("");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().message(), "server in-flight limit 3 reached; retry after 1 s");
  EXPECT_EQ(RetryAfterSeconds(refused.status()), 1);

  tickets.pop_back();  // destroying a ticket releases its slot
  EXPECT_EQ(c->in_flight(), 2);
  auto again = b->Admit("");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(c->in_flight(), 3);

  // Moving a ticket moves the slot; Release is idempotent.
  AdmissionTicket moved = std::move(again).value();
  EXPECT_TRUE(moved.held());
  AdmissionTicket other;
  other = std::move(moved);
  EXPECT_FALSE(moved.held());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_EQ(c->in_flight(), 3);
  other.Release();
  other.Release();
  EXPECT_EQ(c->in_flight(), 2);
  tickets.clear();
  EXPECT_EQ(c->in_flight(), 0);
}

TEST(AdmissionControllerTest, ModelRateLimit) {
  FakeClock clock;
  auto c = MakeController(NoLimits(&clock));
  auto m = MakeModel(*c, {{"harrier.rate_limit.rps", "2"}});
  ASSERT_TRUE(m->Admit("x").ok());
  ASSERT_TRUE(m->Admit("y").ok());
  auto refused = m->Admit("z");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "rate limit for model 'm' exceeded (2 req/s); retry after 1 s");
  EXPECT_EQ(c->in_flight(), 0);
  clock.Advance(milliseconds(500));
  EXPECT_TRUE(m->Admit("z").ok());
}

TEST(AdmissionControllerTest, RetryAfterIsTheWaitForATokenRoundedUp) {
  FakeClock clock;
  auto c = MakeController(NoLimits(&clock));
  auto m = MakeModel(*c, {{"harrier.rate_limit.rps", "0.1"}});
  ASSERT_TRUE(m->Admit("").ok());
  auto refused = m->Admit("");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(RetryAfterSeconds(refused.status()), 10);
  clock.Advance(std::chrono::milliseconds(8500));
  EXPECT_EQ(RetryAfterSeconds(m->Admit("").status()), 2);
}

TEST(AdmissionControllerTest, ServerWidePerClientLimitSpansModels) {
  FakeClock clock;
  auto o = NoLimits(&clock);
  o.per_client = {50, 2};
  auto c = MakeController(o);
  auto a = MakeModel(*c, {}, "a");
  auto b = MakeModel(*c, {}, "b");
  ASSERT_TRUE(a->Admit("x").ok());
  ASSERT_TRUE(b->Admit("x").ok());
  auto refused = a->Admit("x");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "rate limit for client 'x' exceeded (50 req/s, burst 2); retry after 1 s");
  EXPECT_TRUE(a->Admit("y").ok());  // another client is not affected
  // Anonymous requests share one key.
  ASSERT_TRUE(a->Admit("").ok());
  ASSERT_TRUE(b->Admit("").ok());
  EXPECT_EQ(a->Admit("").status().message(),
            "rate limit for anonymous clients exceeded (50 req/s, burst 2); retry after 1 s");
}

TEST(AdmissionControllerTest, PerModelPerClientLimit) {
  FakeClock clock;
  auto c = MakeController(NoLimits(&clock));
  auto a = MakeModel(*c, {{"harrier.rate_limit.per_client_rps", "1"}}, "a");
  auto b = MakeModel(*c, {}, "b");
  ASSERT_TRUE(a->Admit("x").ok());
  EXPECT_EQ(a->Admit("x").status().message(),
            "rate limit for client 'x' on model 'a' exceeded (1 req/s); retry after 1 s");
  EXPECT_TRUE(a->Admit("y").ok());
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(b->Admit("x").ok());  // b has no limit
}

// A request refused by a later check keeps nothing from the earlier ones.
TEST(AdmissionControllerTest, RefusalGivesBackEarlierTokensAndSlots) {
  FakeClock clock;
  auto o = NoLimits(&clock);
  o.max_inflight = 100;
  o.per_client = {1, 1};
  auto c = MakeController(o);
  auto m = MakeModel(
      *c, {{"harrier.rate_limit.rps", "3"}, {"harrier.rate_limit.per_client_rps", "100"}});
  ASSERT_TRUE(m->Admit("x").ok());
  // x is over the server's per-client limit: the model's bucket and x's model bucket give
  // their tokens back.
  for (int i = 0; i < 10; ++i) ASSERT_FALSE(m->Admit("x").ok());
  EXPECT_EQ(c->in_flight(), 0);
  EXPECT_TRUE(m->Admit("y").ok());
  EXPECT_TRUE(m->Admit("z").ok());
  EXPECT_EQ(m->Admit("w").status().message(),
            "rate limit for model 'm' exceeded (3 req/s); retry after 1 s");
}

TEST(AdmissionControllerTest, LongClientIdsAreShortenedInMessagesAndKeys) {
  FakeClock clock;
  auto o = NoLimits(&clock);
  o.per_client = {1, 1};
  auto c = MakeController(o);
  auto m = MakeModel(*c);
  const std::string long_a(10'000, 'a');
  std::string long_b = long_a;
  long_b.back() = 'b';  // same prefix, different key
  ASSERT_TRUE(m->Admit(long_a).ok());
  ASSERT_TRUE(m->Admit(long_b).ok());
  auto refused = m->Admit(long_a);
  ASSERT_FALSE(refused.ok());
  EXPECT_LT(refused.status().message().size(), 200u);
  EXPECT_NE(refused.status().message().find(std::string(64, 'a') + "...'"), std::string::npos);
}

TEST(AdmissionControllerTest, OverloadRefusalAndFeedback) {
  FakeClock clock;
  AdmissionController::Options o;
  o.clock = &clock;
  auto c = MakeController(o);
  auto m = MakeModel(*c);
  ASSERT_EQ(m->overload().limit, 16);  // before anything is measured
  std::vector<AdmissionTicket> held;
  for (int i = 0; i < 16; ++i) {
    auto t = m->Admit("");
    ASSERT_TRUE(t.ok()) << i;
    held.push_back(std::move(t).value());
  }
  auto refused = m->Admit("");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().message(),
            "model 'm' is at its concurrency limit of 16 (queue delay target 1.0 ms); retry "
            "after 1 s");
  EXPECT_EQ(c->in_flight(), 16);
  // Once a run is measured, the prediction decides: 1 ms runs, one instance, 15 requests
  // queued: 15 ms > 4 × the 1 ms target.
  m->RunStarted({0, 1, 1});
  clock.Advance(std::chrono::milliseconds(1));
  m->RunFinished({0, 1, 1}, std::chrono::milliseconds(1), std::chrono::milliseconds(1));
  held[0].OnComplete(0, 100'000);
  held[0].Release();
  EXPECT_EQ(m->overload().limit, 4096);
  EXPECT_EQ(m->overload().in_flight, 15);
  EXPECT_FALSE(m->Peek("").ok());
  auto over = m->Admit("");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(),
            "model 'm' is overloaded: predicted queue delay 15 ms over its 1.0 ms target "
            "(burst allowance 8x); retry after 1 s");
  // The autoscaling gauge reads the same prediction (harrier_predicted_queue_wait_seconds).
  EXPECT_EQ(m->PredictedQueueWait(), std::optional(std::chrono::nanoseconds(milliseconds(15))));
  held.clear();
  EXPECT_EQ(c->in_flight(), 0);
  EXPECT_TRUE(m->Peek("").ok());
  EXPECT_TRUE(m->Admit("").ok());
}

// Without overload protection there is no prediction, and so no gauge sample.
TEST(AdmissionControllerTest, NoPredictedQueueWaitWithoutOverloadProtection) {
  FakeClock clock;
  auto c = MakeController(NoLimits(&clock));
  EXPECT_EQ(MakeModel(*c)->PredictedQueueWait(), std::nullopt);
  AdmissionController::Options on;
  on.clock = &clock;
  auto protected_models = MakeController(on);
  EXPECT_EQ(MakeModel(*protected_models)->PredictedQueueWait(),
            std::optional(std::chrono::nanoseconds(0)));  // nothing measured yet
}

// Peek answers what Admit would, with the same message, and takes nothing.
TEST(AdmissionControllerTest, PeekTakesNothing) {
  FakeClock clock;
  auto o = NoLimits(&clock);
  o.max_inflight = 2;
  o.per_client = {1, 1};
  auto c = MakeController(o);
  auto m = MakeModel(*c, {{"harrier.rate_limit.rps", "2"}, {"harrier.rate_limit.burst", "2"}});
  EXPECT_TRUE(m->Peek("a").ok());
  EXPECT_TRUE(m->Peek("a").ok());  // nothing taken by the first
  auto a = m->Admit("a");
  ASSERT_TRUE(a.ok());
  // Client a's one token is gone; b's bucket is unknown, so full.
  Status peek_a = m->Peek("a");
  auto admit_a = m->Admit("a");
  ASSERT_FALSE(admit_a.ok());
  EXPECT_EQ(peek_a.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(peek_a.message(), admit_a.status().message());
  EXPECT_TRUE(m->Peek("b").ok());
  auto b = m->Admit("b");
  ASSERT_TRUE(b.ok());
  // Two held: the in-flight limit.
  Status full = m->Peek("c");
  EXPECT_EQ(full.message(), "server in-flight limit 2 reached; retry after 1 s");
  EXPECT_EQ(c->in_flight(), 2);
  a->Release();
  b->Release();
  // The model's bucket (2 tokens, both taken): its wait, rounded up.
  Status rate = m->Peek("c");
  EXPECT_EQ(rate.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(rate.message().find("rate limit for model 'm' exceeded (2 req/s)"), std::string::npos)
      << rate.message();
  EXPECT_EQ(RetryAfterSeconds(rate), 1);
  clock.Advance(std::chrono::seconds(1));
  EXPECT_TRUE(m->Peek("c").ok());
  EXPECT_EQ(c->in_flight(), 0);
}

// Peek without the overload check (a request that may be urgent) sees only the other limits.
TEST(AdmissionControllerTest, PeekCanSkipOverloadProtection) {
  FakeClock clock;
  AdmissionController::Options o;
  o.clock = &clock;
  auto c = MakeController(o);
  AdmissionController::ModelSpec spec;
  spec.name = "m";
  spec.parameters = {{"harrier.overload.max_concurrency", "1"}};
  auto m = std::move(c->ForModel(spec)).value();
  auto held = m->Admit("");
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(m->Peek("").code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(m->Peek("", /*check_overload=*/false).ok());
}

TEST(RetryAfterSecondsTest, ReadsTheSuffix) {
  struct Case {
    Status status;
    int want;
  };
  const Case cases[] = {
      {Status::Ok(), 0},
      {InvalidArgument("x; retry after 5 s"), 0},
      {ResourceExhausted("queue full"), 1},
      {ResourceExhausted("rate limit; retry after 7 s"), 7},
      {ResourceExhausted("rate limit; retry after 7 s").WithContext("model 'm'"), 7},
      {ResourceExhausted("; retry after 0 s"), 1},
      {ResourceExhausted("; retry after x s"), 1},
      {ResourceExhausted("; retry after  s"), 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.status.ToString());
    EXPECT_EQ(RetryAfterSeconds(c.status), c.want);
  }
}

// Requests admitted and completed from several threads at once: every slot comes back.
TEST(AdmissionControllerTest, ConcurrentSmoke) {
  FakeClock clock;
  AdmissionController::Options o;
  o.clock = &clock;
  o.max_inflight = 6;
  o.per_client = {1e6, 1000};
  auto c = MakeController(o);
  auto m = MakeModel(*c, {{"harrier.rate_limit.rps", "1000000"}});
  std::atomic<int> admitted{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::string client = "client-" + std::to_string(t);
      for (int i = 0; i < 20'000; ++i) {
        if (t == 0 && i % 10 == 0) clock.Advance(microseconds(100));
        auto ticket = m->Admit(client);
        if (!ticket.ok()) {
          EXPECT_EQ(ticket.status().code(), StatusCode::kResourceExhausted);
          refused++;
          continue;
        }
        admitted++;
        EXPECT_LE(c->in_flight(), 6);
        ticket->OnComplete(i % 5 == 0 ? 2'000'000 : 100'000, 100'000);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted + refused, 80'000);
  EXPECT_GT(admitted.load(), 0);
  EXPECT_EQ(c->in_flight(), 0);
  EXPECT_EQ(m->overload().in_flight, 0);
}

}  // namespace
}  // namespace harrier
