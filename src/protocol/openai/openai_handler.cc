#include "protocol/openai/openai_handler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/request_id.h"
#include "core/route_answer.h"
#include "core/status_mapping.h"
#include "core/timer_thread.h"
#include "core/url_path.h"
#include "harrier/generation.h"
#include "harrier/response_stream.h"
#include "protocol/common/content_coding.h"
#include "protocol/kserve/scheduling_fields.h"
#include "protocol/openai/generate_request.h"
#include "protocol/openai/generate_response.h"
#include "protocol/openai/generation_record.h"
#include "protocol/openai/openai_error.h"
#include "protocol/openai/openai_request.h"
#include "protocol/openai/openai_response.h"
#include "protocol/openai/sse.h"

namespace harrier::openai {
namespace {

using Clock = std::chrono::steady_clock;

// What a generation answers in: the API decides the JSON of every event and of the errors.
enum Kind : int { kChat, kCompletion, kGenerate, kGenerateStream };

bool IsTriton(int kind) {
  return kind == kGenerate || kind == kGenerateStream;
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string_view PathOf(std::string_view target) {
  return target.substr(0, std::min(target.find('?'), target.size()));
}

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = std::move(body);
  return r;
}

// An error in the shape the API's clients read: OpenAI's object, or Triton's {"error": ...}.
HttpResponse ErrorResponse(int kind, const Status& status, std::string_view param = {},
                           std::string_view code = {}) {
  const int http = HttpStatusFor(status.code());
  HttpResponse r = IsTriton(kind) ? JsonResponse(http, GenerateErrorJson(status.message()))
                                  : JsonResponse(http, OpenAiErrorJson(status, param, code));
  if (status.code() == StatusCode::kResourceExhausted)
    r.headers.emplace_back("Retry-After", std::to_string(RetryAfterSeconds(status)));
  return r;
}

// OpenAI's 404 for a model no one serves. A name longer than any a repository directory can
// have (NAME_MAX) is not echoed: a body may carry megabytes of it.
Status UnknownModel(std::string_view name) {
  constexpr size_t kLongestName = 255;
  if (name.size() > kLongestName) {
    return NotFound("The model does not exist: its name is " + std::to_string(name.size()) +
                    " bytes, and no model's is over " + std::to_string(kLongestName));
  }
  return NotFound("The model '" + std::string(name) + "' does not exist");
}

// A refusal of the prompt for its length (the engine's "the prompt is N tokens, more than the
// model's context of C", or N bytes: docs/llamacpp-backend.md) carries OpenAI's code for it,
// `context_length_exceeded`, and names the field that holds the prompt.
HttpResponse RefusalResponse(int kind, const Status& status) {
  const std::string_view message = status.message();
  const bool too_long = status.code() == StatusCode::kInvalidArgument &&
                        message.rfind("the prompt is ", 0) == 0 &&
                        message.find("the model's context") != std::string_view::npos;
  if (!too_long) return ErrorResponse(kind, status);
  return ErrorResponse(kind, status, kind == kChat ? "messages" : "prompt",
                       "context_length_exceeded");
}

HttpResponse MethodNotAllowed(std::string_view allow) {
  HttpResponse r = ErrorResponse(
      kChat, Status(StatusCode::kInvalidArgument, "method not allowed; use " + std::string(allow)));
  r.status = 405;
  r.headers.emplace_back("Allow", std::string(allow));
  return r;
}

openai::FinishReason WireReason(harrier::FinishReason reason) {
  return reason == harrier::FinishReason::kLength ? openai::FinishReason::kLength
                                                  : openai::FinishReason::kStop;
}

// /v2/models/{m}[/versions/{v}]/generate[_stream]: the model, the version and which, both
// segments percent-decoded as the KServe routes decode them; false when the path is not one of
// them, or when a segment is malformed (a bad escape, a version that is not a positive integer):
// the KServe routes then answer the 400 that names it.
bool MatchGenerate(std::string_view path, std::string* model, std::optional<int64_t>* version,
                   int* kind) {
  constexpr std::string_view kPrefix = "/v2/models/";
  if (path.substr(0, kPrefix.size()) != kPrefix) return false;
  std::string_view rest = path.substr(kPrefix.size());
  if (rest.ends_with("/generate_stream")) {
    *kind = kGenerateStream;
    rest.remove_suffix(std::string_view("/generate_stream").size());
  } else if (rest.ends_with("/generate")) {
    *kind = kGenerate;
    rest.remove_suffix(std::string_view("/generate").size());
  } else {
    return false;
  }
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos) {
    if (rest.empty() || !PercentDecode(rest, model).ok()) return false;
    *version = std::nullopt;
    return true;
  }
  std::string_view tail = rest.substr(slash);
  constexpr std::string_view kVersions = "/versions/";
  if (tail.substr(0, kVersions.size()) != kVersions) return false;
  tail.remove_prefix(kVersions.size());
  StatusOr<int64_t> v = ParseUrlVersion(tail);
  if (!v.ok() || !PercentDecode(rest.substr(0, slash), model).ok()) return false;
  *version = *v;
  return true;
}

bool IsOwnPath(std::string_view path) {
  if (path.substr(0, 4) == "/v1/" || path == "/v1") return true;
  std::string model;
  std::optional<int64_t> version;
  int kind;
  return MatchGenerate(path, &model, &version, &kind);
}

class Generation;

}  // namespace

struct OpenAiHandler::Shared {
  Options options;
  std::unique_ptr<StreamStore> store;
  TimerThread timer;
  int64_t started = UnixSeconds();  // the models' `created`
  // Streaming generations by stream id, so that a resume can tell its generation to go on.
  std::mutex live_mu;
  std::unordered_map<std::string, std::weak_ptr<Generation>> live;  // guarded by live_mu
  // options.access_log while the handler lives, for the resumed streams' lines: a resume may
  // end after the handler, and the access log, are gone (the handler's destructor clears it).
  std::mutex resume_log_mu;
  AccessLog* resume_log = nullptr;  // guarded by resume_log_mu
};

namespace {

using SharedPtr = std::shared_ptr<OpenAiHandler::Shared>;

// One request's sequences, their answer and their stream. Engine callbacks (one engine thread
// per model), the transport's cancellation and timer callbacks meet here under `mu`.
class Generation : public std::enable_shared_from_this<Generation> {
 public:
  struct Setup {
    SharedPtr shared;
    int kind = kChat;
    GenerationParams params;
    std::shared_ptr<ServableModel> model;  // pins the version until the last sequence ends
    std::string request_id;                // the stream's id when streaming
    std::shared_ptr<CancellationToken> client_token;  // the transport's; may be null
  };

  Generation(Setup setup, GenerationRecord record)
      : s_(std::move(setup)), record_(std::move(record)), choices_(s_.params.n) {
    meta_.id =
        s_.kind == kChat ? NewChatCompletionId(SystemRandom()) : NewCompletionId(SystemRandom());
    meta_.created = UnixSeconds();
    meta_.model = s_.params.model;
    meta_.include_usage = s_.params.include_usage;
    engine_token_ = std::make_shared<CancellationToken>();
  }

  bool streaming() const { return s_.params.stream || s_.kind == kGenerateStream; }
  const GenerationParams& params() const { return s_.params; }
  const std::string& request_id() const { return s_.request_id; }
  const std::shared_ptr<CancellationToken>& engine_token() const { return engine_token_; }

  // Non-streaming: the answer goes to `respond` once every sequence has ended.
  void SetResponder(HttpResponder respond) { respond_ = std::move(respond); }
  // Streaming: events go to `out` (and the store), behind `head`, which goes to `respond` when
  // the first sequence is accepted (its prompt fits). When none is, `respond` gets a plain error
  // instead. Starts the heartbeat.
  void SetStream(std::shared_ptr<ResponseStream> out, HttpResponse head, HttpResponder respond) {
    out_ = std::move(out);
    head_ = std::move(head);
    respond_ = std::move(respond);
    last_write_ = Clock::now();
    ScheduleHeartbeat(last_write_ + s_.shared->options.heartbeat_interval);
  }
  // Watches the client: when it goes, the sequences stop (after the grace).
  void WatchClient() {
    if (!s_.client_token) return;
    std::weak_ptr<Generation> weak = weak_from_this();
    client_watch_ = s_.client_token->OnCancel([weak] {
      if (auto g = weak.lock()) g->OnClientGone();
    });
  }
  // A reader resumed the stream: the grace no longer ends the sequences.
  void MarkResumed() {
    std::lock_guard lock(mu_);
    resumed_ = true;
  }

  // The engine refused sequence `index` at once (Generate's status): it ends as an error.
  void Refused(int index, const Status& status) {
    {
      std::lock_guard lock(mu_);
      choices_[index].refused = true;
    }
    OnEnd(index, harrier::FinishReason::kError, GenerationUsage{}, status);
  }

  // When every sequence was refused at once, the handler answers with a plain error (not a
  // stream) and reports it through the record; only then, once they all ended.
  GenerationRecord& record() { return record_; }

  // The engine accepted sequence `index`: a stream's head goes out with the first, once every
  // sequence was handed to the engine and none was refused.
  void OnAccepted(int index) {
    std::unique_lock lock(mu_);
    choices_[index].accepted = true;
    SendHeadLocked(std::move(lock));
  }

  // Every sequence was handed to the engine (or refused). Until then a stream's head waits, so
  // that a request one of whose choices is refused at once gets a plain error (a 429 with
  // Retry-After, as without streaming), not a stream that starts and then fails; and the
  // answer waits, so that it is decided with every choice known.
  void Submitted() {
    std::unique_lock lock(mu_);
    submitted_ = true;
    lock = SendHeadLocked(std::move(lock));
    if (ended_ < static_cast<int>(choices_.size()) || finished_) return;
    FinishLocked(std::move(lock));
  }

  void OnStart(int index) {
    std::lock_guard lock(mu_);
    if (!choices_[index].ended) record_.SequenceStarted(Clock::now());
  }

  // Before the OnToken of the same token. Kept until that token's text is sent: held-back text
  // comes later, and a chunk carries the logprobs of the tokens whose text it releases.
  void OnTokenLogprobs(int index, const TokenLogprobs& token) {
    std::lock_guard lock(mu_);
    Choice& c = choices_[index];
    if (c.ended || !AnswersLogprobs()) return;
    TokenLogprob& entry = c.logprobs.emplace_back();
    entry.token = token.bytes;
    entry.logprob = token.logprob;
    entry.top.reserve(token.top.size());
    for (const auto& alternative : token.top) {
      entry.top.push_back({alternative.bytes, alternative.logprob});
    }
  }

  void OnToken(int index, std::string_view text) {
    std::lock_guard lock(mu_);
    Choice& c = choices_[index];
    if (c.ended) return;
    record_.Token(Clock::now());
    if (text.empty()) return;  // the engine holds text back (a possible stop string)
    if (!streaming()) {
      c.text.append(text);
      return;
    }
    if (IsTriton(s_.kind)) {
      EmitLocked(GenerateResponseJson(s_.params.model, VersionString(), text));
      return;
    }
    EmitContentLocked(index, text);
  }

  void OnEnd(int index, harrier::FinishReason reason, const GenerationUsage& usage,
             const Status& status) {
    std::unique_lock lock(mu_);
    Choice& c = choices_[index];
    if (c.ended) return;
    c.ended = true;
    if (!c.accepted) c.refused = true;  // by the engine, before its prompt was accepted
    c.reason = reason;
    c.usage = usage;
    c.status = status;
    record_.SequenceEnded(usage);
    if (streaming() && !finished_) {
      // A cancelled stream says so too: a reader who resumes it must see that it was cut short.
      if (reason == harrier::FinishReason::kError || reason == harrier::FinishReason::kDeadline ||
          reason == harrier::FinishReason::kCancelled) {
        // One error event ends the stream (an SDK stops reading there): the other choices stop,
        // and their ends say nothing more.
        if (!error_sent_) {
          error_sent_ = true;
          const Status why = reason == harrier::FinishReason::kCancelled && !cancelled_because_.ok()
                                 ? cancelled_because_
                                 : FinishStatus(reason, status);
          EmitLocked(IsTriton(s_.kind) ? GenerateErrorJson(why.message()) : OpenAiErrorJson(why));
          // Cancel only wakes the engine's loop: safe under the lock, as in EmitLocked.
          if (ended_ + 1 < static_cast<int>(choices_.size())) engine_token_->Cancel();
        }
      } else if (reason != harrier::FinishReason::kCancelled) {
        // Tokens whose text never came (the stop string's): their logprobs still go out.
        if (!IsTriton(s_.kind) && !c.logprobs.empty()) EmitContentLocked(index, "");
        if (s_.kind == kChat) {
          if (!c.role_sent) {
            c.role_sent = true;
            EmitLocked(ChatRoleChunkJson(meta_, index));
          }
          EmitLocked(ChatFinishChunkJson(meta_, index, WireReason(reason)));
        } else if (s_.kind == kCompletion) {
          EmitLocked(CompletionFinishChunkJson(meta_, index, WireReason(reason)));
        }
      }
    }
    if (++ended_ < static_cast<int>(choices_.size()) || !submitted_) return;
    FinishLocked(std::move(lock));
  }

  void OnClientGone() {
    std::chrono::milliseconds grace = s_.shared->options.disconnect_grace;
    {
      std::lock_guard lock(mu_);
      if (finished_) return;
      client_gone_ = true;
      if (out_) out_->Abandon();
      // What a reader who resumes the stream is told, if the sequences stop for it.
      cancelled_because_ = Cancelled(
          grace.count() <= 0 ? std::string("the client disconnected; the generation stopped")
                             : "the client disconnected and did not resume the stream within " +
                                   std::to_string(grace.count()) + " ms; the generation stopped");
    }
    if (grace.count() <= 0) {
      engine_token_->Cancel();
      return;
    }
    std::weak_ptr<Generation> weak = weak_from_this();
    s_.shared->timer.Schedule(Clock::now() + grace, [weak] {
      auto g = weak.lock();
      if (!g) return;
      {
        std::lock_guard lock(g->mu_);
        if (g->resumed_ || g->finished_) return;
      }
      g->engine_token_->Cancel();
    });
  }

 private:
  struct Choice {
    std::string text;
    // Non-streaming: every token's; streaming: those whose text is not sent yet.
    std::vector<TokenLogprob> logprobs;
    std::size_t logprobs_offset = 0;  // streaming: bytes of the tokens already sent
    bool role_sent = false;
    bool accepted = false;  // the engine's OnAccepted came
    bool ended = false;
    bool refused = false;  // by the engine, at once or before it was accepted: it never ran
    harrier::FinishReason reason = harrier::FinishReason::kStop;
    GenerationUsage usage;
    Status status;
  };

  // OpenAI's answers carry logprobs when asked; Triton's generate answers never do.
  bool AnswersLogprobs() const { return s_.params.logprobs && !IsTriton(s_.kind); }

  // A streamed chat or completions chunk of `text`, with the logprobs of the tokens it
  // releases when the request asked for them.
  void EmitContentLocked(int index, std::string_view text) {
    Choice& c = choices_[index];
    const std::vector<TokenLogprob>* logprobs = AnswersLogprobs() ? &c.logprobs : nullptr;
    if (s_.kind == kChat) {
      if (!c.role_sent) {
        c.role_sent = true;
        EmitLocked(ChatRoleChunkJson(meta_, index));
      }
      EmitLocked(ChatContentChunkJson(meta_, index, text, logprobs));
    } else {
      EmitLocked(CompletionChunkJson(meta_, index, text, logprobs, c.logprobs_offset));
    }
    for (const TokenLogprob& t : c.logprobs) c.logprobs_offset += t.token.size();
    c.logprobs.clear();
  }

  std::string VersionString() const {
    return s_.model ? std::to_string(s_.model->version()) : std::string();
  }

  // One event: numbered and kept by the store (for resumption), then sent unless the client is
  // gone. A client that holds back too much is told so and the sequences stop.
  void EmitLocked(std::string data) {
    if (overflowed_) return;  // the stream ended with the back-pressure error: nothing after it
    const bool overflowing = !client_gone_ && out_ &&
                             out_->pending_bytes() > s_.shared->options.max_pending_stream_bytes;
    if (overflowing) {
      // Kept and numbered like any event, in place of `data`: a reader who resumes the stream
      // sees where and why it ended.
      overflowed_ = true;
      const Status why =
          ResourceExhausted("the client reads the stream too slowly: more than " +
                            std::to_string(s_.shared->options.max_pending_stream_bytes) +
                            " bytes are waiting for it; the generation stops");
      data = IsTriton(s_.kind) ? GenerateErrorJson(why.message()) : OpenAiErrorJson(why);
    }
    uint64_t id = ++events_;
    if (!s_.request_id.empty()) {
      auto stored = s_.shared->store->Append(s_.request_id, data);
      if (stored.ok()) id = *stored;
    }
    if (overflowing) {
      out_->Write(SseEvent(data, id), {});
      out_->Finish();
      // Outside the lock would be better, but Cancel only wakes the engine's loop.
      engine_token_->Cancel();
      return;
    }
    if (client_gone_ || !out_) return;
    std::string event = SseEvent(data, id);
    response_bytes_ += event.size();
    out_->Write(std::move(event), {});
    last_write_ = Clock::now();
  }

  // Sends a stream's head when it is due: streaming, not sent yet, every sequence handed to the
  // engine, one accepted and none refused. Returns the lock, held again.
  std::unique_lock<std::mutex> SendHeadLocked(std::unique_lock<std::mutex> lock) {
    if (!streaming() || head_sent_ || finished_ || !submitted_ || !RefusalLocked().ok() ||
        std::none_of(choices_.begin(), choices_.end(),
                     [](const Choice& c) { return c.accepted; })) {
      return lock;
    }
    head_sent_ = true;
    HttpResponse head = std::move(head_);
    HttpResponder respond = respond_;
    lock.unlock();
    respond(std::move(head));
    lock.lock();
    return lock;
  }

  // Why a choice the engine refused was refused (the others it stopped were cancelled for
  // it); Ok when none was.
  Status RefusalLocked() const {
    for (const auto& c : choices_) {
      if (c.refused && !c.status.ok() && c.status.code() != StatusCode::kCancelled) {
        return c.status;
      }
    }
    return Status::Ok();
  }

  void FinishLocked(std::unique_lock<std::mutex> lock) {
    finished_ = true;
    if (streaming() && !head_sent_) {
      // No sequence was accepted (each refused at once, or by the engine for its prompt), or one
      // was refused: no stream, a plain error.
      Status failure = RefusalLocked();
      for (const Choice& c : choices_) {
        if (!failure.ok()) break;
        failure = FinishStatus(c.reason, c.status);
      }
      if (failure.ok()) failure = Internal("no sequence was accepted");
      if (out_) out_->Abandon();
      if (!s_.request_id.empty()) (void)s_.shared->store->Finish(s_.request_id);
      HttpResponse answer = RefusalResponse(s_.kind, failure);
      answer.headers.emplace_back("X-Request-Id", client_request_id_);
      if (record_.traced()) answer.headers.emplace_back("traceresponse", record_.TraceResponse());
      answer.on_sent = record_.Finish(answer.status, failure.message(), answer.body.size());
      HttpResponder respond = std::move(respond_);
      lock.unlock();
      Forget();
      respond(std::move(answer));
      return;
    }
    GenerationUsage total;
    Status failure = RefusalLocked();
    bool failed = !failure.ok();
    for (const auto& c : choices_) {
      total.prompt_tokens = std::max(total.prompt_tokens, c.usage.prompt_tokens);
      total.completion_tokens += c.usage.completion_tokens;
      total.reused_prompt_tokens =
          std::max(total.reused_prompt_tokens, c.usage.reused_prompt_tokens);
      if (!failed && (c.reason == harrier::FinishReason::kError ||
                      c.reason == harrier::FinishReason::kDeadline ||
                      c.reason == harrier::FinishReason::kCancelled)) {
        failed = true;
        failure = FinishStatus(c.reason, c.status);
      }
    }
    const Usage usage{total.prompt_tokens, total.completion_tokens, total.reused_prompt_tokens};
    int status = 200;
    std::string error;
    HttpResponder respond;
    if (streaming()) {
      if (!IsTriton(s_.kind)) {
        if (s_.params.include_usage && !failed) {
          EmitLocked(s_.kind == kChat ? ChatUsageChunkJson(meta_, usage)
                                      : CompletionUsageChunkJson(meta_, usage));
        }
        EmitLocked("[DONE]");
      }
      if (out_ && !overflowed_) out_->Finish();
      if (!s_.request_id.empty()) (void)s_.shared->store->Finish(s_.request_id);
      if (failed) error = failure.message();
    } else {
      respond = std::move(respond_);
    }
    lock.unlock();

    HttpResponse answer;
    if (!streaming()) {
      if (failed) {
        answer = RefusalResponse(s_.kind, failure);
        error = failure.message();
      } else {
        std::vector<openai::Choice> out;
        for (std::size_t i = 0; i < choices_.size(); ++i) {
          out.push_back(openai::Choice{static_cast<int32_t>(i), std::move(choices_[i].text),
                                       WireReason(choices_[i].reason), std::nullopt});
          if (AnswersLogprobs()) out.back().logprobs = std::move(choices_[i].logprobs);
        }
        answer = JsonResponse(200, s_.kind == kChat ? ChatCompletionJson(meta_, out, usage)
                                   : s_.kind == kCompletion
                                       ? CompletionJson(meta_, out, usage)
                                       : GenerateResponseJson(s_.params.model, VersionString(),
                                                              out.empty() ? "" : out[0].text));
      }
      status = answer.status;
      response_bytes_ = answer.body.size();
      answer.headers.emplace_back("X-Request-Id", client_request_id_);
      if (record_.traced()) answer.headers.emplace_back("traceresponse", record_.TraceResponse());
    }
    auto on_sent = record_.Finish(status, error, response_bytes_);
    Forget();
    if (respond) {
      answer.on_sent = std::move(on_sent);
      respond(std::move(answer));
    } else if (on_sent) {
      on_sent(true, Clock::now());  // a stream's last event is with the transport
    }
  }

  // The generation is over: no resume will find it, the client is no longer watched, and the
  // version may retire.
  void Forget() {
    if (!s_.request_id.empty()) {
      std::lock_guard live(s_.shared->live_mu);
      s_.shared->live.erase(s_.request_id);
    }
    if (s_.client_token && client_watch_ != 0) s_.client_token->Unregister(client_watch_);
    // Not released here, on the engine's thread: the last handle would shut the engine down
    // from its own thread.
    s_.shared->timer.Schedule(Clock::now(), [model = std::move(s_.model)] {});
  }

  void ScheduleHeartbeat(Clock::time_point at) {
    if (s_.shared->options.heartbeat_interval.count() <= 0) return;
    std::weak_ptr<Generation> weak = weak_from_this();
    s_.shared->timer.Schedule(at, [weak] {
      if (auto g = weak.lock()) g->Heartbeat();
    });
  }

  void Heartbeat() {
    std::lock_guard lock(mu_);
    if (finished_ || client_gone_ || overflowed_ || !out_) return;
    const auto interval = s_.shared->options.heartbeat_interval;
    const auto now = Clock::now();
    if (!head_sent_) {  // nothing to keep alive yet: the head waits for an accepted prompt
      ScheduleHeartbeat(now + interval);
      return;
    }
    if (now - last_write_ >= interval) {
      out_->Write(std::string(kSseHeartbeat), {});
      last_write_ = now;
    }
    ScheduleHeartbeat(last_write_ + interval);
  }

 public:
  std::string client_request_id_;  // X-Request-Id of a non-streaming answer

 private:
  Setup s_;
  GenerationRecord record_;  // guarded by mu_
  ResponseMeta meta_;
  std::shared_ptr<CancellationToken> engine_token_;  // ours: given to every sequence
  uint64_t client_watch_ = 0;

  std::mutex mu_;
  std::vector<Choice> choices_;          // guarded by mu_
  int ended_ = 0;                        // guarded by mu_
  bool finished_ = false;                // guarded by mu_
  bool client_gone_ = false;             // guarded by mu_
  bool resumed_ = false;                 // guarded by mu_
  bool overflowed_ = false;              // guarded by mu_
  Status cancelled_because_;             // guarded by mu_: set when the client went
  uint64_t events_ = 0;                  // guarded by mu_
  uint64_t response_bytes_ = 0;          // guarded by mu_
  Clock::time_point last_write_{};       // guarded by mu_
  std::shared_ptr<ResponseStream> out_;  // guarded by mu_
  HttpResponse head_;                    // guarded by mu_: a stream's, until head_sent_
  bool head_sent_ = false;               // guarded by mu_
  bool submitted_ = false;               // guarded by mu_: see Submitted
  bool error_sent_ = false;              // guarded by mu_: a stream's one error event
  HttpResponder respond_;                // guarded by mu_
};

// One sequence's reports, handed to its generation with the sequence's index.
class ChoiceSink : public GenerationSink {
 public:
  ChoiceSink(std::shared_ptr<Generation> g, int index) : g_(std::move(g)), index_(index) {}
  void OnAccepted() override { g_->OnAccepted(index_); }
  void OnStart(int, int) override { g_->OnStart(index_); }
  void OnTokenLogprobs(const TokenLogprobs& token) override { g_->OnTokenLogprobs(index_, token); }
  void OnToken(std::string_view text, float) override { g_->OnToken(index_, text); }
  void OnEnd(harrier::FinishReason reason, const GenerationUsage& usage,
             const Status& status) override {
    g_->OnEnd(index_, reason, usage, status);
  }

 private:
  const std::shared_ptr<Generation> g_;
  const int index_;
};

// A resumed stream: the store's events after Last-Event-ID, then the live rest.
class Resumer : public std::enable_shared_from_this<Resumer> {
 public:
  // Events read from the store per turn: what a slow reader's queue may pass its bound by.
  static constexpr size_t kResumeBatchEvents = 32;

  // `line`: the resume request as its access line names it (method, target, key) and its own
  // `request_id`, written once, when the stream ends (core/route_answer.h).
  Resumer(SharedPtr shared, std::shared_ptr<ResponseStream> out, HttpRequest line,
          std::string request_id)
      : shared_(std::move(shared)),
        out_(std::move(out)),
        line_(std::move(line)),
        request_id_(std::move(request_id)) {}
  ~Resumer() {
    std::lock_guard lock(mu_);
    reader_.reset();  // before the store, which `shared_` keeps
  }
  // Keeps itself alive while it has a reader: until the stream ends or the client goes.
  void SetReader(std::unique_ptr<StreamReader> reader) {
    std::shared_ptr<Resumer> released;
    std::lock_guard lock(mu_);
    reader_ = std::move(reader);
    if (reader_) {
      self_ = shared_from_this();
    } else {
      released = std::move(self_);
    }
  }
  // The connection closed (the client went away, or the server stopped at its exit timeout): the
  // stream ends unfinished.
  void ClientGone() {
    std::shared_ptr<Resumer> released;
    std::lock_guard lock(mu_);
    if (!reader_) return;
    reader_.reset();
    released = std::move(self_);
    WriteLine(kConnectionClosed);
  }
  // The store says there is more (under its lock: only schedule).
  static void Wake(const std::weak_ptr<Resumer>& weak, TimerThread* timer) {
    timer->Schedule(Clock::now(), [weak] {
      if (auto r = weak.lock()) r->Pump();
    });
  }
  void Pump() {
    std::shared_ptr<Resumer> released;  // the last reference may be our own: drop it last
    std::lock_guard lock(mu_);
    if (!reader_) return;
    if (out_->abandoned()) {  // the client went away again
      reader_.reset();
      released = std::move(self_);
      WriteLine(kConnectionClosed);
      return;
    }
    // A client that reads slowly holds back what was written: no more is read from the store
    // until that drains (the last part written over the bound wakes the pump when it is
    // sent). Stored events can wait, unlike a live generation's, so a resumer is slowed, never
    // cut off. Without the bound, every resumer that did not read got the whole stored stream
    // queued (probe 31: 40 of a 6.8 MB stream, +230 MiB).
    const std::size_t bound = shared_->options.max_pending_stream_bytes;
    if (out_->pending_bytes() > bound) return;
    auto batch = reader_->Read(kResumeBatchEvents);
    for (size_t i = 0; i < batch.events.size(); ++i) {
      std::string event = SseEvent(batch.events[i].data, batch.events[i].id);
      bytes_ += event.size();
      const bool last = i + 1 == batch.events.size();
      if (last && out_->pending_bytes() + event.size() > bound) {
        out_->Write(std::move(event), [weak = weak_from_this(), timer = &shared_->timer](bool) {
          Wake(weak, timer);
        });
      } else {
        out_->Write(std::move(event), {});
      }
    }
    if (batch.state == StreamState::kGone) {
      const Status gone = NotFound("the stream expired or was evicted");
      std::string event = SseEvent(OpenAiErrorJson(gone));
      bytes_ += event.size();
      out_->Write(std::move(event), {});
      out_->Finish();
      reader_.reset();
      released = std::move(self_);
      WriteLine(gone.message());
    } else if (batch.state == StreamState::kFinished && batch.drained) {
      out_->Finish();
      reader_.reset();
      released = std::move(self_);
      WriteLine("");
    } else if (!batch.drained && out_->pending_bytes() <= bound) {
      Wake(weak_from_this(), &shared_->timer);  // more than one batch: the rest next turn
    }
  }

 private:
  // Why a stream's line says it ended early when its connection went: the client's leaving and
  // the server's stop at --exit-timeout-secs look alike from here (probe 42).
  static constexpr std::string_view kConnectionClosed =
      "the connection closed before the stream ended";

  // The stream's access line: 200 (its head went out), the event bytes written, and why it
  // ended early. Once; under mu_.
  void WriteLine(std::string_view error) {
    if (logged_) return;
    logged_ = true;
    std::lock_guard lock(shared_->resume_log_mu);
    WriteRouteAccessLine(shared_->resume_log, line_, request_id_, 200, 0, bytes_, error);
  }

  const SharedPtr shared_;
  const std::shared_ptr<ResponseStream> out_;
  const HttpRequest line_;
  const std::string request_id_;
  std::mutex mu_;
  std::unique_ptr<StreamReader> reader_;  // guarded by mu_
  std::shared_ptr<Resumer> self_;         // guarded by mu_: set while reader_ is
  uint64_t bytes_ = 0;                    // guarded by mu_
  bool logged_ = false;                   // guarded by mu_
};

}  // namespace

OpenAiHandler::OpenAiHandler(ModelManager* models, HttpHandler* next, Options options)
    : models_(models), next_(next), shared_(std::make_shared<Shared>()) {
  shared_->options = std::move(options);
  shared_->resume_log = shared_->options.access_log;
  auto store = StreamStore::Create(shared_->options.store);
  if (!store.ok()) {
    spdlog::error("openai: stream store options refused ({}); using the defaults",
                  store.status().message());
    store = StreamStore::Create(StreamStoreOptions{});
  }
  shared_->store = std::move(store).value();
}

OpenAiHandler::~OpenAiHandler() {
  std::lock_guard lock(shared_->resume_log_mu);
  shared_->resume_log = nullptr;  // a resume still streaming writes no line from here on
}

std::optional<HttpResponse> OpenAiHandler::Precheck(const HttpRequest& head) {
  if (IsOwnPath(PathOf(head.target))) return std::nullopt;
  return next_->Precheck(head);
}

bool OpenAiHandler::ServesAsStream(const HttpRequest& head) const {
  return next_->ServesAsStream(head);
}

std::shared_ptr<HttpStreamHandler> OpenAiHandler::OpenStream(
    const HttpRequest& head, std::shared_ptr<HttpStreamWriter> writer,
    HttpResponse* response_head) {
  return next_->OpenStream(head, std::move(writer), response_head);
}

std::optional<HttpResponse> OpenAiHandler::TransportError(int status, std::string_view message,
                                                          const HttpRequest& request,
                                                          std::string_view code) {
  if (!std::string_view(request.target).starts_with("/v1/"))
    return next_->TransportError(status, message, request, code);
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = OpenAiErrorJson(status, message, code);
  return r;
}

void OpenAiHandler::Handle(HttpRequest&& request, HttpResponder respond) {
  const std::string_view path = PathOf(request.target);
  std::string model;
  std::optional<int64_t> version;
  int kind = kChat;
  // An answer of this handler's own that is not a generation: its X-Request-Id and access line.
  auto with_id = [&](HttpResponse r) {
    AnswerRoute(shared_->options.access_log, request,
                ResolveRequestId(request.Header("x-request-id"), RequestIdGenerator::Process()),
                std::move(r), respond);
  };
  if (MatchGenerate(path, &model, &version, &kind)) {
    if (request.method != "POST") return with_id(MethodNotAllowed("POST"));
    return Generate(std::move(request), std::move(respond), kind, std::move(model), version);
  }
  if (path.substr(0, 4) != "/v1/" && path != "/v1") {
    next_->Handle(std::move(request), std::move(respond));
    return;
  }
  if (path == "/v1/chat/completions" || path == "/v1/completions") {
    if (request.method != "POST") return with_id(MethodNotAllowed("POST"));
    const int k = path == "/v1/completions" ? kCompletion : kChat;
    return Generate(std::move(request), std::move(respond), k, std::string(), std::nullopt);
  }
  if (path == "/v1/models" || path.substr(0, 11) == "/v1/models/") {
    if (!IsGetOrHead(request.method)) return with_id(MethodNotAllowed("GET, HEAD"));
    const bool one = path.size() > 11;
    std::string id;  // percent-decoded, as the SDKs encode it (encodeURIComponent)
    if (Status s = one ? PercentDecode(path.substr(11), &id) : Status::Ok(); !s.ok())
      return with_id(ErrorResponse(kChat, s, "model", {}));
    return with_id(ListModels(one, id));
  }
  if (path.substr(0, 12) == "/v1/streams/" && path.size() > 12) {
    if (!IsGetOrHead(request.method)) return with_id(MethodNotAllowed("GET, HEAD"));
    const std::string id(path.substr(12));
    return Resume(std::move(request), std::move(respond), id);
  }
  with_id(
      ErrorResponse(kChat, NotFound("no such endpoint: " + std::string(path)), {}, "unknown_url"));
}

HttpResponse OpenAiHandler::ListModels(bool one, std::string_view id) {
  std::vector<ModelEntry> entries;
  std::string last;
  for (const auto& row : models_->Index()) {
    if (row.state != ModelState::kReady || row.name == last) continue;
    last = row.name;
    auto model = models_->Get(row.name, std::nullopt);
    if (!model.ok() || (*model)->generative() == nullptr) continue;
    entries.push_back(ModelEntry{row.name, shared_->started});
  }
  if (!one) return JsonResponse(200, ModelListJson(entries));
  for (const auto& e : entries)
    if (e.id == id) return JsonResponse(200, ModelJson(e));
  return ErrorResponse(kChat, UnknownModel(id), "model", "model_not_found");
}

void OpenAiHandler::Generate(HttpRequest request, HttpResponder respond, int kind,
                             std::string model_name, std::optional<int64_t> version) {
  const Clock::time_point received_at =
      request.received_at == Clock::time_point{} ? Clock::now() : request.received_at;
  const std::string client_id =
      ResolveRequestId(request.Header("x-request-id"), RequestIdGenerator::Process());
  // Decoded when it came compressed (as the KServe endpoints do); checked below, once the
  // record can answer for it.
  std::shared_ptr<const std::string> content = request.body;
  const Status decoded =
      DecodeRequestBody(request, shared_->options.max_body_bytes, /*padding=*/0, &content);
  const std::string_view body = content ? std::string_view(*content) : std::string_view();
  GenerationRecord::Head about;
  about.request_id = client_id;
  about.protocol = "http";
  about.transport = std::string(HttpVersionName(request.version));
  if (about.transport.empty()) about.transport = "HTTP";
  about.method = request.method;
  about.target = request.target;
  about.span_name = request.method + " " + std::string(PathOf(request.target));
  about.model = model_name;
  about.key_id = request.auth_key_id;
  about.request_bytes = body.size();
  about.received = received_at;
  about.body_received = request.body_received_at;
  about.traceparent = request.Header("traceparent");
  about.tracestate = request.Header("tracestate");
  GenerationRecord local_record = GenerationRecord::Start(
      shared_->options.access_log, shared_->options.tracer, std::move(about));
  std::string stream_id;                     // the store's, once the request streams
  GenerationRecord* record = &local_record;  // the generation's once it has one
  // Now: the sequences may all have ended (and the record finished) before the head is sent.
  const std::string trace_response = local_record.TraceResponse();
  std::shared_ptr<ServableModel> model;  // once routed
  // Refused before any choice reached the engine, which counts its own: counted as the tensor
  // endpoints count theirs (InferenceFlow), under the version once it is known, under model=""
  // before (a Triton endpoint's model, named by the URL, as soon as the URL names one that
  // exists).
  auto count_failure = [&](StatusCode code) {
    if (model == nullptr && !model_name.empty()) {
      if (auto named = models_->Get(model_name, version); named.ok()) {
        record->SetModel((*named)->name(), (*named)->version());
        return (*named)->RecordFailure(code, received_at);
      }
    }
    if (model != nullptr) return model->RecordFailure(code, received_at);
    models_->RecordUnroutedFailure(code);
  };
  auto fail = [&](const Status& status, std::string_view param = {}, std::string_view code = {}) {
    count_failure(status.code());
    HttpResponse r = ErrorResponse(kind, status, param, code);
    r.headers.emplace_back("X-Request-Id", client_id);
    if (record->traced()) r.headers.emplace_back("traceresponse", record->TraceResponse());
    r.on_sent = record->Finish(r.status, status.message(), r.body.size());
    respond(std::move(r));
  };
  if (!decoded.ok()) return fail(decoded);

  std::string param;
  StatusOr<GenerationParams> parsed =
      kind == kChat ? ParseChatCompletionRequest(body, shared_->options.limits, &param)
      : kind == kCompletion
          ? ParseCompletionRequest(body, shared_->options.limits, &param)
          : ParseGenerateRequest(body, model_name,
                                 kind == kGenerateStream ? GenerateEndpoint::kGenerateStream
                                                         : GenerateEndpoint::kGenerate,
                                 shared_->options.limits, &param);
  if (!parsed.ok()) {
    // A body that names an existing model is that model's bad request, as a Triton endpoint's
    // URL makes it (probe 41: counted under model="" with no model in its line or span).
    if (!IsTriton(kind)) model_name = ModelNamedIn(body);
    return fail(parsed.status(), param);
  }
  GenerationParams params = std::move(parsed).value();
  if (!IsTriton(kind)) model_name = params.model;
  record->Decoded(Clock::now());
  const bool streaming = params.stream || kind == kGenerateStream;
  // X-Request-Timeout-Us (and X-Client-Id) as for any inference request (docs/api.md).
  InferenceRequest scheduling;
  scheduling.received_at = received_at;
  if (Status s = kserve::ApplySchedulingFields(request, &scheduling); !s.ok()) return fail(s);

  auto routed = models_->Route(model_name, version, request.headers);
  if (!routed.ok()) {
    const bool missing = routed.status().code() == StatusCode::kNotFound;
    // A version asked for (in the URL, or X-Harrier-Model-Version) that the model lacks: the
    // router says which version; otherwise the model is unknown, in OpenAI's words.
    const bool model_missing =
        missing && !version.has_value() && !models_->Get(model_name, std::nullopt).ok();
    return fail(model_missing ? UnknownModel(model_name) : routed.status(), "model",
                missing ? "model_not_found" : "");
  }
  model = std::move(routed).value();
  record->SetModel(model->name(), model->version());
  GenerativeModel* engine = model->generative();
  if (engine == nullptr) {
    return fail(InvalidArgument("model '" + model_name +
                                "' does not generate text: it takes tensors through "
                                "POST /v2/models/" +
                                model_name + "/infer"),
                "model");
  }
  if (const int most = engine->max_requests(); most > 0 && params.n > most) {
    // Refused for good, not a 429 to retry: the engine never holds that many at once.
    return fail(InvalidArgument("n is " + std::to_string(params.n) + ", but model '" + model_name +
                                "' holds at most " + std::to_string(most) +
                                " requests at once (its parallel_sequences and "
                                "max_waiting_requests), each choice being one"),
                "n");
  }
  ChatPrompt prompt;  // a completion's has no contents: its control texts are meant
  if (params.chat) {
    auto rendered = engine->ApplyChatTemplate(params.messages);
    if (!rendered.ok()) return fail(rendered.status(), "messages");
    prompt = std::move(rendered).value();
  } else {
    prompt.text = params.prompt;
  }

  if (streaming) {
    // A stream's id is the server's own (docs/generation.md), and what its access line names.
    stream_id = shared_->store->Open(request.auth_key_id);
    record->SetRequestId(stream_id,
                         client_id == request.Header("x-request-id") ? client_id : std::string());
  }
  Generation::Setup setup;
  setup.shared = shared_;
  setup.kind = kind;
  setup.model = model;
  setup.client_token = request.cancellation;
  setup.request_id = stream_id;
  const int n = std::max(1, params.n);
  setup.params = std::move(params);
  setup.params.n = n;
  auto g = std::make_shared<Generation>(std::move(setup), std::move(local_record));
  record = &g->record();
  g->client_request_id_ = client_id;
  const GenerationParams& p = g->params();

  std::shared_ptr<ResponseStream> out;
  if (streaming) {
    out = std::make_shared<ResponseStream>();
    HttpResponse head;
    head.headers.emplace_back("Content-Type", "text/event-stream");
    head.headers.emplace_back("Cache-Control", "no-cache");
    head.headers.emplace_back("X-Accel-Buffering", "no");  // proxies: do not hold the events
    head.headers.emplace_back("X-Request-Id", g->request_id());
    head.headers.emplace_back("X-Harrier-Model-Version", std::to_string(model->version()));
    if (!trace_response.empty()) head.headers.emplace_back("traceresponse", trace_response);
    head.stream = out;
    g->SetStream(out, std::move(head), respond);
  } else {
    g->SetResponder(respond);
  }
  g->WatchClient();

  if (streaming) {
    std::lock_guard lock(shared_->live_mu);
    shared_->live[g->request_id()] = g;
  }

  // The sequences, each with its own sink; all share the generation's token, and its version
  // counts them as one request (RequestTally). A stream's head, or the plain error when no
  // sequence is accepted, is the generation's to send.
  const auto tally = n > 1 ? std::make_shared<RequestTally>(n) : nullptr;
  for (int i = 0; i < n; ++i) {
    GenerationRequest r;
    FillGenerationRequest(p, i, &r);
    r.prompt = prompt.text;
    r.literal = prompt.contents;
    r.cancellation = g->engine_token();
    r.received_at = received_at;
    r.deadline = scheduling.deadline;
    r.client_id = scheduling.client_id;
    r.version_named = version.has_value();  // the URL's (X-Harrier-Model-Version: the router's)
    r.tally = tally;
    Status s = engine->Generate(std::move(r), std::make_shared<ChoiceSink>(g, i));
    if (s.ok()) continue;
    g->Refused(i, s);
    // The answer is this refusal whatever the others give, streamed or not: they stop now, and
    // the rest are not started.
    for (int j = i + 1; j < n; ++j) {
      g->Refused(j, Cancelled("another choice of this request was refused"));
    }
    g->engine_token()->Cancel();
    break;
  }
  g->Submitted();
}

void OpenAiHandler::Resume(HttpRequest request, HttpResponder respond, std::string_view stream_id) {
  // The store's ids are 128 random bits in 32 hex digits: anything else names no stream, and is
  // not echoed back (a client's text of any length in a header and a message).
  const bool well_formed =
      stream_id.size() == 32 && std::all_of(stream_id.begin(), stream_id.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
      });
  // The resume is a request of its own: its X-Request-Id and access line carry its own id (the
  // client's, or a new one), and the stream's is in its path. With the stream's, a resume's line
  // shared the id of the generation's (probe 42).
  const std::string request_id =
      ResolveRequestId(request.Header("x-request-id"), RequestIdGenerator::Process());
  auto error = [&](const Status& s) {
    AnswerRoute(shared_->options.access_log, request, request_id, ErrorResponse(kChat, s), respond);
  };
  if (!well_formed) {
    return error(
        NotFound("no such stream: a stream's id is the 32 hexadecimal digits of its "
                 "X-Request-Id"));
  }
  uint64_t last = 0;
  const auto ids = std::count_if(request.headers.begin(), request.headers.end(),
                                 [](const auto& h) { return h.first == "last-event-id"; });
  if (ids > 1) {  // which one the client meant is anyone's guess: not the server's to pick
    return error(
        InvalidArgument("Last-Event-ID is given " + std::to_string(ids) + " times; send it once"));
  }
  if (ids == 1) {
    auto parsed = ParseLastEventId(request.Header("last-event-id"));
    if (!parsed.ok()) return error(parsed.status());
    last = *parsed;
  }
  auto out = std::make_shared<ResponseStream>();
  HttpRequest line;
  line.method = request.method;
  line.target = request.target;
  line.auth_key_id = request.auth_key_id;
  auto resumer = std::make_shared<Resumer>(shared_, out, std::move(line), request_id);
  std::weak_ptr<Resumer> weak = resumer;
  TimerThread* timer = &shared_->timer;
  auto reader = shared_->store->Resume(stream_id, request.auth_key_id, last,
                                       [weak, timer] { Resumer::Wake(weak, timer); });
  if (!reader.ok()) {
    return error(
        reader.status().code() == StatusCode::kNotFound
            ? NotFound("no stream '" + std::string(stream_id) + "': unknown, expired or evicted")
            : reader.status());
  }
  if (request.method == "HEAD") {  // the head only: the stream exists; nothing is replayed
    HttpResponse head;
    head.headers.emplace_back("Content-Type", "text/event-stream");
    head.headers.emplace_back("Cache-Control", "no-cache");
    return AnswerRoute(shared_->options.access_log, request, request_id, std::move(head), respond);
  }
  resumer->SetReader(std::move(reader).value());
  {
    std::lock_guard lock(shared_->live_mu);
    if (auto it = shared_->live.find(std::string(stream_id)); it != shared_->live.end())
      if (auto g = it->second.lock()) g->MarkResumed();
  }
  if (request.cancellation) {
    request.cancellation->OnCancel([weak] {
      if (auto r = weak.lock()) r->ClientGone();
    });
  }
  HttpResponse head;
  head.headers.emplace_back("Content-Type", "text/event-stream");
  head.headers.emplace_back("Cache-Control", "no-cache");
  head.headers.emplace_back("X-Accel-Buffering", "no");
  head.headers.emplace_back("X-Request-Id", request_id);
  head.stream = out;
  respond(std::move(head));
  resumer->Pump();
}

}  // namespace harrier::openai
