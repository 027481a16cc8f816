// Generation: one request's sequences on a GenerativeModel, their answer and, when streamed,
// their stream (docs/openai.md, docs/generation.md): one JSON body once every sequence ended,
// or a head once a sequence is accepted and an SSE event per piece of text, each numbered and
// kept in the StreamStore for a resume; heartbeats on idle streams; the client's leaving (after
// the grace) and a reader too slow (past the buffer bound) stop the sequences. Reports through
// its GenerationRecord (access line, spans). ChoiceSink hands one sequence's engine reports to
// it.
//
// Thread safety: engine callbacks (one engine thread per model), the transport's cancellation
// and timer callbacks meet under the generation's lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "harrier/cancellation.h"
#include "harrier/generation.h"
#include "harrier/http_message.h"
#include "harrier/model_manager.h"
#include "harrier/response_stream.h"
#include "protocol/openai/generation_params.h"
#include "protocol/openai/generation_record.h"
#include "protocol/openai/handler_shared.h"
#include "protocol/openai/openai_response.h"

namespace harrier::openai {

// One request's sequences, their answer and their stream. Engine callbacks (one engine thread
// per model), the transport's cancellation and timer callbacks meet here under `mu`.
class Generation : public std::enable_shared_from_this<Generation> {
 public:
  using Clock = std::chrono::steady_clock;

  struct Setup {
    SharedPtr shared;
    int kind = kChat;
    GenerationParams params;
    std::shared_ptr<ServableModel> model;  // pins the version until the last sequence ends
    std::string request_id;                // the stream's id when streaming
    std::shared_ptr<CancellationToken> client_token;  // the transport's; may be null
  };

  Generation(Setup setup, GenerationRecord record);

  bool streaming() const { return s_.params.stream || s_.kind == kGenerateStream; }
  const GenerationParams& params() const { return s_.params; }
  const std::string& request_id() const { return s_.request_id; }
  const std::shared_ptr<CancellationToken>& engine_token() const { return engine_token_; }

  // Non-streaming: the answer goes to `respond` once every sequence has ended.
  void SetResponder(HttpResponder respond) { respond_ = std::move(respond); }
  // Streaming: events go to `out` (and the store), behind `head`, which goes to `respond` when
  // the first sequence is accepted (its prompt fits). When none is, `respond` gets a plain error
  // instead. Starts the heartbeat.
  void SetStream(std::shared_ptr<ResponseStream> out, HttpResponse head, HttpResponder respond);
  // Watches the client: when it goes, the sequences stop (after the grace).
  void WatchClient();
  // A reader resumed the stream: the grace no longer ends the sequences.
  void MarkResumed();

  // The engine refused sequence `index` at once (Generate's status): it ends as an error.
  void Refused(int index, const Status& status);

  // When every sequence was refused at once, the handler answers with a plain error (not a
  // stream) and reports it through the record; only then, once they all ended.
  GenerationRecord& record() { return record_; }

  // The engine accepted sequence `index`: a stream's head goes out with the first, once every
  // sequence was handed to the engine and none was refused.
  void OnAccepted(int index);

  // Every sequence was handed to the engine (or refused). Until then a stream's head waits, so
  // that a request one of whose choices is refused at once gets a plain error (a 429 with
  // Retry-After, as without streaming), not a stream that starts and then fails; and the
  // answer waits, so that it is decided with every choice known.
  void Submitted();

  void OnStart(int index);

  // Before the OnToken of the same token. Kept until that token's text is sent: held-back text
  // comes later, and a chunk carries the logprobs of the tokens whose text it releases.
  void OnTokenLogprobs(int index, const TokenLogprobs& token);

  void OnToken(int index, std::string_view text);

  void OnEnd(int index, harrier::FinishReason reason, const GenerationUsage& usage,
             const Status& status);

  void OnClientGone();

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
  void EmitContentLocked(int index, std::string_view text);

  std::string VersionString() const;

  // One event: numbered and kept by the store (for resumption), then sent unless the client is
  // gone. A client that holds back too much is told so and the sequences stop.
  void EmitLocked(std::string data);

  // Sends a stream's head when it is due: streaming, not sent yet, every sequence handed to the
  // engine, one accepted and none refused. Returns the lock, held again.
  std::unique_lock<std::mutex> SendHeadLocked(std::unique_lock<std::mutex> lock);

  // Why a choice the engine refused was refused (the others it stopped were cancelled for
  // it); Ok when none was.
  Status RefusalLocked() const;

  void FinishLocked(std::unique_lock<std::mutex> lock);

  // The generation is over: no resume will find it, the client is no longer watched, and the
  // version may retire.
  void Forget();

  void ScheduleHeartbeat(Clock::time_point at);

  void Heartbeat();

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

}  // namespace harrier::openai
