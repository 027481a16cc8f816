// Text generation: what the front ends (OpenAI API, Triton's generate extension, gRPC
// ModelStreamInfer) need from a model that generates tokens, whichever engine runs it. The
// engine (src/backends/llamacpp/) implements GenerativeModel; a model version that has one
// says so through ServableModel::generative().
//
// A generation reports through its GenerationSink, on the engine's thread: OnStart once, then
// OnToken per piece of text as it is produced (each preceded by OnTokenLogprobs when the request
// asked for logprobs), then OnEnd once (also for a request refused after it was accepted). Sinks
// must not block: they hand bytes to a ResponseStream or a queue.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harrier/cancellation.h"
#include "harrier/status.h"

namespace harrier {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (what the chat template knows)
  std::string content;
};

// A byte range [begin, end) of a text.
struct TextRange {
  size_t begin = 0;
  size_t end = 0;
  bool operator==(const TextRange&) const = default;
};

// A chat's messages through the model's chat template: the prompt, and where the messages'
// contents landed in it. Contents are text, as in OpenAI's API: the engine reads a control
// token's text in one (`</s>`, `<|im_end|>`) as text, so that a message cannot end its turn and
// write another role's (GenerationRequest::literal). An engine may leave `contents` empty where
// it needs none (llama.cpp's: when no content holds a control token's text).
struct ChatPrompt {
  std::string text;
  std::vector<TextRange> contents;
};

// Sampling, as llama.cpp's sampler chain applies it. temperature 0 is greedy: deterministic.
struct SamplingParams {
  float temperature = 1.0f;
  int top_k = 40;                  // 0: off
  float top_p = 1.0f;              // 1: off
  float min_p = 0.0f;              // 0: off
  float repeat_penalty = 1.0f;     // 1: off
  int repeat_last_n = 64;          // tokens the penalties look back over
  float frequency_penalty = 0.0f;  // OpenAI's: minus this times the token's count so far
  float presence_penalty = 0.0f;   // OpenAI's: minus this once the token has appeared
  std::optional<uint32_t> seed;    // none: a random seed per request
};

enum class FinishReason {
  kStop,       // end of sequence or a stop string
  kLength,     // max_tokens, or the context is full
  kCancelled,  // the client went away (its token was cancelled)
  kDeadline,   // the request's deadline passed
  kError,      // the engine failed; OnEnd's status says why
};

// "stop", "length", "cancelled", "deadline", "error" (OpenAI's words for the first two).
std::string_view FinishReasonName(FinishReason reason);

// What a generation that ended for `reason` reports as its outcome, whichever front end ran it
// and whoever reads it (the client's error, the access line, the model's statistics): Ok for
// kStop and kLength; kCancelled "the generation was cancelled"; kDeadlineExceeded "the request's
// deadline passed"; for kError the engine's `status`, or kInternal "the generation failed" when
// the engine gave none.
Status FinishStatus(FinishReason reason, const Status& status);

struct GenerationUsage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int reused_prompt_tokens = 0;  // of prompt_tokens: taken from a cached prefix, not decoded
};

// What the choices of one request share (OpenAI's `n`: one Generate call each), so that the
// version serving them counts the request once, as its access line and trace do: its time to
// first token at the first token of any choice, its queueing until the first choice got a
// sequence, its outcome and duration when the last choice ends (the first failure, if one
// failed). The caller makes one for a request of several choices and puts it in each choice's
// GenerationRequest; after a refused Generate it submits no more choices, and the refusal ends
// the ones never submitted with it. Thread-safe.
class RequestTally {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  explicit RequestTally(int choices) : choices_(choices) {}

  // A choice is submitted: true for the request's first.
  bool Submitted() {
    std::lock_guard lock(mu_);
    return submitted_++ == 0;
  }
  // Choices never submitted (a refusal ends them).
  int unsubmitted() const {
    std::lock_guard lock(mu_);
    return choices_ - submitted_;
  }
  // A choice's first token: true for the request's first.
  bool FirstToken() {
    std::lock_guard lock(mu_);
    return !std::exchange(first_token_, true);
  }
  // A choice got its sequence at `at`: the request's queueing ends at the first.
  void Started(time_point at) {
    std::lock_guard lock(mu_);
    if (started_ == time_point{}) started_ = at;
  }
  // `count` choices end with `code` (kOk, or why they failed). True when they were the last:
  // then *code is the request's outcome (the first failure, if any) and *started its first
  // choice's start (zero if none started).
  bool End(int count, StatusCode* code, time_point* started) {
    std::lock_guard lock(mu_);
    if (failure_ == StatusCode::kOk) failure_ = *code;
    ended_ += count;
    if (ended_ < choices_) return false;
    *code = failure_;
    *started = started_;
    return true;
  }

 private:
  mutable std::mutex mu_;
  const int choices_;
  int submitted_ = 0;
  int ended_ = 0;
  bool first_token_ = false;
  time_point started_{};
  StatusCode failure_ = StatusCode::kOk;
};

struct GenerationRequest {
  std::string prompt;   // the text to continue (a chat request's messages already templated)
  // Ranges of `prompt` that are text whatever they spell: a chat's ChatPrompt::contents. A
  // control token's text in them is not that token. A prompt sent whole (completions, Triton's
  // generate) has none: the client wrote its control tokens as text on purpose.
  std::vector<TextRange> literal;
  int max_tokens = -1;  // -1: until a stop or the context's end
  std::vector<std::string> stop;  // not included in the output
  SamplingParams sampling;
  // Log-probabilities: OnToken's logprob, and OnTokenLogprobs with the token's bytes and its
  // `top_logprobs` likeliest alternatives (>= 0; engines may bound it, OpenAI's APIs ask for at
  // most 20). Neither is computed unless asked.
  bool logprobs = false;
  int top_logprobs = 0;
  std::shared_ptr<CancellationToken> cancellation;  // may be null
  // When the server received the request (steady clock), for time-to-first-token; zero: when
  // Generate() is called.
  std::chrono::steady_clock::time_point received_at{};
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // The priority level, 1 the most urgent (Triton's convention); 0 or a level past the model's
  // priority_levels: the model's default level. Requests waiting for a sequence are admitted
  // most urgent first, in arrival order within a level.
  uint64_t priority = 0;
  // Who sent it (X-Client-Id, gRPC's x-client-id metadata), for admission's per-client rate
  // limits; empty: anonymous.
  std::string client_id;
  // The client named the version (in the URL, or with X-Harrier-Model-Version): the request was
  // not sent by a traffic split, and does not feed a rollout's guard (docs/routing.md).
  bool version_named = false;
  // Shared by the choices of one request (see RequestTally); null: a request of one choice.
  std::shared_ptr<RequestTally> tally;
};

// One sampled token's log-probabilities, for GenerationSink::OnTokenLogprobs. Bytes are the
// token's piece exactly as the vocabulary holds it: possibly part of a UTF-8 character, or not
// UTF-8 at all; whoever writes them as text replaces what is ill-formed.
struct TokenLogprobs {
  struct Alternative {
    std::string bytes;
    float logprob = 0;  // <= 0; may be -infinity
  };
  std::string bytes;  // the sampled token's piece (empty for a special token with no text)
  float logprob = 0;  // the same value as the OnToken that follows
  // The likeliest tokens at this position, likeliest first, GenerationRequest::top_logprobs of
  // them (fewer only if the vocabulary is smaller); the sampled token is among them only if it
  // is that likely.
  std::vector<Alternative> top;
};

class GenerationSink {
 public:
  virtual ~GenerationSink() = default;
  // The prompt is tokenized, fits the context, and the request waits for a sequence: what
  // Generate accepted can no longer be refused for its prompt. Once, before OnStart; never for a
  // request that ends first (its OnEnd then says why: a prompt an engine tokenizes off the
  // caller's thread may turn out too long). The default ignores it.
  virtual void OnAccepted() {}
  // The sequence is admitted to a slot (reused: prompt tokens taken from the cache).
  virtual void OnStart(int prompt_tokens, int reused_prompt_tokens) = 0;
  // The next piece of generated text: whole UTF-8 code points, never part of a stop string.
  // `logprob` is the sampled token's log-probability when the request asked for logprobs.
  virtual void OnToken(std::string_view text, float logprob) = 0;
  // Only when the request asked for logprobs: the sampled token's bytes, log-probability and
  // alternatives, called right before the OnToken of the same token (whose text may be held
  // back and released by a later OnToken; OnToken is unchanged by this). The engine documents
  // which sampled tokens it reports (e.g. not an end-of-sequence token). The default ignores
  // them, so a sink that does not answer logprobs needs nothing; a sink that wraps another must
  // forward them. `token` is only valid during the call.
  virtual void OnTokenLogprobs(const TokenLogprobs& token) { (void)token; }
  // The end: why, the token counts, and for kError the engine's status.
  virtual void OnEnd(FinishReason reason, const GenerationUsage& usage, const Status& status) = 0;
};

// Live figures of one engine (gauges and counters for metrics and the status page).
struct GenerationStats {
  int active_sequences = 0;
  int waiting_requests = 0;
  int64_t kv_cells_used = 0;
  // Of kv_cells_used: held by free sequences as a prompt-prefix cache for the next requests
  // (what "used" keeps when nothing generates); 0 for an engine that caches nothing.
  int64_t kv_cells_cached = 0;
  int64_t kv_cells_total = 0;
  // The compute threads the engine gives its next step: fewer than configured while the
  // machine's cores are contended; 0 for an engine that has none of its own.
  int compute_threads = 0;
  uint64_t prompt_tokens_total = 0;
  uint64_t generated_tokens_total = 0;
  uint64_t reused_prompt_tokens_total = 0;
};

class GenerativeModel {
 public:
  virtual ~GenerativeModel() = default;
  // The prompt for `messages` through the model's chat template (from its metadata, or the
  // engine's documented default). kInvalidArgument for a role the template refuses.
  virtual StatusOr<ChatPrompt> ApplyChatTemplate(const std::vector<ChatMessage>& messages) = 0;
  // Queues a generation. Errors found at once (a prompt longer than the context, a full queue,
  // shutting down) are returned here and the sink hears nothing; once queued, the sink hears
  // OnAccepted, OnStart ... OnEnd, or only OnEnd when the request ends before it is accepted
  // (an engine may check a long prompt off the calling thread, and refuse it then).
  virtual Status Generate(GenerationRequest request, std::shared_ptr<GenerationSink> sink) = 0;
  virtual int context_size() const = 0;
  // The most requests the engine holds at once, running and waiting (Generate refuses more for
  // now); 0 when it sets no bound. A request of more sequences than this can never run whole.
  virtual int max_requests() const { return 0; }
  virtual GenerationStats Stats() const = 0;
  // Refuses new generations with `why` and ends the waiting ones, which never started, with
  // kError and `why`; the active ones run on until they end (or Shutdown). For an unload, which
  // would otherwise hold a waiting request until a running one ends, then fail it anyway.
  // Idempotent: the first reason holds. The default, for an engine that queues nothing, does
  // nothing.
  virtual void EndWaiting(const Status& /*why*/) {}
  // Refuses new generations and ends the active and waiting ones with kError and `why`: the
  // server's reason, never the client's (kUnavailable: an unload, a version a reload replaced, the
  // server stopping), so that a client can tell it from its own cancellation and knows to retry
  // elsewhere. Joins the engine's thread. Idempotent: the first reason holds.
  virtual void Shutdown(const Status& why) = 0;
};

}  // namespace harrier
