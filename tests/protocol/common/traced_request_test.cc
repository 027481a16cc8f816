// TracedRequest: whom Start() traces, what it takes from the headers, and that the record reaches
// the tracer exactly once, whoever finishes it.
#include "protocol/common/traced_request.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "util/fake_tracer.h"

namespace harrier {
namespace {

using ::harrier::testing::FakeTracer;
using TimePoint = RequestTrace::TimePoint;

constexpr const char* kSampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

TEST(TracedRequestTest, NoTracerOrNoSampleMeansNoRecord) {
  EXPECT_EQ(TracedRequest::Start(nullptr, kSampled, ""), nullptr);
  FakeTracer tracer;
  tracer.sample = false;
  EXPECT_EQ(TracedRequest::Start(&tracer, "", ""), nullptr);
  EXPECT_EQ(TracedRequest::Start(&tracer, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
                                 "vendor=x"),
            nullptr);
  EXPECT_TRUE(tracer.records().empty());
}

TEST(TracedRequestTest, TracestateGoesOnlyWithAValidParent) {
  FakeTracer tracer;
  auto with_parent = TracedRequest::Start(&tracer, kSampled, "vendor=x");
  ASSERT_NE(with_parent, nullptr);
  EXPECT_EQ(FormatTraceparent(with_parent->record().parent), kSampled);
  EXPECT_EQ(with_parent->record().tracestate, "vendor=x");
  EXPECT_EQ(with_parent->TraceResponse(), FormatTraceparent(with_parent->server()));

  auto without = TracedRequest::Start(&tracer, "garbage", "vendor=x");
  ASSERT_NE(without, nullptr);
  EXPECT_FALSE(without->record().parent.valid());
  EXPECT_EQ(without->record().tracestate, "");
}

// W3C Trace Context on repeated fields (probe 52): two traceparent fields are invalid, several
// tracestate fields one list; one of each is read where it is, not copied.
TEST(TraceContextFieldsTest, RepeatedFieldsAreReadAsTraceContextSays) {
  const std::string parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  const std::vector<std::pair<std::string, std::string>> one = {{"traceparent", parent},
                                                                {"tracestate", "a=1"}};
  const TraceContextFields single(one);
  EXPECT_EQ(single.traceparent(), parent);
  EXPECT_EQ(single.tracestate(), "a=1");
  EXPECT_EQ(single.tracestate().data(), one[1].second.data());  // a view, no copy
  const std::vector<std::pair<std::string, std::string>> many = {{"tracestate", "a=1"},
                                                                 {"traceparent", parent},
                                                                 {"tracestate", ""},
                                                                 {"tracestate", "b=2,c=3"},
                                                                 {"traceparent", parent}};
  const TraceContextFields repeated(many);
  EXPECT_EQ(repeated.tracestate(), "a=1,b=2,c=3");
  EXPECT_FALSE(ParseTraceparent(repeated.traceparent()).has_value());
  const TraceContextFields none({});
  EXPECT_EQ(none.traceparent(), "");
  EXPECT_EQ(none.tracestate(), "");
}

TEST(TracedRequestTest, FinishSubmitsOnceAndStampsOnlyASend) {
  FakeTracer tracer;
  const TimePoint at = std::chrono::steady_clock::now();
  {
    auto sent = TracedRequest::Start(&tracer, kSampled, "");
    auto on_sent = TracedRequest::OnSent(sent);
    on_sent(true, at);
    on_sent(true, at + std::chrono::seconds(1));  // a second report changes nothing
    auto unsent = TracedRequest::Start(&tracer, kSampled, "");
    unsent->Finish(false, at);
  }
  const auto records = tracer.records();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].sent, at);
  EXPECT_EQ(records[1].sent, TimePoint{});
}

TEST(TracedRequestTest, AnUnfinishedRecordIsSubmittedByItsLastHolder) {
  FakeTracer tracer;
  auto trace = TracedRequest::Start(&tracer, kSampled, "");
  auto on_sent = TracedRequest::OnSent(trace);
  trace.reset();
  EXPECT_TRUE(tracer.records().empty());  // the callback still holds it
  on_sent = nullptr;
  const auto records = tracer.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].sent, TimePoint{});
}

TEST(TracedRequestTest, InferenceTimingIsCopied) {
  FakeTracer tracer;
  auto trace = TracedRequest::Start(&tracer, kSampled, "");
  InferenceTiming timing;
  timing.batch_start = std::chrono::steady_clock::now();
  timing.infer_start = timing.batch_start + std::chrono::microseconds(1);
  timing.infer_end = timing.batch_start + std::chrono::microseconds(2);
  timing.batch_size = 6;
  timing.batch_requests = 3;
  timing.batch_peers = std::make_shared<const std::vector<SpanContext>>(3);
  trace->SetInferenceTiming(timing);
  const RequestTrace& r = trace->record();
  EXPECT_EQ(r.batch_start, timing.batch_start);
  EXPECT_EQ(r.infer_start, timing.infer_start);
  EXPECT_EQ(r.infer_end, timing.infer_end);
  EXPECT_EQ(r.batch_size, 6);
  EXPECT_EQ(r.batch_requests, 3u);
  EXPECT_EQ(r.batch_peers, timing.batch_peers);
}

TEST(TracedRequestTest, SetHeadFillsEveryHeadField) {
  FakeTracer tracer;
  auto traced = TracedRequest::Start(&tracer, kSampled, "");
  ASSERT_NE(traced, nullptr);
  const TimePoint received = std::chrono::steady_clock::now();
  TraceHead head;
  head.name = "POST /v2/models/m/infer";
  head.protocol = "http";
  head.transport = "HTTP/2";
  head.target = "/v2/models/m/infer";
  head.request_id = "rid";
  head.key_id = "k";
  head.model = "m";
  head.model_version = 2;
  head.request_bytes = 17;
  head.received = received;
  head.body_received = received + std::chrono::microseconds(5);
  traced->SetHead(head);
  const RequestTrace& t = traced->record();
  EXPECT_EQ(t.name, "POST /v2/models/m/infer");
  EXPECT_EQ(t.protocol, "http");
  EXPECT_EQ(t.transport, "HTTP/2");
  EXPECT_EQ(t.target, "/v2/models/m/infer");
  EXPECT_EQ(t.request_id, "rid");
  EXPECT_EQ(t.key_id, "k");
  EXPECT_EQ(t.model, "m");
  EXPECT_EQ(t.model_version, 2);
  EXPECT_EQ(t.request_bytes, 17u);
  EXPECT_EQ(t.received, received);
  EXPECT_EQ(t.body_received, received + std::chrono::microseconds(5));
  // The server span Start chose is not the head's.
  EXPECT_TRUE(t.server.valid());
}

}  // namespace
}  // namespace harrier
