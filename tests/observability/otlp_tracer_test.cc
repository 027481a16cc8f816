#include "observability/otlp_tracer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <simdjson.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "harrier/trace.h"
#include "observability/otlp_json.h"
#include "observability/text_exposition.h"

namespace harrier {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using TimePoint = RequestTrace::TimePoint;

// ---- Helpers ----------------------------------------------------------------------------------

std::string Hex(std::span<const uint8_t> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 0xF]);
  }
  return s;
}

uint64_t LowBits(const std::array<uint8_t, 16>& trace_id) {
  uint64_t v = 0;
  for (size_t i = 8; i < 16; ++i) v = v << 8 | trace_id[i];
  return v;
}

SpanContext Context(uint8_t trace_byte, uint8_t span_byte) {
  SpanContext c;
  c.trace_id.fill(trace_byte);
  c.span_id.fill(span_byte);
  c.flags = SpanContext::kSampled;
  return c;
}

// A span read back from the JSON, with its attributes as strings ("int:5", "str:x").
struct ParsedSpan {
  std::string trace_id, span_id, parent_span_id, trace_state, name;
  int64_t kind = 0;
  int64_t start = 0, end = 0;
  std::map<std::string, std::string> attributes;
  std::vector<std::pair<std::string, std::string>> links;
  bool has_status = false;
  int64_t status_code = 0;
  std::string status_message;
};

std::string AttributeValue(simdjson::dom::element value) {
  simdjson::dom::object o = value;
  for (auto [key, v] : o) {
    if (key == "stringValue") return "str:" + std::string(std::string_view(v));
    if (key == "intValue") return "int:" + std::string(std::string_view(v));
    if (key == "boolValue") return bool(v) ? "bool:true" : "bool:false";
  }
  return "?";
}

std::map<std::string, std::string> Attributes(simdjson::dom::array list) {
  std::map<std::string, std::string> out;
  for (simdjson::dom::element a : list) {
    out[std::string(std::string_view(a["key"]))] = AttributeValue(a["value"]);
  }
  return out;
}

struct ParsedBody {
  std::map<std::string, std::string> resource;
  std::string scope_name, scope_version;
  std::vector<ParsedSpan> spans;

  const ParsedSpan* Find(std::string_view name) const {
    for (const ParsedSpan& s : spans)
      if (s.name == name) return &s;
    return nullptr;
  }
};

ParsedBody Parse(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(json);
  ParsedBody body;
  simdjson::dom::array resource_spans = doc["resourceSpans"];
  EXPECT_EQ(resource_spans.size(), 1u);
  simdjson::dom::element rs = resource_spans.at(0);
  body.resource = Attributes(rs["resource"]["attributes"]);
  simdjson::dom::array scope_spans = rs["scopeSpans"];
  EXPECT_EQ(scope_spans.size(), 1u);
  simdjson::dom::element ss = scope_spans.at(0);
  body.scope_name = std::string(std::string_view(ss["scope"]["name"]));
  body.scope_version = std::string(std::string_view(ss["scope"]["version"]));
  for (simdjson::dom::element s : simdjson::dom::array(ss["spans"])) {
    ParsedSpan p;
    p.trace_id = std::string(std::string_view(s["traceId"]));
    p.span_id = std::string(std::string_view(s["spanId"]));
    std::string_view text;
    if (s["parentSpanId"].get(text) == simdjson::SUCCESS) p.parent_span_id = std::string(text);
    if (s["traceState"].get(text) == simdjson::SUCCESS) p.trace_state = std::string(text);
    p.name = std::string(std::string_view(s["name"]));
    p.kind = int64_t(s["kind"]);
    p.start = std::stoll(std::string(std::string_view(s["startTimeUnixNano"])));
    p.end = std::stoll(std::string(std::string_view(s["endTimeUnixNano"])));
    simdjson::dom::array list;
    if (s["attributes"].get(list) == simdjson::SUCCESS) p.attributes = Attributes(list);
    if (s["links"].get(list) == simdjson::SUCCESS) {
      for (simdjson::dom::element l : list) {
        p.links.emplace_back(std::string_view(l["traceId"]), std::string_view(l["spanId"]));
      }
    }
    simdjson::dom::object status;
    if (s["status"].get(status) == simdjson::SUCCESS) {
      p.has_status = true;
      p.status_code = int64_t(status["code"]);
      if (status["message"].get(text) == simdjson::SUCCESS) p.status_message = std::string(text);
    }
    body.spans.push_back(std::move(p));
  }
  return body;
}

// A record whose stages are 1 ms apart from `base`, every stage reached.
RequestTrace FullHttpRecord(TimePoint base) {
  RequestTrace t;
  t.parent = Context(0x11, 0x22);
  t.tracestate = "congo=t61rcWkgMzE";
  t.server = Context(0x11, 0x33);
  t.name = "POST /v2/models/{model}/infer";
  t.protocol = "http";
  t.transport = "HTTP/1.1";
  t.target = "/v2/models/resnet/versions/3/infer?x=1";
  t.request_id = "req-1";
  t.model = "resnet";
  t.model_version = 3;
  t.status = 200;
  t.request_bytes = 1234;
  t.response_bytes = 567;
  auto at = [&](int ms) { return base + milliseconds(ms); };
  t.received = at(1);
  t.body_received = at(2);
  t.decoded = at(3);
  t.batch_start = at(4);
  t.infer_start = at(5);
  t.infer_end = at(6);
  t.batch_end = at(7);
  t.encoded = at(8);
  t.sent = at(9);
  t.batch_size = 4;
  t.batch_requests = 3;
  return t;
}

OtlpTracer::Options ResourceOptions() {
  OtlpTracer::Options o;
  o.service_name = "harrier-test";
  o.service_version = "1.2.3";
  o.service_instance_id = "host-42";
  return o;
}

std::unique_ptr<OtlpTracer> MakeTracer(OtlpTracer::Options options) {
  auto tracer = OtlpTracer::Create(std::move(options));
  EXPECT_TRUE(tracer.ok()) << tracer.status().message();
  return std::move(tracer).value();
}

// The post hook of a test: records bodies, answers from a script, can be held.
class FakeCollector {
 public:
  std::function<bool(const std::string&)> Post() {
    return [this](const std::string& body) {
      std::unique_lock<std::mutex> lock(mu_);
      held_cv_.wait(lock, [&] { return !hold_; });
      bodies_.push_back(body);
      cv_.notify_all();
      if (!answers_.empty()) {
        const bool answer = answers_.front();
        answers_.erase(answers_.begin());
        return answer;
      }
      return default_answer_;
    };
  }
  void Answer(std::vector<bool> answers, bool then) {
    std::lock_guard<std::mutex> lock(mu_);
    answers_ = std::move(answers);
    default_answer_ = then;
  }
  void Hold(bool hold) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      hold_ = hold;
    }
    held_cv_.notify_all();
  }
  size_t posts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_.size();
  }
  std::vector<std::string> bodies() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  bool WaitForPosts(size_t n, milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return bodies_.size() >= n; });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_, held_cv_;
  std::vector<std::string> bodies_;
  std::vector<bool> answers_;
  bool default_answer_ = true;
  bool hold_ = false;
};

std::string Metrics(const OtlpTracer& tracer) {
  TextExposition out;
  tracer.AppendMetrics(&out);
  return out.Text();
}

using ::testing::HasSubstr;

// ---- Create ---------------------------------------------------------------------------------

// The start's "tracing on" line names the endpoint without its password (probe 77).
TEST(OtlpTracerCreateTest, RedactedUrlHidesAPasswordOnly) {
  EXPECT_EQ(RedactedUrl("http://collector:4318/v1/traces"), "http://collector:4318/v1/traces");
  EXPECT_EQ(RedactedUrl("https://user:s3cret@collector/v1/traces?x=1"),
            "https://user:REDACTED@collector/v1/traces?x=1");
  EXPECT_EQ(RedactedUrl("http://user@collector/"), "http://user@collector/");
  // Not a URL libcurl reads: the user information goes whole.
  EXPECT_EQ(RedactedUrl("http://user:s3cret@a b/"), "http://REDACTED@a b/");
  // A password with '/', or a '#' that libcurl reads as a fragment, or no scheme (probe 80).
  EXPECT_EQ(RedactedUrl("http://alice:ab/cd@host:99999/"), "http://REDACTED@host:99999/");
  EXPECT_EQ(RedactedUrl("http://alice:1234#Xy9@host/"), "http://REDACTED@host/");
  EXPECT_EQ(RedactedUrl("user:secret@host/x?next=http://y"), "REDACTED@host/x?next=http://y");
  // A password that starts with digits, then '/' or '?': libcurl reads host and port (probe 81).
  EXPECT_EQ(RedactedUrl("http://alice:12/cd@collector:4318"), "http://REDACTED@collector:4318");
  EXPECT_EQ(RedactedUrl("http://bob:2024?Pa55@collector:4318"), "http://REDACTED@collector:4318");
  // No scheme, "://" inside the password: not taken for one.
  EXPECT_EQ(RedactedUrl("alice:Pw1://rest@collector:4318"), "REDACTED@collector:4318");
}

TEST(OtlpTracerCreateTest, ValidatesOptions) {
  auto with = [](auto change) {
    OtlpTracer::Options o;
    o.endpoint = "http://collector:4318/v1/traces";
    change(o);
    return OtlpTracer::Create(std::move(o)).status().code();
  };
  EXPECT_EQ(with([](auto&) {}), StatusCode::kOk);
  EXPECT_EQ(with([](auto& o) { o.endpoint = ""; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.endpoint = "collector:4318"; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.endpoint = "ftp://collector/"; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.endpoint = "http://"; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.endpoint = "http://:4318/"; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.endpoint = "https://collector"; }), StatusCode::kOk);
  // libcurl's parser: a port out of range, a space in the host (probe 74: both started tracing
  // and every export failed).
  EXPECT_EQ(with([](auto& o) { o.endpoint = "http://127.0.0.1:99999/v1/traces"; }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.endpoint = "http://a b/"; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.endpoint = "http://collector:0/"; }),
            StatusCode::kInvalidArgument);  // probe 77
  EXPECT_EQ(with([](auto& o) { o.endpoint = "http://[::1]:4318/"; }), StatusCode::kOk);
  EXPECT_EQ(with([](auto& o) { o.endpoint = "http://collector:4318/v1/traces#x"; }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.endpoint = "http://alice:12/cd@collector:4318"; }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.endpoint = "http://alice:p%2Fw@collector:4318/"; }),
            StatusCode::kOk);
  // Added to the clock: past an hour it overflowed, and the export thread spun (probe 74).
  EXPECT_EQ(with([](auto& o) { o.export_interval = std::chrono::hours(2); }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.export_interval = std::chrono::milliseconds::max(); }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.max_queue = OtlpTracer::kMaxQueue + 1; }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.sample_ratio = -0.1; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.sample_ratio = 1.5; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.sample_ratio = std::nan(""); }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.max_queue = 0; }), StatusCode::kInvalidArgument);
  // A test hook needs no endpoint.
  EXPECT_EQ(with([](auto& o) {
              o.endpoint = "";
              o.post = [](const std::string&) { return true; };
            }),
            StatusCode::kOk);
}

// ---- Sampling and ids -----------------------------------------------------------------------

OtlpTracer::Options Sampling(double ratio) {
  OtlpTracer::Options o;
  o.sample_ratio = ratio;
  o.post = [](const std::string&) { return true; };
  return o;
}

TEST(OtlpTracerSamplingTest, RatioOneTracesEveryRequestAndZeroNone) {
  auto all = MakeTracer(Sampling(1.0));
  auto none = MakeTracer(Sampling(0.0));
  for (int i = 0; i < 10000; ++i) {
    ASSERT_TRUE(all->Start(std::nullopt).has_value());
    ASSERT_FALSE(none->Start(std::nullopt).has_value());
  }
}

TEST(OtlpTracerSamplingTest, RatioHalfTracesHalfByTheTraceIdRule) {
  auto tracer = MakeTracer(Sampling(0.5));
  constexpr int kRequests = 100000;
  int traced = 0;
  for (int i = 0; i < kRequests; ++i) {
    const auto context = tracer->Start(std::nullopt);
    if (!context) continue;
    ++traced;
    // TraceIdRatioBased: a traced id's last 8 bytes are below 0.5 * 2^64.
    ASSERT_LT(LowBits(context->trace_id), uint64_t{1} << 63);
  }
  // Binomial(100000, 0.5): sd 158; 5 sd either side.
  EXPECT_NEAR(traced, kRequests / 2, 800);
}

TEST(OtlpTracerSamplingTest, RatioTenthIsStatisticallyATenth) {
  auto tracer = MakeTracer(Sampling(0.1));
  int traced = 0;
  for (int i = 0; i < 100000; ++i) traced += tracer->Start(std::nullopt).has_value() ? 1 : 0;
  EXPECT_NEAR(traced, 10000, 500);  // sd 95
}

TEST(OtlpTracerSamplingTest, ASampledParentIsFollowedWhateverTheRatio) {
  auto tracer = MakeTracer(Sampling(0.0));
  const auto parent = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  ASSERT_TRUE(parent);
  const auto context =
      tracer->Start(ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
  ASSERT_TRUE(context.has_value());
  EXPECT_EQ(context->trace_id, parent->trace_id);
  EXPECT_NE(context->span_id, parent->span_id);
  EXPECT_TRUE(context->valid());
  EXPECT_TRUE(context->sampled());
}

TEST(OtlpTracerSamplingTest, AnUnsampledParentIsFollowedWhateverTheRatio) {
  auto tracer = MakeTracer(Sampling(1.0));
  EXPECT_FALSE(
      tracer->Start(ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")));
}

TEST(OtlpTracerSamplingTest, AnInvalidParentFallsBackToTheRatioWithANewTrace) {
  const std::string invalid = "00-00000000000000000000000000000000-00f067aa0ba902b7-01";
  EXPECT_FALSE(MakeTracer(Sampling(0.0))->Start(ParseTraceparent(invalid)));
  const auto context = MakeTracer(Sampling(1.0))->Start(ParseTraceparent(invalid));
  ASSERT_TRUE(context.has_value());
  EXPECT_TRUE(context->valid());
  EXPECT_TRUE(context->sampled());
}

TEST(OtlpTracerSamplingTest, IdsAreNonZeroAndDistinctAcrossThreads) {
  auto tracer = MakeTracer(Sampling(1.0));
  constexpr int kPerThread = 20000;
  std::vector<SpanContext> a(kPerThread), b(kPerThread);
  auto fill = [&](std::vector<SpanContext>* out) {
    for (auto& c : *out) c = *tracer->Start(std::nullopt);
  };
  std::thread t1(fill, &a), t2(fill, &b);
  t1.join();
  t2.join();
  std::set<std::string> trace_ids, span_ids;
  for (const auto* v : {&a, &b}) {
    for (const SpanContext& c : *v) {
      ASSERT_TRUE(c.valid());
      trace_ids.insert(Hex(c.trace_id));
      span_ids.insert(Hex(c.span_id));
    }
  }
  EXPECT_EQ(trace_ids.size(), 2u * kPerThread);
  EXPECT_EQ(span_ids.size(), 2u * kPerThread);
}

// ---- JSON -----------------------------------------------------------------------------------

constexpr int64_t kOffsetNs = 1'700'000'000'000'000'000;

int64_t Unix(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count() +
         kOffsetNs;
}

TEST(OtlpTraceJsonTest, ResourceAndScope) {
  const ParsedBody body = Parse(OtlpTraceJson({}, ResourceOptions(), kOffsetNs));
  EXPECT_EQ(body.resource.at("service.name"), "str:harrier-test");
  EXPECT_EQ(body.resource.at("service.version"), "str:1.2.3");
  EXPECT_EQ(body.resource.at("service.instance.id"), "str:host-42");
  EXPECT_EQ(body.resource.at("telemetry.sdk.name"), "str:harrier");
  EXPECT_EQ(body.resource.at("telemetry.sdk.language"), "str:cpp");
  EXPECT_EQ(body.scope_name, "harrier");
  EXPECT_EQ(body.scope_version, "1.2.3");
  EXPECT_TRUE(body.spans.empty());
}

TEST(OtlpTraceJsonTest, DefaultInstanceIdIsHostAndPid) {
  OtlpTracer::Options o;
  const ParsedBody body = Parse(OtlpTraceJson({}, o, 0));
  EXPECT_THAT(body.resource.at("service.instance.id"),
              ::testing::EndsWith("-" + std::to_string(getpid())));
}

TEST(OtlpTraceJsonTest, AFullHttpRecordIsAServerSpanAndSevenStageSpans) {
  const TimePoint base = steady_clock::now();
  RequestTrace t = FullHttpRecord(base);
  const SpanContext peer1 = Context(0x44, 0x55), peer2 = Context(0x66, 0x77);
  t.batch_peers = std::make_shared<const std::vector<SpanContext>>(
      std::vector<SpanContext>{peer1, t.server, peer2});
  const ParsedBody body = Parse(OtlpTraceJson({&t, 1}, ResourceOptions(), kOffsetNs));
  ASSERT_EQ(body.spans.size(), 8u);

  const std::string trace_id = Hex(t.server.trace_id);
  const ParsedSpan& server = body.spans[0];
  EXPECT_EQ(server.name, "POST /v2/models/{model}/infer");
  EXPECT_EQ(server.kind, 2);
  EXPECT_EQ(server.trace_id, trace_id);
  EXPECT_EQ(server.span_id, Hex(t.server.span_id));
  EXPECT_EQ(server.parent_span_id, Hex(t.parent.span_id));
  EXPECT_EQ(server.trace_state, "congo=t61rcWkgMzE");
  EXPECT_EQ(server.start, Unix(t.received));
  EXPECT_EQ(server.end, Unix(t.sent));
  EXPECT_FALSE(server.has_status);
  EXPECT_EQ(server.attributes, (std::map<std::string, std::string>{
                                   {"http.request.method", "str:POST"},
                                   {"http.route", "str:/v2/models/{model}/infer"},
                                   {"url.path", "str:/v2/models/resnet/versions/3/infer"},
                                   {"http.response.status_code", "int:200"},
                                   {"url.scheme", "str:http"},
                                   {"network.protocol.name", "str:http"},
                                   {"network.protocol.version", "str:1.1"},
                                   {"harrier.request_id", "str:req-1"},
                                   {"harrier.model", "str:resnet"},
                                   {"harrier.model_version", "int:3"},
                                   {"harrier.request_bytes", "int:1234"},
                                   {"harrier.response_bytes", "int:567"},
                               }));

  struct Expected {
    const char* name;
    TimePoint start, end;
  };
  const Expected stages[] = {
      {"receive", t.received, t.body_received},
      {"decode", t.body_received, t.decoded},
      {"queue", t.decoded, t.batch_start},
      {"batch", t.batch_start, t.batch_end},
      {"infer", t.infer_start, t.infer_end},
      {"encode", t.batch_end, t.encoded},
      {"send", t.encoded, t.sent},
  };
  std::set<std::string> ids = {server.span_id};
  for (size_t i = 0; i < std::size(stages); ++i) {
    const ParsedSpan& s = body.spans[i + 1];
    SCOPED_TRACE(stages[i].name);
    EXPECT_EQ(s.name, stages[i].name);
    EXPECT_EQ(s.kind, 1);
    EXPECT_EQ(s.trace_id, trace_id);
    EXPECT_EQ(s.start, Unix(stages[i].start));
    EXPECT_EQ(s.end, Unix(stages[i].end));
    EXPECT_EQ(s.trace_state, "");
    EXPECT_FALSE(s.has_status);
    EXPECT_EQ(s.span_id.size(), 16u);
    EXPECT_NE(s.span_id, "0000000000000000");
    ids.insert(s.span_id);
    const std::string& expected_parent =
        s.name == "infer" ? body.Find("batch")->span_id : server.span_id;
    EXPECT_EQ(s.parent_span_id, expected_parent);
    if (s.name != "batch") {
      EXPECT_TRUE(s.links.empty());
      EXPECT_TRUE(s.attributes.empty());
    }
  }
  EXPECT_EQ(ids.size(), 8u) << "span ids are distinct";

  const ParsedSpan* batch = body.Find("batch");
  EXPECT_EQ(batch->attributes, (std::map<std::string, std::string>{
                                   {"harrier.batch.size", "int:4"},
                                   {"harrier.batch.requests", "int:3"},
                               }));
  // Every peer but the request's own server span.
  EXPECT_EQ(batch->links, (std::vector<std::pair<std::string, std::string>>{
                              {Hex(peer1.trace_id), Hex(peer1.span_id)},
                              {Hex(peer2.trace_id), Hex(peer2.span_id)},
                          }));
}

TEST(OtlpTraceJsonTest, AGenerationHasQueuePromptGenerateSpansAndTokenCounts) {
  const TimePoint base = steady_clock::now();
  auto at = [&](int ms) { return base + milliseconds(ms); };
  RequestTrace t;
  t.server = Context(0x21, 0x31);
  t.name = "POST /v1/chat/completions";
  t.protocol = "http";
  t.transport = "HTTP/2";
  t.target = "/v1/chat/completions";
  t.request_id = "stream-1";
  t.model = "llm";
  t.model_version = 1;
  t.status = 200;
  t.received = at(1);
  t.body_received = at(2);
  t.decoded = at(3);
  t.prompt_start = at(10);
  t.first_token = at(40);
  t.last_token = at(900);
  t.encoded = at(901);
  t.sent = at(902);
  t.prompt_tokens = 31;
  t.completion_tokens = 64;
  t.reused_prompt_tokens = 16;
  const ParsedBody body = Parse(OtlpTraceJson({&t, 1}, ResourceOptions(), kOffsetNs));
  ASSERT_EQ(body.spans.size(), 8u);
  const ParsedSpan& server = body.spans[0];
  EXPECT_EQ(server.attributes.at("gen_ai.usage.input_tokens"), "int:31");
  EXPECT_EQ(server.attributes.at("gen_ai.usage.output_tokens"), "int:64");
  EXPECT_EQ(server.attributes.at("harrier.generation.reused_prompt_tokens"), "int:16");
  struct Expected {
    const char* name;
    TimePoint start, end;
  };
  const Expected stages[] = {
      {"receive", t.received, t.body_received},
      {"decode", t.body_received, t.decoded},
      {"queue", t.decoded, t.prompt_start},
      {"prompt", t.prompt_start, t.first_token},
      {"generate", t.first_token, t.last_token},
      {"encode", t.last_token, t.encoded},
      {"send", t.encoded, t.sent},
  };
  for (size_t i = 0; i < std::size(stages); ++i) {
    const ParsedSpan& s = body.spans[i + 1];
    SCOPED_TRACE(stages[i].name);
    EXPECT_EQ(s.name, stages[i].name);
    EXPECT_EQ(s.start, Unix(stages[i].start));
    EXPECT_EQ(s.end, Unix(stages[i].end));
    EXPECT_EQ(s.parent_span_id, server.span_id);
  }
  // A tensor inference's record has none of this.
  RequestTrace plain = FullHttpRecord(base);
  const ParsedBody p = Parse(OtlpTraceJson({&plain, 1}, ResourceOptions(), kOffsetNs));
  EXPECT_EQ(p.spans[0].attributes.count("gen_ai.usage.input_tokens"), 0u);
  EXPECT_EQ(p.Find("prompt"), nullptr);
}

TEST(OtlpTraceJsonTest, ARootSpanHasNoParentAndNoTraceState) {
  RequestTrace t = FullHttpRecord(steady_clock::now());
  t.parent = SpanContext{};
  t.tracestate.clear();
  t.transport = "HTTP/2";
  t.tls_version = "TLSv1.3";
  t.name = "GET /v2/health/ready";
  t.target = "/v2/health/ready";
  t.model.clear();
  t.model_version = 0;
  const ParsedBody body = Parse(OtlpTraceJson({&t, 1}, ResourceOptions(), kOffsetNs));
  const ParsedSpan& server = body.spans.at(0);
  EXPECT_EQ(server.parent_span_id, "");
  EXPECT_EQ(server.trace_state, "");
  EXPECT_EQ(server.attributes.at("http.request.method"), "str:GET");
  EXPECT_EQ(server.attributes.at("network.protocol.version"), "str:2");
  // Over TLS: the scheme, and the TLS version as OpenTelemetry's conventions name it.
  EXPECT_EQ(server.attributes.at("url.scheme"), "str:https");
  EXPECT_EQ(server.attributes.at("tls.protocol.name"), "str:tls");
  EXPECT_EQ(server.attributes.at("tls.protocol.version"), "str:1.3");
  EXPECT_EQ(server.attributes.count("harrier.model"), 0u);
  EXPECT_EQ(server.attributes.count("harrier.model_version"), 0u);
  EXPECT_TRUE(body.Find("batch")->links.empty());
}

// A value past kMaxAttributeValueBytes is cut at a character and marked, so that a request that
// names a 64 KB model cannot make its spans (and a batch of them) that large.
TEST(OtlpTraceJsonTest, LongAttributeValuesAreCutAtACharacterAndMarked) {
  RequestTrace t = FullHttpRecord(steady_clock::now());
  t.model = std::string(kMaxAttributeValueBytes - 1, 'm') + "\xc3\xa9" + std::string(60000, 'm');
  t.error = std::string(kMaxAttributeValueBytes, 'e');  // at the bound: whole
  const ParsedBody body = Parse(OtlpTraceJson({&t, 1}, ResourceOptions(), kOffsetNs));
  const ParsedSpan& server = body.spans.at(0);
  // The two-byte character would straddle the bound: it goes with the rest.
  EXPECT_EQ(server.attributes.at("harrier.model"),
            "str:" + std::string(kMaxAttributeValueBytes - 1, 'm') + "...(truncated)");
  EXPECT_EQ(server.attributes.at("harrier.error"), "str:" + t.error);

  // The status message is cut the same way (probe 79: it stayed whole), and text that is not
  // UTF-8 is cut at the bound, its bytes '?', not stepped back over to nothing.
  t.status = 503;
  t.error = std::string(5000, '\x80');
  const ParsedBody failed = Parse(OtlpTraceJson({&t, 1}, ResourceOptions(), kOffsetNs));
  const std::string cut = std::string(kMaxAttributeValueBytes, '?') + "...(truncated)";
  EXPECT_EQ(failed.spans.at(0).status_message, cut);
  EXPECT_EQ(failed.spans.at(0).attributes.at("harrier.error"), "str:" + cut);
}

TEST(OtlpTraceJsonTest, UnreachedStagesHaveNoSpans) {
  // Refused while decoding: 400, never queued or run; the error is encoded after decode.
  const TimePoint base = steady_clock::now();
  RequestTrace t = FullHttpRecord(base);
  t.batch_start = t.infer_start = t.infer_end = t.batch_end = TimePoint{};
  t.status = 400;
  t.error = "unexpected input 'x'";
  const ParsedBody body = Parse(OtlpTraceJson({&t, 1}, ResourceOptions(), kOffsetNs));
  std::vector<std::string> names;
  for (const ParsedSpan& s : body.spans) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"POST /v2/models/{model}/infer", "receive", "decode",
                                             "encode", "send"}));
  EXPECT_EQ(body.Find("encode")->start, Unix(t.decoded));
  // A client error is not the server span's error, but the message is kept.
  EXPECT_FALSE(body.spans[0].has_status);
  EXPECT_EQ(body.spans[0].attributes.at("harrier.error"), "str:unexpected input 'x'");

  // Refused before decoding finished: encode starts when the body was in.
  t.decoded = TimePoint{};
  const ParsedBody early = Parse(OtlpTraceJson({&t, 1}, ResourceOptions(), kOffsetNs));
  EXPECT_EQ(early.spans.size(), 4u);  // server, receive, encode, send
  EXPECT_EQ(early.Find("decode"), nullptr);
  EXPECT_EQ(early.Find("encode")->start, Unix(t.body_received));
}

TEST(OtlpTraceJsonTest, AServerSpanWithoutItsEndsUsesItsStages) {
  RequestTrace t = FullHttpRecord(steady_clock::now());
  const TimePoint first = t.body_received, last = t.encoded;
  t.received = TimePoint{};
  t.sent = TimePoint{};
  const ParsedBody body = Parse(OtlpTraceJson({&t, 1}, ResourceOptions(), kOffsetNs));
  EXPECT_EQ(body.spans[0].start, Unix(first));
  EXPECT_EQ(body.spans[0].end, Unix(last));
  EXPECT_EQ(body.Find("receive"), nullptr);
  EXPECT_EQ(body.Find("send"), nullptr);
  EXPECT_EQ(body.spans.size(), 6u);
}

TEST(OtlpTraceJsonTest, ServerErrorsSetTheSpanStatus) {
  RequestTrace t = FullHttpRecord(steady_clock::now());
  t.status = 503;
  t.error = "model 'resnet' is unavailable";
  const ParsedBody body = Parse(OtlpTraceJson({&t, 1}, ResourceOptions(), kOffsetNs));
  ASSERT_TRUE(body.spans[0].has_status);
  EXPECT_EQ(body.spans[0].status_code, 2);
  EXPECT_EQ(body.spans[0].status_message, "model 'resnet' is unavailable");
  EXPECT_EQ(body.spans[0].attributes.at("harrier.error"), "str:model 'resnet' is unavailable");
}

TEST(OtlpTraceJsonTest, GrpcAttributesAndStatus) {
  RequestTrace t = FullHttpRecord(steady_clock::now());
  t.protocol = "grpc";
  t.transport = "gRPC";
  t.name = "ModelInfer";
  t.target = "/inference.GRPCInferenceService/ModelInfer";
  struct Case {
    int code;
    bool error;
  };
  for (const Case c :
       {Case{0, false}, Case{3, false}, Case{5, false}, Case{8, false}, Case{2, true},
        Case{4, true}, Case{12, true}, Case{13, true}, Case{14, true}, Case{15, true}}) {
    SCOPED_TRACE(c.code);
    t.status = c.code;
    t.error = c.code == 0 ? "" : "failed";
    const ParsedBody body = Parse(OtlpTraceJson({&t, 1}, ResourceOptions(), kOffsetNs));
    const ParsedSpan& s = body.spans.at(0);
    EXPECT_EQ(s.attributes.at("rpc.system"), "str:grpc");
    EXPECT_EQ(s.attributes.at("rpc.service"), "str:inference.GRPCInferenceService");
    EXPECT_EQ(s.attributes.at("rpc.method"), "str:ModelInfer");
    EXPECT_EQ(s.attributes.at("rpc.grpc.status_code"), "int:" + std::to_string(c.code));
    EXPECT_EQ(s.attributes.count("http.request.method"), 0u);
    EXPECT_EQ(s.attributes.count("url.path"), 0u);
    EXPECT_EQ(s.has_status, c.error);
    if (c.error) {
      EXPECT_EQ(s.status_code, 2);
    }
  }
}

TEST(OtlpTraceJsonTest, StringsAreEscaped) {
  RequestTrace t = FullHttpRecord(steady_clock::now());
  t.model = "we\"ird\\model\nname\x01 caf\xc3\xa9";
  t.status = 500;
  t.error = std::string("bad \xff\xfe bytes\t\"quoted\"");
  t.request_id = "</script>";
  const std::string json = OtlpTraceJson({&t, 1}, ResourceOptions(), kOffsetNs);
  const ParsedBody body = Parse(json);
  const ParsedSpan& s = body.spans.at(0);
  EXPECT_EQ(s.attributes.at("harrier.model"), "str:" + t.model);  // valid UTF-8 kept as is
  // Invalid UTF-8 has its non-ASCII bytes replaced, so the body stays valid JSON.
  EXPECT_EQ(s.status_message, "bad ?? bytes\t\"quoted\"");
  EXPECT_EQ(s.attributes.at("harrier.error"), "str:bad ?? bytes\t\"quoted\"");
  EXPECT_EQ(s.attributes.at("harrier.request_id"), "str:</script>");
}

TEST(OtlpTraceJsonTest, TheApiKeyIdIsASpanAttributeWhenThereIsOne) {
  RequestTrace t = FullHttpRecord(steady_clock::now());
  EXPECT_EQ(Parse(OtlpTraceJson({&t, 1}, ResourceOptions(), kOffsetNs))
                .spans.at(0)
                .attributes.count("harrier.auth.key_id"),
            0u);
  t.key_id = "ci";
  const ParsedSpan s = Parse(OtlpTraceJson({&t, 1}, ResourceOptions(), kOffsetNs)).spans.at(0);
  EXPECT_EQ(s.attributes.at("harrier.auth.key_id"), "str:ci");
}

TEST(OtlpTraceJsonTest, ManyRecordsInOneBody) {
  const TimePoint base = steady_clock::now();
  std::vector<RequestTrace> records;
  for (int i = 0; i < 3; ++i) {
    records.push_back(FullHttpRecord(base));
    records.back().server = Context(static_cast<uint8_t>(0x10 + i), 0x01);
  }
  const ParsedBody body = Parse(OtlpTraceJson(records, ResourceOptions(), kOffsetNs));
  EXPECT_EQ(body.spans.size(), 24u);
  std::set<std::string> traces;
  for (const ParsedSpan& s : body.spans) traces.insert(s.trace_id);
  EXPECT_EQ(traces.size(), 3u);
}

// ---- Queue, export, retries -----------------------------------------------------------------

OtlpTracer::Options Exporting(FakeCollector* collector) {
  OtlpTracer::Options o = ResourceOptions();
  o.sample_ratio = 1.0;
  o.export_interval = std::chrono::hours(1);  // only full batches and Flush export
  o.post = collector->Post();
  return o;
}

TEST(OtlpTracerTest, MetricsStartAtZeroWithEveryLabel) {
  FakeCollector collector;
  auto tracer = MakeTracer(Exporting(&collector));
  const std::string text = Metrics(*tracer);
  EXPECT_THAT(text, HasSubstr("# TYPE harrier_trace_spans_exported_total counter\n"
                              "harrier_trace_spans_exported_total 0\n"));
  EXPECT_THAT(text, HasSubstr("harrier_trace_spans_dropped_total{reason=\"queue_full\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("harrier_trace_spans_dropped_total{reason=\"export_failed\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("harrier_trace_export_requests_total{result=\"ok\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("harrier_trace_export_requests_total{result=\"failed\"} 0\n"));
}

TEST(OtlpTracerTest, AFullBatchIsExportedWithoutWaitingForTheInterval) {
  FakeCollector collector;
  auto options = Exporting(&collector);
  options.max_export_batch = 3;
  auto tracer = MakeTracer(options);
  const TimePoint base = steady_clock::now();
  tracer->Submit(FullHttpRecord(base));
  tracer->Submit(FullHttpRecord(base));
  EXPECT_FALSE(collector.WaitForPosts(1, milliseconds(100)));
  tracer->Submit(FullHttpRecord(base));
  ASSERT_TRUE(collector.WaitForPosts(1, std::chrono::seconds(10)));
  EXPECT_EQ(Parse(collector.bodies()[0]).spans.size(), 24u);
}

TEST(OtlpTracerTest, TheIntervalExportsAPartialBatch) {
  FakeCollector collector;
  auto options = Exporting(&collector);
  options.export_interval = milliseconds(20);
  auto tracer = MakeTracer(options);
  tracer->Submit(FullHttpRecord(steady_clock::now()));
  ASSERT_TRUE(collector.WaitForPosts(1, std::chrono::seconds(10)));
}

TEST(OtlpTracerTest, FlushExportsEverythingInBatches) {
  FakeCollector collector;
  auto options = Exporting(&collector);
  options.max_export_batch = 4;
  auto tracer = MakeTracer(options);
  EXPECT_TRUE(tracer->Flush(milliseconds(0))) << "nothing to flush";
  for (int i = 0; i < 10; ++i) tracer->Submit(FullHttpRecord(steady_clock::now()));
  ASSERT_TRUE(tracer->Flush(std::chrono::seconds(10)));
  size_t spans = 0;
  for (const std::string& body : collector.bodies()) {
    const size_t n = Parse(body).spans.size();
    EXPECT_LE(n, 4u * 8u);
    spans += n;
  }
  EXPECT_EQ(spans, 80u);
  const std::string text = Metrics(*tracer);
  EXPECT_THAT(text, HasSubstr("harrier_trace_spans_exported_total 80\n"));
  EXPECT_THAT(text, HasSubstr("harrier_trace_export_requests_total{result=\"ok\"} " +
                              std::to_string(collector.posts()) + "\n"));
}

TEST(OtlpTracerTest, FlushTimesOutWhileTheCollectorHangs) {
  FakeCollector collector;
  collector.Hold(true);
  auto tracer = MakeTracer(Exporting(&collector));
  tracer->Submit(FullHttpRecord(steady_clock::now()));
  EXPECT_FALSE(tracer->Flush(milliseconds(50)));
  collector.Hold(false);
  EXPECT_TRUE(tracer->Flush(std::chrono::seconds(10)));
  EXPECT_EQ(collector.posts(), 1u);
}

TEST(OtlpTracerTest, AFullQueueDropsAndCountsTheRecordsSpans) {
  FakeCollector collector;
  auto options = Exporting(&collector);
  options.max_queue = 2;
  auto tracer = MakeTracer(options);
  const TimePoint base = steady_clock::now();
  tracer->Submit(FullHttpRecord(base));
  tracer->Submit(FullHttpRecord(base));
  tracer->Submit(FullHttpRecord(base));  // 8 spans dropped
  RequestTrace partial = FullHttpRecord(base);
  partial.batch_start = partial.infer_start = partial.infer_end = partial.batch_end = {};
  tracer->Submit(std::move(partial));  // server, receive, decode, encode, send: 5 dropped
  EXPECT_THAT(Metrics(*tracer),
              HasSubstr("harrier_trace_spans_dropped_total{reason=\"queue_full\"} 13\n"));
  ASSERT_TRUE(tracer->Flush(std::chrono::seconds(10)));
  EXPECT_THAT(Metrics(*tracer), HasSubstr("harrier_trace_spans_exported_total 16\n"));
  // Exported records leave room again.
  tracer->Submit(FullHttpRecord(base));
  ASSERT_TRUE(tracer->Flush(std::chrono::seconds(10)));
  EXPECT_THAT(Metrics(*tracer), HasSubstr("harrier_trace_spans_exported_total 24\n"));
  EXPECT_THAT(Metrics(*tracer),
              HasSubstr("harrier_trace_spans_dropped_total{reason=\"queue_full\"} 13\n"));
}

TEST(OtlpTracerTest, AFailedExportIsRetriedWithBackoff) {
  FakeCollector collector;
  collector.Answer({false, false}, true);
  auto tracer = MakeTracer(Exporting(&collector));
  tracer->Submit(FullHttpRecord(steady_clock::now()));
  const auto start = steady_clock::now();
  ASSERT_TRUE(tracer->Flush(std::chrono::seconds(10)));
  EXPECT_GE(steady_clock::now() - start, milliseconds(300)) << "100 ms, then 200 ms";
  EXPECT_EQ(collector.posts(), 3u);
  const std::string text = Metrics(*tracer);
  EXPECT_THAT(text, HasSubstr("harrier_trace_spans_exported_total 8\n"));
  EXPECT_THAT(text, HasSubstr("harrier_trace_export_requests_total{result=\"ok\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("harrier_trace_export_requests_total{result=\"failed\"} 0\n"));
}

TEST(OtlpTracerTest, AnExportStillFailingAtItsTimeoutIsDroppedAndCounted) {
  FakeCollector collector;
  collector.Answer({}, false);
  auto options = Exporting(&collector);
  options.export_timeout = milliseconds(500);  // attempts at 0, 100 and 300 ms; 700 is past it
  auto tracer = MakeTracer(options);
  tracer->Submit(FullHttpRecord(steady_clock::now()));
  ASSERT_TRUE(tracer->Flush(std::chrono::seconds(10)));
  // Three on a quiet machine; on a loaded one the third may start past the timeout. Never a
  // fourth (that one would be due at 700 ms).
  EXPECT_GE(collector.posts(), 2u);
  EXPECT_LE(collector.posts(), 3u);
  const std::string text = Metrics(*tracer);
  EXPECT_THAT(text, HasSubstr("harrier_trace_spans_exported_total 0\n"));
  EXPECT_THAT(text, HasSubstr("harrier_trace_spans_dropped_total{reason=\"export_failed\"} 8\n"));
  EXPECT_THAT(text, HasSubstr("harrier_trace_export_requests_total{result=\"failed\"} 1\n"));
  // The next export is tried afresh.
  collector.Answer({}, true);
  tracer->Submit(FullHttpRecord(steady_clock::now()));
  ASSERT_TRUE(tracer->Flush(std::chrono::seconds(10)));
  EXPECT_THAT(Metrics(*tracer), HasSubstr("harrier_trace_spans_exported_total 8\n"));
}

TEST(OtlpTracerTest, DestructionExportsWhatIsQueued) {
  FakeCollector collector;
  {
    auto tracer = MakeTracer(Exporting(&collector));
    tracer->Submit(FullHttpRecord(steady_clock::now()));
  }
  EXPECT_EQ(collector.posts(), 1u);
}

TEST(OtlpTracerTest, DestructionGivesUpAfterTheExportTimeout) {
  FakeCollector collector;
  collector.Answer({}, false);
  auto options = Exporting(&collector);
  options.export_timeout = milliseconds(200);
  const auto start = steady_clock::now();
  {
    auto tracer = MakeTracer(options);
    for (int i = 0; i < 3; ++i) tracer->Submit(FullHttpRecord(steady_clock::now()));
  }
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(OtlpTracerTest, ExportTimesAreWallClock) {
  FakeCollector collector;
  auto tracer = MakeTracer(Exporting(&collector));
  const TimePoint now = steady_clock::now();
  const int64_t wall_now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  tracer->Submit(FullHttpRecord(now));
  ASSERT_TRUE(tracer->Flush(std::chrono::seconds(10)));
  const ParsedBody body = Parse(collector.bodies().at(0));
  // received is now + 1 ms.
  EXPECT_NEAR(static_cast<double>(body.spans[0].start - wall_now), 1e6, 50e6);
}

// ---- libcurl against a real HTTP server -----------------------------------------------------

namespace beast = boost::beast;
namespace http = boost::beast::http;
using boost::asio::ip::tcp;

// A blocking HTTP/1.1 server on 127.0.0.1:0, one connection at a time, keep-alive: records each
// request and answers with the next scripted status (200 when the script is empty).
class TestHttpServer {
 public:
  struct Request {
    std::string method, target, content_type, body;
  };

  TestHttpServer() : acceptor_(io_, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0)) {
    thread_ = std::thread([this] { Serve(); });
  }
  ~TestHttpServer() {
    stop_ = true;
    // Unblock accept() with a connection of our own.
    boost::system::error_code ec;
    tcp::socket poke(io_);
    poke.connect(acceptor_.local_endpoint(), ec);
    thread_.join();
  }

  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  void Script(std::vector<int> statuses) {
    std::lock_guard<std::mutex> lock(mu_);
    script_ = std::move(statuses);
  }
  std::vector<Request> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  int connections() const { return connections_.load(); }

 private:
  void Serve() {
    while (!stop_) {
      tcp::socket socket(io_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || stop_) return;
      ++connections_;
      beast::flat_buffer buffer;
      for (;;) {
        http::request<http::string_body> req;
        http::read(socket, buffer, req, ec);
        if (ec) break;
        int status = 200;
        {
          std::lock_guard<std::mutex> lock(mu_);
          requests_.push_back({std::string(req.method_string()), std::string(req.target()),
                               std::string(req[http::field::content_type]), req.body()});
          if (!script_.empty()) {
            status = script_.front();
            script_.erase(script_.begin());
          }
        }
        http::response<http::string_body> res{static_cast<http::status>(status), req.version()};
        res.keep_alive(req.keep_alive());
        res.body() = status == 200 ? "{}" : "{\"error\":\"scripted\"}";
        res.set(http::field::content_type, "application/json");
        res.prepare_payload();
        http::write(socket, res, ec);
        if (ec || !req.keep_alive()) break;
      }
    }
  }

  boost::asio::io_context io_;
  tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  mutable std::mutex mu_;
  std::vector<int> script_;
  std::vector<Request> requests_;
  std::thread thread_;
};

OtlpTracer::Options CurlOptions(const std::string& endpoint) {
  OtlpTracer::Options o = ResourceOptions();
  o.endpoint = endpoint;
  o.sample_ratio = 1.0;
  o.export_interval = std::chrono::hours(1);
  o.export_timeout = milliseconds(2000);
  return o;
}

TEST(OtlpTracerCurlTest, PostsJsonToTheTracesPath) {
  TestHttpServer server;
  auto tracer = MakeTracer(CurlOptions("http://127.0.0.1:" + std::to_string(server.port())));
  tracer->Submit(FullHttpRecord(steady_clock::now()));
  ASSERT_TRUE(tracer->Flush(std::chrono::seconds(10)));
  tracer->Submit(FullHttpRecord(steady_clock::now()));
  ASSERT_TRUE(tracer->Flush(std::chrono::seconds(10)));

  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(server.connections(), 1) << "the second export reuses the kept-alive connection";
  for (const auto& r : requests) {
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.target, "/v1/traces");
    EXPECT_EQ(r.content_type, "application/json");
    EXPECT_EQ(Parse(r.body).spans.size(), 8u);
  }
  EXPECT_THAT(Metrics(*tracer), HasSubstr("harrier_trace_spans_exported_total 16\n"));
  EXPECT_THAT(Metrics(*tracer),
              HasSubstr("harrier_trace_export_requests_total{result=\"ok\"} 2\n"));
}

TEST(OtlpTracerCurlTest, AnExplicitPathIsKept) {
  TestHttpServer server;
  auto tracer = MakeTracer(
      CurlOptions("http://127.0.0.1:" + std::to_string(server.port()) + "/otlp/v1/traces"));
  tracer->Submit(FullHttpRecord(steady_clock::now()));
  ASSERT_TRUE(tracer->Flush(std::chrono::seconds(10)));
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].target, "/otlp/v1/traces");
}

TEST(OtlpTracerCurlTest, UnavailableIsRetriedBadRequestIsNot) {
  TestHttpServer server;
  server.Script({503, 429, 200, 400});
  auto tracer = MakeTracer(CurlOptions("http://127.0.0.1:" + std::to_string(server.port()) + "/"));
  tracer->Submit(FullHttpRecord(steady_clock::now()));
  ASSERT_TRUE(tracer->Flush(std::chrono::seconds(10)));
  EXPECT_EQ(server.requests().size(), 3u);
  EXPECT_THAT(Metrics(*tracer), HasSubstr("harrier_trace_spans_exported_total 8\n"));

  tracer->Submit(FullHttpRecord(steady_clock::now()));  // answered 400: dropped at once
  ASSERT_TRUE(tracer->Flush(std::chrono::seconds(10)));
  EXPECT_EQ(server.requests().size(), 4u);
  const std::string text = Metrics(*tracer);
  EXPECT_THAT(text, HasSubstr("harrier_trace_spans_dropped_total{reason=\"export_failed\"} 8\n"));
  EXPECT_THAT(text, HasSubstr("harrier_trace_export_requests_total{result=\"failed\"} 1\n"));
}

TEST(OtlpTracerCurlTest, AnUnreachableCollectorCountsExportFailed) {
  uint16_t closed_port = 0;
  {
    boost::asio::io_context io;
    tcp::acceptor a(io, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
    closed_port = a.local_endpoint().port();
  }
  auto options = CurlOptions("http://127.0.0.1:" + std::to_string(closed_port));
  options.export_timeout = milliseconds(300);
  auto tracer = MakeTracer(options);
  tracer->Submit(FullHttpRecord(steady_clock::now()));
  ASSERT_TRUE(tracer->Flush(std::chrono::seconds(10)));
  EXPECT_THAT(Metrics(*tracer),
              HasSubstr("harrier_trace_spans_dropped_total{reason=\"export_failed\"} 8\n"));
}

// A collector that takes the connection and never answers: the shutdown's flush gives up at its
// timeout, and the tracer's destruction then neither flushes again nor waits out the export in
// flight (it is aborted): before, a slow collector held the exit ~20 s past "stopped".
TEST(OtlpTracerCurlTest, ASilentCollectorDoesNotHoldTheDestructionAfterAFlushGaveUp) {
  boost::asio::io_context io;
  tcp::acceptor silent(io, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  // Listening, never accepting: the kernel completes the connection and the request sits.
  auto options = CurlOptions("http://127.0.0.1:" + std::to_string(silent.local_endpoint().port()));
  options.export_timeout = std::chrono::seconds(10);
  auto tracer = MakeTracer(options);
  tracer->Submit(FullHttpRecord(steady_clock::now()));
  EXPECT_FALSE(tracer->Flush(milliseconds(300)));  // the export is in flight, unanswered
  const auto start = steady_clock::now();
  tracer.reset();
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(3));
}

}  // namespace
}  // namespace harrier
