// OpenAiHandler against a fake model manager and a fake engine: routing, answers with and
// without streaming, SSE ids and the stream store, resumption, disconnects and their grace,
// back-pressure, heartbeats, errors in OpenAI's and Triton's shapes.
#include "protocol/openai/openai_handler.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "harrier/response_stream.h"
#include "protocol/common/content_coding.h"
#include "util/fake_generative_model.h"
#include "util/fake_model_manager.h"
#include "util/fake_tracer.h"
#include "util/recording_access_log.h"

namespace harrier::openai {
namespace {

using std::chrono::milliseconds;

// Answers everything else with 299, so a test sees what the handler passed on.
class NextHandler : public HttpHandler {
 public:
  void Handle(HttpRequest&& request, HttpResponder respond) override {
    last_target = request.target;
    HttpResponse r;
    r.status = 299;
    respond(std::move(r));
  }
  std::optional<HttpResponse> Precheck(const HttpRequest&) override {
    ++prechecks;
    return std::nullopt;
  }
  std::optional<HttpResponse> TransportError(int status, std::string_view, const HttpRequest&,
                                             std::string_view) override {
    HttpResponse r;
    r.status = status;
    r.body = "next's";
    return r;
  }
  std::string last_target;
  int prechecks = 0;
};

struct Event {
  std::optional<uint64_t> id;
  std::string data;
};

// What a streamed response has sent so far, as SSE events (comments kept apart).
struct StreamReader {
  explicit StreamReader(std::shared_ptr<ResponseStream> s) : stream(std::move(s)) {}
  std::shared_ptr<ResponseStream> stream;
  std::string text;
  bool finished = false;

  // Drains until the stream has finished, or 2 s have passed (the test then fails on what it
  // expected).
  void DrainUntilFinished() {
    for (int i = 0; i < 400 && !finished; ++i) {
      Drain();
      if (!finished) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  void Drain() {
    ResponseStream::Taken taken;
    stream->Take(&taken);
    text += taken.bytes;
    const bool end = taken.finished;
    stream->Complete(taken, true);
    if (end) finished = true;
  }
  std::vector<Event> Events(int* comments = nullptr) const {
    std::vector<Event> out;
    std::size_t pos = 0;
    while (true) {
      const std::size_t end = text.find("\n\n", pos);
      if (end == std::string::npos) break;
      const std::string block = text.substr(pos, end - pos);
      pos = end + 2;
      if (block.rfind(":", 0) == 0) {
        if (comments) ++*comments;
        continue;
      }
      Event e;
      std::size_t line_start = 0;
      while (line_start <= block.size()) {
        std::size_t nl = block.find('\n', line_start);
        if (nl == std::string::npos) nl = block.size();
        const std::string line = block.substr(line_start, nl - line_start);
        if (line.rfind("id: ", 0) == 0) e.id = std::stoull(line.substr(4));
        if (line.rfind("data: ", 0) == 0) e.data += line.substr(6);
        line_start = nl + 1;
      }
      out.push_back(e);
    }
    return out;
  }
};

class OpenAiHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    llm_ = models_.AddReady("llm", 3);
    llm_->generator = &engine_;
    models_.AddReady("tensors", 1);  // an ONNX-like model: no generator
    options_.heartbeat_interval = milliseconds(0);
    options_.access_log = &log_;
  }
  void Make() { handler_ = std::make_unique<OpenAiHandler>(&models_, &next_, options_); }

  // Calls the handler and returns its answer (the responder may run later: waits for it).
  HttpResponse Call(std::string method, std::string target, std::string body = "",
                    std::vector<std::pair<std::string, std::string>> headers = {},
                    std::shared_ptr<CancellationToken> token = nullptr) {
    if (!handler_) Make();
    HttpRequest r;
    r.method = std::move(method);
    r.target = std::move(target);
    r.body = std::make_shared<const std::string>(std::move(body));
    r.headers = std::move(headers);
    r.cancellation = std::move(token);
    auto answer = std::make_shared<std::optional<HttpResponse>>();
    handler_->Handle(std::move(r), [answer](HttpResponse resp) { *answer = std::move(resp); });
    for (int i = 0; i < 500 && !answer->has_value(); ++i)
      std::this_thread::sleep_for(milliseconds(2));
    EXPECT_TRUE(answer->has_value());
    return answer->has_value() ? std::move(**answer) : HttpResponse{};
  }

  // POSTs `body` without waiting: the answer lands in what this returns, when the handler
  // gives it (a held engine's requests answer later, or never).
  std::shared_ptr<std::optional<HttpResponse>> Post(std::string target, std::string body) {
    if (!handler_) Make();
    HttpRequest r;
    r.method = "POST";
    r.target = std::move(target);
    r.body = std::make_shared<const std::string>(std::move(body));
    auto answer = std::make_shared<std::optional<HttpResponse>>();
    handler_->Handle(std::move(r), [answer](HttpResponse resp) { *answer = std::move(resp); });
    return answer;
  }

  static std::string Header(const HttpResponse& r, std::string_view name) {
    for (const auto& [k, v] : r.headers)
      if (k == name) return std::string(v);
    return {};
  }

  testing::FakeModelManager models_;
  testing::FakeGenerativeModel engine_;
  std::shared_ptr<testing::FakeServableModel> llm_;
  NextHandler next_;
  testing::RecordingAccessLog log_;
  OpenAiHandler::Options options_;
  std::unique_ptr<OpenAiHandler> handler_;
};

simdjson::dom::element Parse(simdjson::dom::parser& parser, const std::string& json) {
  return parser.parse(json).value();
}

TEST_F(OpenAiHandlerTest, OtherRoutesGoToTheNextHandler) {
  EXPECT_EQ(Call("POST", "/v2/models/llm/infer", "{}").status, 299);
  EXPECT_EQ(next_.last_target, "/v2/models/llm/infer");
  HttpRequest head;
  head.target = "/v2/models/x/infer";
  handler_->Precheck(head);
  head.target = "/v1/chat/completions";
  handler_->Precheck(head);
  EXPECT_EQ(next_.prechecks, 1);
}

// A refusal made in front of the handler (the transport's 413, the access check's 401) reaches
// an OpenAI client as OpenAI's error object, which its SDKs read; other routes keep theirs.
TEST_F(OpenAiHandlerTest, RefusalsInFrontOfItAreInOpenAisShapeUnderV1Only) {
  Make();
  HttpRequest head;
  head.target = "/v1/chat/completions";
  std::optional<HttpResponse> r = handler_->TransportError(413, "body too large", head, {});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(Header(*r, "Content-Type"), "application/json");
  EXPECT_EQ(r->body, R"({"error":{"message":"body too large","type":"invalid_request_error",)"
                     R"("param":null,"code":null}})");
  r = handler_->TransportError(429, "slow down", head, "key_rate_limited");
  EXPECT_EQ(r->body, R"({"error":{"message":"slow down","type":"rate_limit_error",)"
                     R"("param":null,"code":"key_rate_limited"}})");
  r = handler_->TransportError(503, "draining", head, {});
  EXPECT_NE(r->body.find(R"("type":"server_error")"), std::string::npos);
  head.target = "/v2/models/llm/infer";
  EXPECT_EQ(handler_->TransportError(413, "body too large", head, {})->body, "next's");
  head.target = "";  // the request line never parsed
  EXPECT_EQ(handler_->TransportError(400, "bad request line", head, {})->body, "next's");
}

TEST_F(OpenAiHandlerTest, ChatCompletionRendersTheTemplateAndAnswersInOpenAisShape) {
  const auto r = Call("POST", "/v1/chat/completions",
                      R"({"model":"llm","messages":[{"role":"system","content":"Be brief."},
                          {"role":"user","content":"Hi"}],"temperature":0})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Header(r, "Content-Type"), "application/json");
  EXPECT_FALSE(Header(r, "X-Request-Id").empty());
  {
    std::lock_guard lock(engine_.mu);
    ASSERT_EQ(engine_.prompts.size(), 1u);
    EXPECT_EQ(engine_.prompts[0], "<system>Be brief.<user>Hi<assistant>");
    // The contents are text to the engine, wherever the template put them.
    EXPECT_EQ(engine_.literals[0], (std::vector<TextRange>{{8, 17}, {23, 25}}));
  }
  simdjson::dom::parser parser;
  auto doc = Parse(parser, r.body);
  EXPECT_EQ(std::string_view(doc["object"]), "chat.completion");
  EXPECT_EQ(std::string_view(doc["model"]), "llm");
  EXPECT_EQ(std::string_view(doc["choices"].at(0)["message"]["content"]), "Hello, world!");
  EXPECT_EQ(std::string_view(doc["choices"].at(0)["message"]["role"]), "assistant");
  EXPECT_EQ(std::string_view(doc["choices"].at(0)["finish_reason"]), "stop");
  EXPECT_EQ(int64_t(doc["usage"]["completion_tokens"]), 4);
  EXPECT_EQ(int64_t(doc["usage"]["prompt_tokens"]), 36);  // the fake counts bytes
  ASSERT_EQ(log_.records().size(), 1u);
  EXPECT_EQ(log_.records()[0].status, 200);
  EXPECT_EQ(log_.records()[0].model, "llm");
  EXPECT_EQ(log_.records()[0].version, 3);
  EXPECT_EQ(log_.records()[0].prompt_tokens, 36);
  EXPECT_EQ(log_.records()[0].completion_tokens, 4);
  EXPECT_GT(log_.records()[0].first_token_ns, 0u);
  EXPECT_GE(log_.records()[0].total_ns, log_.records()[0].first_token_ns);
}

TEST_F(OpenAiHandlerTest, MaxTokensEndsWithLengthAndNChoicesAreEachGenerated) {
  const auto r = Call("POST", "/v1/completions",
                      R"({"model":"llm","prompt":"Once","max_tokens":2,"n":2,"seed":7})");
  ASSERT_EQ(r.status, 200) << r.body;
  simdjson::dom::parser parser;
  auto doc = Parse(parser, r.body);
  EXPECT_EQ(std::string_view(doc["object"]), "text_completion");
  auto choices = doc["choices"].get_array().value();
  ASSERT_EQ(choices.size(), 2u);
  for (auto c : choices) {
    EXPECT_EQ(std::string_view(c["text"]), "Hello,");
    EXPECT_EQ(std::string_view(c["finish_reason"]), "length");
  }
  EXPECT_EQ(int64_t(doc["usage"]["completion_tokens"]), 4);
  std::lock_guard lock(engine_.mu);
  EXPECT_EQ(engine_.prompts, (std::vector<std::string>{"Once", "Once"}));
  // A completion's prompt is the client's own, control tokens and all: nothing is literal.
  EXPECT_EQ(engine_.literals, (std::vector<std::vector<TextRange>>(2)));
}

// (The fake generates inside Generate: the stream ends before the handler has handed it over,
// and its head still goes first.)
TEST_F(OpenAiHandlerTest, StreamedChatSendsNumberedEventsEndingWithDone) {
  const auto r = Call("POST", "/v1/chat/completions",
                      R"({"model":"llm","messages":[{"role":"user","content":"Hi"}],
                          "stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(r.stream);
  EXPECT_EQ(Header(r, "Content-Type"), "text/event-stream");
  EXPECT_EQ(Header(r, "Cache-Control"), "no-cache");
  const std::string id = Header(r, "X-Request-Id");
  EXPECT_EQ(id.size(), 32u);  // the stream's id: 128 random bits
  StreamReader reader(r.stream);
  reader.Drain();
  EXPECT_TRUE(reader.finished);
  const auto events = reader.Events();
  // role, 4 contents, finish, usage, [DONE]
  ASSERT_EQ(events.size(), 8u) << reader.text;
  for (std::size_t i = 0; i < events.size(); ++i) {
    ASSERT_TRUE(events[i].id);
    EXPECT_EQ(*events[i].id, i + 1);
  }
  simdjson::dom::parser parser;
  std::string content;
  for (std::size_t i = 1; i <= 4; ++i) {
    auto chunk = Parse(parser, events[i].data);
    EXPECT_EQ(std::string_view(chunk["object"]), "chat.completion.chunk");
    content += std::string_view(chunk["choices"].at(0)["delta"]["content"]);
  }
  EXPECT_EQ(content, "Hello, world!");
  auto finish = Parse(parser, events[5].data);
  EXPECT_EQ(std::string_view(finish["choices"].at(0)["finish_reason"]), "stop");
  auto usage = Parse(parser, events[6].data);
  EXPECT_EQ(int64_t(usage["usage"]["completion_tokens"]), 4);
  EXPECT_EQ(events[7].data, "[DONE]");
}

TEST_F(OpenAiHandlerTest, AFinishedStreamResumesAfterItsLastEventId) {
  const auto r = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","stream":true})");
  ASSERT_TRUE(r.stream);
  const std::string id = Header(r, "X-Request-Id");
  StreamReader first(r.stream);
  first.Drain();
  const auto all = first.Events();
  ASSERT_GE(all.size(), 4u);

  const auto resumed = Call("GET", "/v1/streams/" + id, "", {{"last-event-id", "2"}});
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  ASSERT_TRUE(resumed.stream);
  StreamReader second(resumed.stream);
  for (int i = 0; i < 100 && !second.finished; ++i) {
    second.Drain();
    if (!second.finished) std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_TRUE(second.finished);
  const auto rest = second.Events();
  ASSERT_EQ(rest.size(), all.size() - 2);
  for (std::size_t i = 0; i < rest.size(); ++i) {
    EXPECT_EQ(rest[i].id, all[i + 2].id);
    EXPECT_EQ(rest[i].data, all[i + 2].data);
  }
  EXPECT_EQ(Call("GET", "/v1/streams/0123456789abcdef0123456789abcdef").status, 404);
  EXPECT_EQ(Call("GET", "/v1/streams/" + id, "", {{"last-event-id", "x"}}).status, 400);
  const HttpResponse twice =
      Call("GET", "/v1/streams/" + id, "", {{"last-event-id", "2"}, {"last-event-id", "5"}});
  EXPECT_EQ(twice.status, 400);
  EXPECT_NE(twice.body.find("given 2 times"), std::string::npos) << twice.body;
}

// A body that fails to parse but names an existing model is that model's bad request (probe 41:
// counted under model="" with no model in its line); one naming no model stays unrouted.
TEST_F(OpenAiHandlerTest, ABadBodyNamingAModelCountsUnderIt) {
  EXPECT_EQ(Call("POST", "/v1/chat/completions", R"({"model":"llm","messages":"oops"})").status,
            400);
  EXPECT_EQ(Call("POST", "/v1/chat/completions", R"({"model":"nope","messages":"oops"})").status,
            400);
  EXPECT_EQ(Call("POST", "/v1/completions", "not json").status, 400);
  ASSERT_EQ(llm_->recorded_failures.size(), 1u);
  EXPECT_EQ(llm_->recorded_failures[0], StatusCode::kInvalidArgument);
  EXPECT_EQ(models_.unrouted_failures.size(), 2u);
  const auto lines = log_.records();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].model, "llm");
  EXPECT_EQ(lines[0].version, 3);
  EXPECT_EQ(lines[1].model, "");
  EXPECT_EQ(lines[2].model, "");
}

// Every request the handler answers has its access line (probe 41: the model list, the
// handler's 404s and 405s and a resumed stream had none): a resumed stream's at its end, with
// the bytes it sent.
TEST_F(OpenAiHandlerTest, EveryAnswerOfItsOwnHasOneAccessLine) {
  const auto r = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","stream":true})");
  ASSERT_TRUE(r.stream);
  const std::string id = Header(r, "X-Request-Id");
  StreamReader first(r.stream);
  first.Drain();
  ASSERT_EQ(log_.records().size(), 1u);  // the generation's own

  EXPECT_EQ(Call("GET", "/v1/models", "", {{"x-request-id", "list-1"}}).status, 200);
  EXPECT_EQ(Call("GET", "/v1/chat/completions").status, 405);
  EXPECT_EQ(Call("GET", "/v1/nothing").status, 404);
  EXPECT_EQ(Call("GET", "/v1/streams/0123456789abcdef0123456789abcdef").status, 404);
  EXPECT_EQ(Call("GET", "/v1/streams/not-an-id", "", {{"x-request-id", "bad-id"}}).status, 404);
  const auto resumed =
      Call("GET", "/v1/streams/" + id, "", {{"last-event-id", "2"}, {"x-request-id", "resume-1"}});
  ASSERT_TRUE(resumed.stream);
  EXPECT_EQ(Header(resumed, "X-Request-Id"), "resume-1");  // its own: the stream's is its path
  StreamReader second(resumed.stream);
  for (int i = 0; i < 100 && !second.finished; ++i) {
    second.Drain();
    if (!second.finished) std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_TRUE(second.finished);
  // HEAD: the head only, nothing replayed or counted as sent.
  const auto head = Call("HEAD", "/v1/streams/" + id);
  EXPECT_EQ(head.status, 200);
  EXPECT_FALSE(head.stream);
  EXPECT_EQ(Call("HEAD", "/v1/models").status, 200);

  const auto lines = log_.records();
  ASSERT_EQ(lines.size(), 9u);
  EXPECT_EQ(lines[1].target, "/v1/models");
  EXPECT_EQ(lines[1].status, 200);
  EXPECT_EQ(lines[1].request_id, "list-1");
  EXPECT_GT(lines[1].response_bytes, 0u);
  EXPECT_EQ(lines[2].status, 405);
  EXPECT_EQ(lines[3].status, 404);
  EXPECT_NE(lines[3].error.find("no such endpoint"), std::string::npos) << lines[3].error;
  EXPECT_EQ(lines[4].status, 404);
  EXPECT_NE(lines[4].request_id, "0123456789abcdef0123456789abcdef");  // a request of its own
  EXPECT_EQ(lines[5].request_id, "bad-id");
  EXPECT_EQ(lines[6].method, "GET");
  EXPECT_EQ(lines[6].target, "/v1/streams/" + id);
  EXPECT_EQ(lines[6].request_id, "resume-1");
  EXPECT_EQ(lines[6].status, 200);
  EXPECT_EQ(lines[6].response_bytes, second.text.size());
  EXPECT_EQ(lines[6].error, "");
  EXPECT_EQ(lines[7].method, "HEAD");
  EXPECT_EQ(lines[7].status, 200);
  EXPECT_EQ(lines[7].response_bytes, 0u);
  EXPECT_EQ(lines[8].response_bytes, 0u);
}

// A stream answers under its own id; the id its client sent stays in the line as
// client_request_id, so a proxy's log can be joined with it (probe 41). A generated one is not.
TEST_F(OpenAiHandlerTest, AStreamsLineKeepsTheClientsRequestId) {
  const auto mine = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","stream":true})",
                         {{"x-request-id", "proxy-7"}});
  ASSERT_TRUE(mine.stream);
  StreamReader(mine.stream).DrainUntilFinished();
  const auto theirs =
      Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","stream":true})");
  ASSERT_TRUE(theirs.stream);
  StreamReader(theirs.stream).DrainUntilFinished();
  const auto plain = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x"})",
                          {{"x-request-id", "proxy-8"}});
  EXPECT_EQ(plain.status, 200);
  const auto lines = log_.records();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].request_id, Header(mine, "X-Request-Id"));
  EXPECT_NE(lines[0].request_id, "proxy-7");
  EXPECT_EQ(lines[0].client_request_id, "proxy-7");
  EXPECT_EQ(lines[1].client_request_id, "");
  EXPECT_EQ(lines[2].request_id, "proxy-8");  // not streamed: the client's id, as everywhere
  EXPECT_EQ(lines[2].client_request_id, "");
}

// An engine may read a long prompt after Generate returned (off the I/O thread): a stream's
// head waits for the engine to accept the prompt, and a prompt refused then is a plain error.
TEST_F(OpenAiHandlerTest, AStreamsHeadWaitsForTheEngineToAcceptThePrompt) {
  engine_.hold = true;
  engine_.accept_held = false;
  Make();
  std::shared_ptr<std::optional<HttpResponse>> answer;
  auto send = [&](std::string body) { answer = Post("/v1/completions", std::move(body)); };
  send(R"({"model":"llm","prompt":"long","stream":true})");
  auto held = engine_.TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_FALSE(answer->has_value());  // not yet: the prompt may still be refused
  held[0].sink->OnEnd(harrier::FinishReason::kError, {},
                      InvalidArgument("the prompt is 9000 tokens, more than the model's context"));
  ASSERT_TRUE(answer->has_value());
  EXPECT_EQ((*answer)->status, 400);
  EXPECT_EQ((*answer)->stream, nullptr);
  EXPECT_NE((*answer)->body.find("9000 tokens"), std::string::npos) << (*answer)->body;
  EXPECT_NE((*answer)->body.find("invalid_request_error"), std::string::npos);

  // Accepted: the head goes out then, and the stream carries the rest.
  send(R"({"model":"llm","prompt":"long","stream":true})");
  held = engine_.TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_FALSE(answer->has_value());
  held[0].sink->OnAccepted();
  ASSERT_TRUE(answer->has_value());
  EXPECT_EQ((*answer)->status, 200);
  ASSERT_NE((*answer)->stream, nullptr);
  StreamReader reader((*answer)->stream);
  held[0].sink->OnStart(1, 0);
  held[0].sink->OnToken("a", 0);
  held[0].sink->OnEnd(harrier::FinishReason::kStop, {1, 1, 0}, Status::Ok());
  reader.DrainUntilFinished();
  const auto events = reader.Events();
  ASSERT_GE(events.size(), 2u);
  EXPECT_NE(events.front().data.find("\"text\":\"a\""), std::string::npos) << events.front().data;
  EXPECT_EQ(events.back().data, "[DONE]");
}

// More choices than the engine ever holds can never run: a 400 naming n, not a 429 to retry.
TEST_F(OpenAiHandlerTest, MoreChoicesThanTheEngineHoldsAreABadRequest) {
  engine_.max_requests_value = 3;
  const auto r = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","n":4})");
  EXPECT_EQ(r.status, 400) << r.body;
  simdjson::dom::parser parser;
  EXPECT_EQ(std::string_view(Parse(parser, r.body)["error"]["param"]), "n");
  EXPECT_TRUE(engine_.prompts.empty());
  EXPECT_EQ(Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","n":3})").status, 200);
}

// A stream of several choices ends at its one error event: the other choices stop, and a
// reader (or one who resumes) sees the error once.
TEST_F(OpenAiHandlerTest, AStreamOfSeveralChoicesEndsAtItsOneErrorEvent) {
  engine_.hold = true;
  Make();
  const auto answer =
      Post("/v1/completions", R"({"model":"llm","prompt":"x","n":3,"stream":true})");
  ASSERT_TRUE(answer->has_value());
  ASSERT_EQ((*answer)->status, 200);
  auto held = engine_.TakeHeld();
  ASSERT_EQ(held.size(), 3u);
  held[1].sink->OnEnd(harrier::FinishReason::kError, {1, 0, 0}, Internal("the engine failed"));
  EXPECT_TRUE(held[0].request.cancellation->cancelled());
  held[0].sink->OnEnd(harrier::FinishReason::kCancelled, {1, 0, 0}, Status::Ok());
  held[2].sink->OnEnd(harrier::FinishReason::kCancelled, {1, 0, 0}, Status::Ok());
  StreamReader reader((*answer)->stream);
  reader.DrainUntilFinished();
  ASSERT_TRUE(reader.finished);
  const auto events = reader.Events();
  ASSERT_EQ(events.size(), 2u) << reader.text;
  EXPECT_NE(events[0].data.find("the engine failed"), std::string::npos) << events[0].data;
  EXPECT_EQ(events[1].data, "[DONE]");
}

// A model's name is a directory's: one longer than any could be is not echoed in the 404.
TEST_F(OpenAiHandlerTest, AnUnknownModelsNameIsEchoedOnlyWhenAModelCouldHaveIt) {
  auto r = Call("POST", "/v1/completions", R"({"model":"nope","prompt":"x"})");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(r.body.find("The model 'nope' does not exist"), std::string::npos) << r.body;
  const std::string name(300, 'm');
  r = Call("POST", "/v1/completions", R"({"model":")" + name + R"(","prompt":"x"})");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(r.body.find(name), std::string::npos);
  EXPECT_NE(r.body.find("its name is 300 bytes"), std::string::npos) << r.body;
  r = Call("GET", "/v1/models/" + name);
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(r.body.find(name), std::string::npos);
}

// One choice refused at once (the engine full): the answer is that refusal, now; the choices
// already running stop, and the rest are not started.
TEST_F(OpenAiHandlerTest, AChoiceRefusedAtOnceStopsTheOthers) {
  engine_.hold = true;
  engine_.refuse = ResourceExhausted("the model has 8 requests in progress or waiting");
  engine_.refuse_after_calls = 1;
  Make();
  const auto answer = Post("/v1/completions", R"({"model":"llm","prompt":"x","n":3})");
  EXPECT_EQ(engine_.prompts.size(), 2u);  // the third was never asked for
  auto held = engine_.TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  ASSERT_NE(held[0].request.cancellation, nullptr);
  EXPECT_TRUE(held[0].request.cancellation->cancelled());
  held[0].sink->OnEnd(harrier::FinishReason::kCancelled, {1, 0, 0}, Status::Ok());
  ASSERT_TRUE(answer->has_value());
  EXPECT_EQ((*answer)->status, 429) << (*answer)->body;
  EXPECT_NE((*answer)->body.find("8 requests in progress"), std::string::npos) << (*answer)->body;
}

// The same streamed: no stream that starts and then fails (and streams on without the refused
// choice), but the same plain 429, once the choice already running has stopped.
TEST_F(OpenAiHandlerTest, AStreamedChoiceRefusedAtOnceGetsThePlainRefusal) {
  engine_.hold = true;  // and accepted at once: the head would be due, but for the refusal
  engine_.refuse = ResourceExhausted("the model has 8 requests in progress or waiting");
  engine_.refuse_after_calls = 1;
  Make();
  const auto answer =
      Post("/v1/completions", R"({"model":"llm","prompt":"x","n":3,"stream":true})");
  EXPECT_FALSE(answer->has_value());  // no head: the refusal is the answer
  auto held = engine_.TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_TRUE(held[0].request.cancellation->cancelled());
  held[0].sink->OnEnd(harrier::FinishReason::kCancelled, {1, 0, 0}, Status::Ok());
  ASSERT_TRUE(answer->has_value());
  EXPECT_EQ((*answer)->status, 429) << (*answer)->body;
  EXPECT_EQ((*answer)->stream, nullptr);
  EXPECT_FALSE(Header(**answer, "Retry-After").empty());
  EXPECT_NE((*answer)->body.find("8 requests in progress"), std::string::npos) << (*answer)->body;
}

// Content-Encoding as on the KServe endpoints: gzip and deflate decoded, others refused (a
// compressed body used to be parsed as it came: "not valid UTF-8").
TEST_F(OpenAiHandlerTest, ACompressedBodyIsDecodedAndAnUnknownCodingRefused) {
  const std::string json = R"({"model":"llm","prompt":"x","max_tokens":2})";
  const std::optional<std::string> gzipped = EncodeContent(json, ContentCoding::kGzip);
  ASSERT_TRUE(gzipped.has_value());
  auto r = Call("POST", "/v1/completions", *gzipped, {{"content-encoding", "gzip"}});
  EXPECT_EQ(r.status, 200) << r.body;
  r = Call("POST", "/v1/completions", json, {{"content-encoding", "br"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("unsupported Content-Encoding 'br'"), std::string::npos) << r.body;
  r = Call("POST", "/v1/completions", json + "garbage", {{"content-encoding", "gzip"}});
  EXPECT_EQ(r.status, 400) << r.body;
}

TEST_F(OpenAiHandlerTest, AStreamIdOfTheWrongShapeIsNotFoundAndNotEchoed) {
  const std::string id(5000, 'x');
  const auto r = Call("GET", "/v1/streams/" + id);
  EXPECT_EQ(r.status, 404);
  // An id of its own, as every answer has (its access line's), never the path's text.
  EXPECT_FALSE(Header(r, "X-Request-Id").empty());
  EXPECT_EQ(Header(r, "X-Request-Id").find("xxxxxxxx"), std::string::npos);
  EXPECT_EQ(r.body.find("xxxxxxxx"), std::string::npos) << r.body.substr(0, 200);
  const auto upper = Call("GET", "/v1/streams/0123456789ABCDEF0123456789ABCDEF");
  EXPECT_EQ(upper.status, 404);
}

// With a version in the URL, a missing version is not called a missing model.
TEST_F(OpenAiHandlerTest, AMissingVersionIsNamedAsSuch) {
  const auto r = Call("POST", "/v2/models/llm/versions/9/generate", R"({"text_input":"x"})");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(r.body.find("The model 'llm' does not exist"), std::string::npos) << r.body;
}

TEST_F(OpenAiHandlerTest, ALiveStreamResumesThenReceivesTheRestAsItComes) {
  engine_.hold = true;
  const auto r = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","stream":true})");
  ASSERT_TRUE(r.stream);
  auto held = engine_.TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  auto sink = held[0].sink;
  sink->OnStart(1, 0);
  sink->OnToken("a", 0);
  sink->OnToken("b", 0);
  const auto resumed =
      Call("GET", "/v1/streams/" + Header(r, "X-Request-Id"), "", {{"last-event-id", "1"}});
  ASSERT_TRUE(resumed.stream);
  StreamReader reader(resumed.stream);
  auto wait_events = [&](std::size_t n) {
    for (int i = 0; i < 400 && reader.Events().size() < n; ++i) {
      reader.Drain();
      std::this_thread::sleep_for(milliseconds(5));
    }
    return reader.Events();
  };
  auto events = wait_events(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].id, 2u);
  sink->OnToken("c", 0);
  sink->OnEnd(FinishReason::kStop, {1, 3, 0}, Status::Ok());
  events = wait_events(4);  // c, finish, [DONE]
  ASSERT_EQ(events.size(), 4u) << reader.text;
  EXPECT_EQ(events[3].data, "[DONE]");
  reader.DrainUntilFinished();
  EXPECT_TRUE(reader.finished);
}

TEST_F(OpenAiHandlerTest, AClientThatGoesStopsItsGenerationAtOnceByDefault) {
  engine_.hold = true;
  auto token = std::make_shared<CancellationToken>();
  const auto r = Call(
      "POST", "/v1/chat/completions",
      R"({"model":"llm","messages":[{"role":"user","content":"Hi"}],"stream":true})", {}, token);
  auto held = engine_.TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_FALSE(held[0].request.cancellation->cancelled());
  held[0].sink->OnStart(1, 0);
  held[0].sink->OnToken("a", 0);  // events 1 (the role) and 2
  token->Cancel();                // the transport: the client went away
  EXPECT_TRUE(held[0].request.cancellation->cancelled());
  EXPECT_TRUE(r.stream->abandoned());
  held[0].sink->OnEnd(FinishReason::kCancelled, {1, 1, 0}, Status::Ok());

  // Resumed later: the stream says it was cut short, not just [DONE].
  const auto resumed =
      Call("GET", "/v1/streams/" + Header(r, "X-Request-Id"), "", {{"last-event-id", "2"}});
  ASSERT_TRUE(resumed.stream);
  StreamReader reader(resumed.stream);
  reader.DrainUntilFinished();
  const auto events = reader.Events();
  ASSERT_EQ(events.size(), 2u) << reader.text;
  EXPECT_NE(events[0].data.find("the client disconnected"), std::string::npos) << events[0].data;
  EXPECT_EQ(events[1].data, "[DONE]");
}

TEST_F(OpenAiHandlerTest, WithAGraceTheGenerationGoesOnUntilItEndsOrUntilAResume) {
  options_.disconnect_grace = milliseconds(100);
  engine_.hold = true;
  // Not resumed: stopped once the grace has passed.
  auto token = std::make_shared<CancellationToken>();
  Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","stream":true})", {}, token);
  auto held = engine_.TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  token->Cancel();
  EXPECT_FALSE(held[0].request.cancellation->cancelled());
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_TRUE(held[0].request.cancellation->cancelled());
  held[0].sink->OnEnd(FinishReason::kCancelled, {}, Status::Ok());

  // Resumed within the grace: it goes on.
  auto token2 = std::make_shared<CancellationToken>();
  const auto r =
      Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","stream":true})", {}, token2);
  auto held2 = engine_.TakeHeld();
  ASSERT_EQ(held2.size(), 1u);
  token2->Cancel();
  const auto resumed = Call("GET", "/v1/streams/" + Header(r, "X-Request-Id"));
  EXPECT_EQ(resumed.status, 200);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_FALSE(held2[0].request.cancellation->cancelled());
  held2[0].sink->OnEnd(FinishReason::kStop, {1, 0, 0}, Status::Ok());
}

TEST_F(OpenAiHandlerTest, AClientThatDoesNotReadGetsAnErrorEventAndTheGenerationStops) {
  options_.max_pending_stream_bytes = 1000;
  engine_.hold = true;
  const auto r = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","stream":true})");
  auto held = engine_.TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  for (int i = 0; i < 100 && !held[0].request.cancellation->cancelled(); ++i)
    held[0].sink->OnToken(std::string(100, 'z'), 0);  // nobody takes the stream's parts
  EXPECT_TRUE(held[0].request.cancellation->cancelled());
  StreamReader reader(r.stream);
  reader.Drain();
  EXPECT_TRUE(reader.finished);
  const auto events = reader.Events();
  ASSERT_FALSE(events.empty());
  EXPECT_NE(events.back().data.find("too slowly"), std::string::npos);
  ASSERT_TRUE(events.back().id.has_value());  // numbered and kept, like any event
  held[0].sink->OnToken("late", 0);           // after the error: neither sent nor kept
  held[0].sink->OnEnd(FinishReason::kCancelled, {}, Status::Ok());

  // A reader who resumes from the last event before the error gets the error, and no more.
  const auto resumed = Call("GET", "/v1/streams/" + Header(r, "X-Request-Id"), "",
                            {{"last-event-id", std::to_string(*events.back().id - 1)}});
  ASSERT_TRUE(resumed.stream);
  StreamReader again(resumed.stream);
  again.DrainUntilFinished();
  const auto replayed = again.Events();
  ASSERT_EQ(replayed.size(), 1u) << again.text;
  EXPECT_EQ(replayed[0].id, events.back().id);
  EXPECT_NE(replayed[0].data.find("too slowly"), std::string::npos);
}

// A resumer that does not read holds at most the stream buffer and one batch of events
// queued for it, then reads on as the client drains; it is slowed, never cut off (probe 31).
TEST_F(OpenAiHandlerTest, AResumerThatDoesNotReadHoldsBackNoMoreThanTheStreamBuffer) {
  options_.max_pending_stream_bytes = 4000;
  engine_.hold = true;
  const auto r = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","stream":true})");
  ASSERT_TRUE(r.stream);
  auto held = engine_.TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  StreamReader live(r.stream);
  for (int i = 0; i < 300; ++i) {
    held[0].sink->OnToken(std::string(100, 'a' + i % 26), 0);
    live.Drain();  // a reader that keeps up
  }
  held[0].sink->OnEnd(FinishReason::kLength, {1, 300, 0}, Status::Ok());
  live.DrainUntilFinished();
  const auto all = live.Events();
  ASSERT_GE(all.size(), 300u);

  const auto resumed =
      Call("GET", "/v1/streams/" + Header(r, "X-Request-Id"), "", {{"last-event-id", "0"}});
  ASSERT_TRUE(resumed.stream);
  std::this_thread::sleep_for(milliseconds(100));  // the pump's turns, had it no bound
  const std::size_t event_bytes = 300;             // one of these events, with room
  EXPECT_LE(resumed.stream->pending_bytes(), 4000 + 32 * event_bytes);
  EXPECT_GT(resumed.stream->pending_bytes(), 0u);
  StreamReader slow(resumed.stream);
  for (int i = 0; i < 2000 && !slow.finished; ++i) {
    slow.Drain();
    EXPECT_LE(resumed.stream->pending_bytes(), 4000 + 32 * event_bytes);
    if (!slow.finished) std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_TRUE(slow.finished);
  const auto again = slow.Events();
  ASSERT_EQ(again.size(), all.size());
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(again[i].data, all[i].data) << i;
}

TEST_F(OpenAiHandlerTest, AnIdleStreamGetsHeartbeatComments) {
  options_.heartbeat_interval = milliseconds(20);
  engine_.hold = true;
  const auto r = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","stream":true})");
  StreamReader reader(r.stream);
  int comments = 0;
  for (int i = 0; i < 100 && comments < 2; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    reader.Drain();
    comments = 0;
    reader.Events(&comments);
  }
  EXPECT_GE(comments, 2);
  EXPECT_NE(reader.text.find(": ping\n\n"), std::string::npos);
  auto held = engine_.TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  held[0].sink->OnEnd(FinishReason::kStop, {}, Status::Ok());
}

TEST_F(OpenAiHandlerTest, XRequestTimeoutUsBecomesTheGenerationsDeadline) {
  engine_.hold = true;
  const auto before = std::chrono::steady_clock::now();
  Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","stream":true})",
       {{"x-request-timeout-us", "2000000"}});
  auto held = engine_.TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_GE(held[0].request.deadline, before + milliseconds(2000));
  EXPECT_LE(held[0].request.deadline, std::chrono::steady_clock::now() + milliseconds(2000));
  held[0].sink->OnEnd(FinishReason::kDeadline, {}, Status::Ok());
  const auto bad = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x"})",
                        {{"x-request-timeout-us", "soon"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("X-Request-Timeout-Us"), std::string::npos) << bad.body;
}

TEST_F(OpenAiHandlerTest, PriorityAndXClientIdReachTheGenerationAndRefusalsSayWhenToRetry) {
  engine_.hold = true;
  Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","priority":1,"stream":true})",
       {{"x-client-id", "batch-jobs"}});
  Call("POST", "/v2/models/llm/generate_stream",
       R"({"text_input":"x","parameters":{"priority":3}})");
  auto held = engine_.TakeHeld();
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].request.priority, 1u);
  EXPECT_EQ(held[0].request.client_id, "batch-jobs");
  EXPECT_EQ(held[1].request.priority, 3u);
  EXPECT_EQ(held[1].request.client_id, "");
  for (auto& h : held) h.sink->OnEnd(FinishReason::kStop, {}, Status::Ok());

  // A rate limit's refusal (admission control's wording) becomes 429 with its Retry-After.
  engine_.refuse =
      ResourceExhausted("rate limit for client 'a' exceeded (1 req/s); retry after 7 s");
  for (const char* target : {"/v1/completions", "/v2/models/llm/generate"}) {
    const auto r = Call("POST", target, R"({"model":"llm","prompt":"x","text_input":"x"})");
    EXPECT_EQ(r.status, 429) << target;
    EXPECT_EQ(Header(r, "Retry-After"), "7") << target;
  }
}

TEST_F(OpenAiHandlerTest, ATracedGenerationHasItsStagesAndTokenCountsAndOneAccessLine) {
  testing::FakeTracer tracer;
  options_.tracer = &tracer;
  const std::string parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  auto r = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"Once","n":2})",
                {{"traceparent", parent}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(Header(r, "traceresponse").empty());
  ASSERT_TRUE(r.on_sent);
  r.on_sent(true, std::chrono::steady_clock::now());
  auto stream = Call("POST", "/v2/models/llm/generate_stream", R"({"text_input":"Hi"})");
  ASSERT_EQ(stream.status, 200);
  EXPECT_FALSE(Header(stream, "traceresponse").empty());
  ASSERT_NE(stream.stream, nullptr);

  const std::vector<RequestTrace> traces = tracer.WaitForRecords(2);
  ASSERT_EQ(traces.size(), 2u);
  const RequestTrace& t = traces[0];
  EXPECT_EQ(t.name, "POST /v1/completions");
  EXPECT_EQ(t.status, 200);
  EXPECT_EQ(t.model, "llm");
  EXPECT_EQ(t.model_version, 3);
  EXPECT_EQ(FormatTraceparent(t.parent), parent);
  EXPECT_EQ(t.prompt_tokens, 4);      // "Once", once for both choices
  EXPECT_EQ(t.completion_tokens, 8);  // 4 each
  const RequestTrace::TimePoint zero{};
  EXPECT_NE(t.sent, zero);
  // The stages in order: parsed, a sequence started, its first token, the last token, sent.
  EXPECT_LE(t.received, t.decoded);
  EXPECT_LE(t.decoded, t.prompt_start);
  EXPECT_LE(t.prompt_start, t.first_token);
  EXPECT_LE(t.first_token, t.last_token);
  EXPECT_LE(t.last_token, t.encoded);
  EXPECT_LE(t.encoded, t.sent);
  EXPECT_EQ(traces[1].request_id, Header(stream, "X-Request-Id"));  // a stream's own id
  EXPECT_EQ(traces[1].completion_tokens, 4);

  const auto lines = log_.records();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].request_id, Header(stream, "X-Request-Id"));
  EXPECT_EQ(lines[1].prompt_tokens, 2);

  // Refused at once while streaming: one plain error, one access line, one trace.
  engine_.refuse = ResourceExhausted("queue full");
  const auto refused =
      Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","stream":true})");
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(log_.records().size(), 3u);
  EXPECT_EQ(log_.records()[2].status, 429);
  EXPECT_EQ(log_.records()[2].prompt_tokens, 0);  // a sequence ended: refused before a token
}

TEST_F(OpenAiHandlerTest, ChatAnswersTheTokensLogprobsAndAlternativesWhenAsked) {
  simdjson::dom::parser parser;
  auto r = Call("POST", "/v1/chat/completions",
                R"({"model":"llm","messages":[{"role":"user","content":"Hi"}],
                    "logprobs":true,"top_logprobs":2})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto logprobs = Parse(parser, r.body)["choices"].at(0)["logprobs"];
  EXPECT_TRUE(logprobs["refusal"].is_null());
  auto content = logprobs["content"].get_array().value();
  ASSERT_EQ(content.size(), 4u) << r.body;
  const char* const tokens[] = {"Hello", ",", " world", "!"};
  for (std::size_t i = 0; i < 4; ++i) {
    auto t = content.at(i);
    EXPECT_EQ(std::string_view(t["token"]), tokens[i]);
    EXPECT_EQ(double(t["logprob"]), -0.5);
    auto top = t["top_logprobs"].get_array().value();
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(std::string_view(top.at(0)["token"]), tokens[i]);
    EXPECT_EQ(std::string_view(top.at(1)["token"]), "alt1");
    EXPECT_EQ(double(top.at(1)["logprob"]), -1.0);
    EXPECT_EQ(top.at(1)["bytes"].get_array().value().size(), 4u);
  }
  auto bytes = content.at(0)["bytes"].get_array().value();
  std::vector<int64_t> hello;
  for (auto b : bytes) hello.push_back(int64_t(b));
  EXPECT_EQ(hello, (std::vector<int64_t>{72, 101, 108, 108, 111}));

  // logprobs without top_logprobs: the chosen tokens, no alternatives.
  r = Call("POST", "/v1/chat/completions",
           R"({"model":"llm","messages":[{"role":"user","content":"Hi"}],"logprobs":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  content = Parse(parser, r.body)["choices"].at(0)["logprobs"]["content"].get_array().value();
  ASSERT_EQ(content.size(), 4u);
  EXPECT_EQ(content.at(0)["top_logprobs"].get_array().value().size(), 0u);

  // Not asked: null, and the engine is not asked either.
  engine_.hold = true;
  r = Call("POST", "/v1/chat/completions",
           R"({"model":"llm","messages":[{"role":"user","content":"Hi"}],"stream":true})");
  auto held = engine_.TakeHeld();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_FALSE(held[0].request.logprobs);
  held[0].sink->OnStart(1, 0);
  held[0].sink->OnToken("x", 0);
  held[0].sink->OnEnd(harrier::FinishReason::kStop, {1, 1, 0}, Status::Ok());
  engine_.hold = false;
  r = Call("POST", "/v1/chat/completions",
           R"({"model":"llm","messages":[{"role":"user","content":"Hi"}]})");
  EXPECT_TRUE(Parse(parser, r.body)["choices"].at(0)["logprobs"].is_null()) << r.body;
}

TEST_F(OpenAiHandlerTest, ALogprobsTokenKeepsItsExactBytesBesideItsRepairedText) {
  // One character over two tokens: the first's text is held back until the second completes it.
  engine_.script = {"", "\xE4\xBD\xA0"};
  engine_.token_bytes = {"\xE4\xBD", "\xA0"};
  const auto r = Call("POST", "/v1/chat/completions",
                      R"({"model":"llm","messages":[{"role":"user","content":"Hi"}],
                          "logprobs":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  simdjson::dom::parser parser;
  auto choice = Parse(parser, r.body)["choices"].at(0);
  EXPECT_EQ(std::string_view(choice["message"]["content"]), "\xE4\xBD\xA0");
  auto content = choice["logprobs"]["content"].get_array().value();
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(std::string_view(content.at(0)["token"]), "\xEF\xBF\xBD");  // U+FFFD
  std::vector<int64_t> bytes;
  const simdjson::dom::array first_bytes = content.at(0)["bytes"].get_array().value();
  for (auto b : first_bytes) bytes.push_back(int64_t(b));
  EXPECT_EQ(bytes, (std::vector<int64_t>{0xE4, 0xBD}));
}

TEST_F(OpenAiHandlerTest, StreamedChatChunksCarryTheLogprobsOfTheTokensTheyRelease) {
  // "H" is held back and released with "i"; the last token's text never comes (a stop
  // string's), so its logprobs go in a chunk of no text before the finish.
  engine_.script = {"", "Hi", "!", ""};
  engine_.token_bytes = {"H", "i", "!", "\n"};
  const auto r = Call("POST", "/v1/chat/completions",
                      R"({"model":"llm","messages":[{"role":"user","content":"Hi"}],
                          "stream":true,"logprobs":true,"top_logprobs":1})");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(r.stream);
  StreamReader reader(r.stream);
  reader.Drain();
  const auto events = reader.Events();
  // role, "Hi", "!", "", finish, [DONE]
  ASSERT_EQ(events.size(), 6u) << reader.text;
  simdjson::dom::parser parser;
  auto tokens_of = [&](const std::string& data) {
    std::vector<std::string> tokens;
    auto choice = Parse(parser, data)["choices"].at(0);
    if (choice["logprobs"].is_null()) return std::vector<std::string>{"null"};
    const simdjson::dom::array entries = choice["logprobs"]["content"].get_array().value();
    for (auto t : entries) {
      tokens.emplace_back(std::string_view(t["token"]));
      EXPECT_EQ(t["top_logprobs"].get_array().value().size(), 1u);
    }
    return tokens;
  };
  EXPECT_EQ(tokens_of(events[0].data), (std::vector<std::string>{"null"}));  // the role's
  EXPECT_EQ(tokens_of(events[1].data), (std::vector<std::string>{"H", "i"}));
  EXPECT_EQ(tokens_of(events[2].data), (std::vector<std::string>{"!"}));
  EXPECT_EQ(tokens_of(events[3].data), (std::vector<std::string>{"\n"}));
  EXPECT_EQ(std::string_view(Parse(parser, events[3].data)["choices"].at(0)["delta"]["content"]),
            "");
  EXPECT_EQ(tokens_of(events[4].data), (std::vector<std::string>{"null"}));  // the finish
  EXPECT_EQ(events[5].data, "[DONE]");
}

TEST_F(OpenAiHandlerTest, CompletionsAnswerLogprobsInTheLegacyLayout) {
  simdjson::dom::parser parser;
  auto r = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","logprobs":2})");
  ASSERT_EQ(r.status, 200) << r.body;
  {
    auto logprobs = Parse(parser, r.body)["choices"].at(0)["logprobs"];
    std::vector<std::string> tokens;
    const simdjson::dom::array token_array = logprobs["tokens"].get_array().value();
    for (auto t : token_array) tokens.emplace_back(std::string_view(t));
    EXPECT_EQ(tokens, (std::vector<std::string>{"Hello", ",", " world", "!"}));
    std::vector<int64_t> offsets;
    const simdjson::dom::array offset_array = logprobs["text_offset"].get_array().value();
    for (auto o : offset_array) offsets.push_back(int64_t(o));
    EXPECT_EQ(offsets, (std::vector<int64_t>{0, 5, 6, 12}));
    auto token_logprobs = logprobs["token_logprobs"].get_array().value();
    ASSERT_EQ(token_logprobs.size(), 4u);
    EXPECT_EQ(double(token_logprobs.at(0)), -0.5);
    auto top = logprobs["top_logprobs"].get_array().value();
    ASSERT_EQ(top.size(), 4u);
    EXPECT_EQ(double(top.at(2)[" world"]), -0.5);
    EXPECT_EQ(double(top.at(2)["alt1"]), -1.0);
  }
  // logprobs 0: the chosen tokens, and null for their alternatives.
  r = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","logprobs":0})");
  ASSERT_EQ(r.status, 200) << r.body;
  {
    auto logprobs = Parse(parser, r.body)["choices"].at(0)["logprobs"];
    EXPECT_EQ(logprobs["tokens"].get_array().value().size(), 4u);
    const simdjson::dom::array alternatives = logprobs["top_logprobs"].get_array().value();
    for (auto t : alternatives) EXPECT_TRUE(t.is_null());
  }
  // Streamed: each chunk's tokens, their offsets counted from the choice's start.
  r = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","logprobs":1,"stream":true})");
  ASSERT_TRUE(r.stream);
  StreamReader reader(r.stream);
  reader.Drain();
  const auto events = reader.Events();
  ASSERT_EQ(events.size(), 6u) << reader.text;  // 4 texts, finish, [DONE]
  auto third = Parse(parser, events[2].data)["choices"].at(0)["logprobs"];
  EXPECT_EQ(std::string_view(third["tokens"].at(0)), " world");
  EXPECT_EQ(int64_t(third["text_offset"].at(0)), 6);
  EXPECT_TRUE(Parse(parser, events[4].data)["choices"].at(0)["logprobs"].is_null());
  // Not asked: null.
  r = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x"})");
  EXPECT_TRUE(Parse(parser, r.body)["choices"].at(0)["logprobs"].is_null()) << r.body;
}

TEST_F(OpenAiHandlerTest, TritonGenerateAndGenerateStream) {
  auto r = Call("POST", "/v2/models/llm/generate",
                R"({"text_input":"x","parameters":{"max_tokens":3}})");
  ASSERT_EQ(r.status, 200) << r.body;
  simdjson::dom::parser parser;
  auto doc = Parse(parser, r.body);
  EXPECT_EQ(std::string_view(doc["model_name"]), "llm");
  EXPECT_EQ(std::string_view(doc["model_version"]), "3");
  EXPECT_EQ(std::string_view(doc["text_output"]), "Hello, world");

  r = Call("POST", "/v2/models/llm/versions/3/generate_stream", R"({"text_input":"x"})");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(r.stream);
  StreamReader reader(r.stream);
  reader.Drain();
  EXPECT_TRUE(reader.finished);
  const auto events = reader.Events();
  ASSERT_EQ(events.size(), 4u) << reader.text;  // one per token; no [DONE] in Triton's
  std::string text;
  for (const auto& e : events) text += std::string_view(Parse(parser, e.data)["text_output"]);
  EXPECT_EQ(text, "Hello, world!");

  r = Call("POST", "/v2/models/nope/generate", R"({"text_input":"x"})");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(Parse(parser, r.body)["error"].get_string().value().find("nope"), std::string::npos);
  EXPECT_EQ(Call("GET", "/v2/models/llm/generate").status, 405);
}

// A model name or version in the path is percent-decoded here as on the KServe routes: one
// model, one answer, however the client spells it (the SDKs escape path parameters).
TEST_F(OpenAiHandlerTest, EncodedModelNamesAndVersionsReachTheirModel) {
  simdjson::dom::parser parser;
  auto r = Call("POST", "/v2/models/ll%6d/generate", R"({"text_input":"x"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(std::string_view(Parse(parser, r.body)["model_name"]), "llm");
  r = Call("POST", "/v2/models/%6C%6Cm/versions/%33/generate_stream", R"({"text_input":"x"})");
  ASSERT_EQ(r.status, 200) << r.body;
  r = Call("GET", "/v1/models/ll%6d");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(std::string_view(Parse(parser, r.body)["id"]), "llm");
  // A malformed escape: /v1/ answers in OpenAI's shape; a generate path is not one, so the
  // KServe routes behind answer it (they name the bad segment).
  r = Call("GET", "/v1/models/ll%6");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(std::string_view(Parse(parser, r.body)["error"]["message"]).find("percent-encoding"),
            std::string_view::npos);
  EXPECT_EQ(Call("POST", "/v2/models/ll%zz/generate", R"({"text_input":"x"})").status, 299);
  EXPECT_EQ(next_.last_target, "/v2/models/ll%zz/generate");
}

TEST_F(OpenAiHandlerTest, ModelsListsTheGeneratingModelsOnly) {
  auto r = Call("GET", "/v1/models");
  ASSERT_EQ(r.status, 200);
  simdjson::dom::parser parser;
  auto doc = Parse(parser, r.body);
  auto data = doc["data"].get_array().value();
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(std::string_view(data.at(0)["id"]), "llm");
  EXPECT_EQ(Call("GET", "/v1/models/llm").status, 200);
  r = Call("GET", "/v1/models/tensors");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(std::string_view(Parse(parser, r.body)["error"]["code"]), "model_not_found");
  EXPECT_EQ(Call("POST", "/v1/models").status, 405);
  EXPECT_EQ(Call("HEAD", "/v1/models").status, 200);  // as GET (RFC 9110 §9.1)
  EXPECT_EQ(Call("HEAD", "/v1/models/llm").status, 200);
  EXPECT_EQ(Call("GET", "/v1/embeddings").status, 404);
}

// On /v1 a model in the repository with no version loaded or on its way is OpenAI's 404, as
// GET /v1/models/{id} says of it; one still loading is a 503 to retry in 1 s (probe 59: both
// were a 503 without Retry-After, which OpenAI's clients retried three times). Triton's generate
// endpoint keeps Triton's 503.
TEST_F(OpenAiHandlerTest, AModelNotLoadedIsA404OnV1AndOneLoadingA503ToRetry) {
  models_.AddState("unloaded", 1, ModelState::kUnavailable, "unloaded");
  models_.AddState("failed", 1, ModelState::kUnavailable, "the file is not a GGUF model");
  models_.AddState("loading", 1, ModelState::kLoading);
  models_.AddState("swapping", 1, ModelState::kUnavailable, "unloaded");
  models_.AddState("swapping", 2, ModelState::kLoading);
  simdjson::dom::parser parser;
  const std::string messages = R"(,"messages":[{"role":"user","content":"x"}]})";
  for (const char* name : {"unloaded", "failed"}) {
    SCOPED_TRACE(name);
    auto r =
        Call("POST", "/v1/chat/completions", "{\"model\":\"" + std::string(name) + "\"" + messages);
    EXPECT_EQ(r.status, 404);
    EXPECT_EQ(std::string_view(Parse(parser, r.body)["error"]["code"]), "model_not_found");
    EXPECT_EQ(Header(r, "Retry-After"), "");
    EXPECT_EQ(Call("GET", "/v1/models/" + std::string(name)).status, 404);
    r = Call("POST", "/v1/completions",
             "{\"model\":\"" + std::string(name) + "\",\"prompt\":\"x\"}");
    EXPECT_EQ(r.status, 404);
  }
  for (const char* name : {"loading", "swapping"}) {
    SCOPED_TRACE(name);
    auto r =
        Call("POST", "/v1/chat/completions", "{\"model\":\"" + std::string(name) + "\"" + messages);
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(Header(r, "Retry-After"), "1");
  }
  auto r = Call("POST", "/v2/models/unloaded/generate", R"({"text_input":"x"})");
  EXPECT_EQ(r.status, 503);
  // A model with a ready version keeps the router's 503: a circuit breaker's wait, or none for a
  // version forced by X-Harrier-Model-Version that is not ready (probe 60: the breaker's 600 s
  // became 1).
  models_.AddReady("tripped", 1)->generator = &engine_;
  models_.route_errors["tripped"] =
      Unavailable("every version's circuit breaker is open; retry after 600 s");
  r = Call("POST", "/v1/chat/completions", R"({"model":"tripped")" + messages);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(Header(r, "Retry-After"), "600");
  models_.AddReady("forced", 1)->generator = &engine_;
  models_.AddState("forced", 2, ModelState::kUnavailable, "the file is not a GGUF model");
  models_.route_errors["forced"] = Unavailable("version 2 is not at ready state");
  r = Call("POST", "/v1/chat/completions", R"({"model":"forced")" + messages);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(Header(r, "Retry-After"), "");
}

TEST_F(OpenAiHandlerTest, ErrorsAreInOpenAisShapeAndChangeNothing) {
  simdjson::dom::parser parser;
  auto r = Call("POST", "/v1/chat/completions",
                R"({"model":"nope","messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(r.status, 404);
  auto doc = Parse(parser, r.body);
  EXPECT_EQ(std::string_view(doc["error"]["code"]), "model_not_found");
  EXPECT_EQ(std::string_view(doc["error"]["type"]), "invalid_request_error");

  r = Call("POST", "/v1/chat/completions",
           R"({"model":"tensors","messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("does not generate text"), std::string::npos);

  r = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","max_tokens":-3})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(std::string_view(Parse(parser, r.body)["error"]["param"]), "max_tokens");

  r = Call("POST", "/v1/completions", "{not json");
  EXPECT_EQ(r.status, 400);

  r = Call("POST", "/v1/chat/completions",
           R"({"model":"llm","messages":[{"role":"user","content":"x"}],"stream":true})");
  EXPECT_EQ(r.status, 200);  // accepted...
  engine_.refuse = InvalidArgument("the prompt is longer than the context (9000 > 512 tokens)");
  r = Call("POST", "/v1/chat/completions",
           R"({"model":"llm","messages":[{"role":"user","content":"x"}],"stream":true})");
  EXPECT_EQ(r.status, 400);  // ...refused at once: a plain error, not a stream
  EXPECT_FALSE(r.stream);
  EXPECT_NE(r.body.find("longer than the context"), std::string::npos);
  r = Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x"})");
  EXPECT_EQ(r.status, 400);
}

// A generation refused before the engine saw it is counted as the tensor endpoints count
// theirs: under the version once known, under model="" before; a Triton endpoint's model is the
// URL's (probe 32), an OpenAI endpoint's the one its body names, even in a body refused
// (probe 41). The engine's own refusals are its version's to count (MeteredGenerator).
TEST_F(OpenAiHandlerTest, RefusalsBeforeTheEngineAreCountedWhereTheTensorEndpointsCountThem) {
  auto tensors = models_.Get("tensors", std::nullopt);
  ASSERT_TRUE(tensors.ok());
  auto* tensor_model = static_cast<testing::FakeServableModel*>(tensors->get());
  EXPECT_EQ(Call("POST", "/v1/completions", "{not json").status, 400);
  EXPECT_EQ(Call("POST", "/v1/chat/completions",
                 R"({"model":"nope","messages":[{"role":"user","content":"x"}]})")
                .status,
            404);
  EXPECT_EQ(Call("POST", "/v2/models/nope/generate", R"({"text_input":"x"})").status, 404);
  EXPECT_EQ(models_.unrouted_failures,
            (std::vector<StatusCode>{StatusCode::kInvalidArgument, StatusCode::kNotFound,
                                     StatusCode::kNotFound}));
  EXPECT_EQ(Call("POST", "/v2/models/llm/generate", "{not json").status, 400);
  EXPECT_EQ(
      Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x","max_tokens":-3})").status,
      400);  // refused by the parser, but the body names the model: its bad request (probe 41)
  EXPECT_EQ(Call("POST", "/v1/completions", R"({"model":"tensors","prompt":"x"})").status, 400);
  EXPECT_EQ(llm_->recorded_failures,
            (std::vector<StatusCode>{StatusCode::kInvalidArgument, StatusCode::kInvalidArgument}));
  EXPECT_EQ(tensor_model->recorded_failures, std::vector<StatusCode>{StatusCode::kInvalidArgument});
  EXPECT_EQ(models_.unrouted_failures.size(), 3u);
  // Their access lines have no figures (no tensor stage durations of zero either).
  for (const auto& line : log_.records()) {
    EXPECT_EQ(line.total_ns, 0u) << line.target;
    EXPECT_EQ(line.prompt_tokens, -1) << line.target;
  }
  // Answered: nothing more is counted here, and its line has its figures.
  EXPECT_EQ(Call("POST", "/v1/completions", R"({"model":"llm","prompt":"x"})").status, 200);
  EXPECT_EQ(llm_->recorded_failures.size(), 2u);
  EXPECT_EQ(models_.unrouted_failures.size(), 3u);
  ASSERT_EQ(log_.records().size(), 7u);
  EXPECT_GT(log_.records().back().total_ns, 0u);
  EXPECT_GE(log_.records().back().prompt_tokens, 0);
}

}  // namespace
}  // namespace harrier::openai
