// LlamaEngine: one GGUF model served by llama.cpp with continuous batching; the
// GenerativeModel (harrier/generation.h) of a model version whose platform is llama.cpp.
//
// The model file is memory-mapped; one llama.cpp context holds `parallel_sequences` sequences
// in one unified KV cache of `context_size` cells, shared by all of them. One engine thread per
// model runs the loop: each step is one llama_decode in which every generating sequence
// contributes its next token and sequences still reading their prompt contribute a chunk of it
// (a step's tokens are bounded by `batch_size`, so a long prompt is read over several steps
// while the others keep generating). Requests join between steps; one that finishes, is
// cancelled or passes its deadline leaves at once, and its slot takes the next waiting request:
// the one with the lowest GenerationRequest::priority value (taken as is: the caller resolves
// levels), the oldest among equals.
// Each sequence has its own sampler chain and its own KV cells: requests never see each other's
// tokens.
//
// Prompt-prefix reuse: a sequence's KV cells stay in its slot when its request leaves, as a
// cache. A new request whose prompt starts with at least kMinReusedPrefixTokens of a free
// slot's cached tokens takes that slot and decodes only the rest of its prompt
// (OnStart's `reused_prompt_tokens`). Cached cells are dropped, least recently used first, when
// live sequences need the room.
//
// What the sink hears (beyond generation.h): OnToken runs once per sampled token, the final
// one included (an end-of-generation token, the one completing a stop string, the max_tokens-th),
// so completion_tokens counts its calls; its text may be empty while output is held back (a
// possible start of a stop string, or a character split over tokens), and the final call
// carries what is left. Text still held back when a request is cancelled, passes its deadline
// or fails is dropped. logprob is the token's log-probability under the model's distribution
// (the log-softmax of its raw logits: before the penalties, temperature and the filters), 0
// unless the request asked for logprobs.
//
// Logprobs (GenerationRequest::logprobs): OnTokenLogprobs runs right before the OnToken of
// every sampled token but an end-of-generation one (it has no text, and OpenAI reports none).
// That includes the token that completes a stop string and those held back as its start: their
// bytes go past the released text, as OpenAI reports the tokens generated, not the text kept.
// The alternatives (top_logprobs of them) are the likeliest under the same distribution, ties
// by lower token id, so with greedy sampling and no penalties the sampled token is the first.
// Cost, only when asked: one pass over the vocabulary for the log-softmax per token, and for
// alternatives a partial sort of the token ids (O(n_vocab log k)) and k token pieces.
//
// When the shared cache is full and no cached cells are left to drop, the youngest live request
// ends (kError, kResourceExhausted) so that the others can go on: size context_size for
// parallel_sequences conversations at once.
//
// This header does not include llama.cpp's; everything that does lives next to this file.
//
// Thread safety: Generate, ApplyChatTemplate, CountTokens, context_size and the stats may be
// called from any thread, concurrently, sinks included. Shutdown (and the destructor) from any
// thread but the engine's own, i.e. not from a GenerationSink callback.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "harrier/clock.h"
#include "harrier/generation.h"
#include "harrier/status.h"

namespace harrier {

// GenerationStats and the figures only this engine has.
struct LlamaEngineStats {
  GenerationStats generation;
  uint64_t decode_steps_total = 0;  // llama_decode calls
};

class LlamaEngine : public GenerativeModel {
 public:
  // A free slot's cache is taken over by a new request when at least this many of its prompt's
  // first tokens are cached there: below that, decoding them again costs less than destroying
  // another conversation's cache (and every prompt shares its first token, BOS). A shorter
  // prefix, and one a busy slot holds, is shared into the slot the request takes instead
  // (ChooseSlot), where the model allows it.
  static constexpr int kMinReusedPrefixTokens = 16;
  // The most alternatives per token GenerationRequest::top_logprobs may ask for (OpenAI's chat
  // limit): each costs a token piece on the engine's thread, which every sequence shares.
  static constexpr int kMaxTopLogprobs = 20;
  // A prompt of at most this many bytes is tokenized on Generate's calling thread; a longer one
  // on the engine's tokenizer thread. llama.cpp's tokenizer is quadratic in the number of bytes
  // it spells out one by one (a run of newlines or emoji in Llama's vocabulary: 3.5 s for
  // 256 KiB, measured), and the caller is an I/O thread that other clients share.
  static constexpr size_t kInlineTokenizeBytes = 4096;

  struct Options {
    // The GGUF file. Required.
    std::string model_path;
    // KV cache cells, shared by all sequences: a sequence's prompt plus its output cannot pass
    // it, and the sum over live sequences cannot either. > 0. Default 4096. (llama.cpp
    // allocates a multiple of 256 cells; the engine uses exactly this many.)
    int context_size = 4096;
    // llama.cpp's compute threads (generation and prompt batches alike), 0..512; 0 = the usable
    // cores (affinity and cgroup quota), and more than those is used as those (a warning).
    // Default 0.
    int threads = 0;
    // Sequences decoded together (slots). 1..llama.cpp's maximum (256). Default 4.
    int parallel_sequences = 4;
    // The most tokens one step decodes (llama.cpp's n_batch), >= parallel_sequences. Default 512.
    int batch_size = 512;
    // The most tokens one graph computes (n_ubatch), 1..batch_size; a step with more is split.
    // Default 512.
    int ubatch_size = 512;
    // Requests that may wait for a slot: Generate refuses once parallel_sequences +
    // max_waiting_requests are in the engine. 0..1,048,576. Default 64.
    int max_waiting_requests = 64;
    // The clock deadlines are checked against. Must outlive the engine. Default: steady_clock.
    const Clock* clock = &SteadyClock();
    // The memory a KV cache may take: a context_size whose cache (f16 keys and values, as
    // llama.cpp allocates it) needs more is refused before llama.cpp tries, which would touch
    // what it could of it first. 0: the memory the process may use (core/cpu_quota.h:
    // physical, or less under a cgroup memory limit). For tests.
    int64_t memory_bytes = 0;
  };

  // Loads the model (memory-mapped), creates the context and starts the engine thread.
  // Errors: kInvalidArgument (an option out of range; a file llama.cpp cannot load as a model,
  // with its reason; an encoder-decoder model; a context_size whose KV cache would not fit in
  // memory_bytes), kNotFound (no such file), kResourceExhausted
  // (the context cannot be created, with llama.cpp's reason), kInternal (other failures).
  static StatusOr<std::unique_ptr<LlamaEngine>> Create(const Options& options);

  // Shutdown(), then frees the context and the model.
  ~LlamaEngine() override;
  LlamaEngine(const LlamaEngine&) = delete;
  LlamaEngine& operator=(const LlamaEngine&) = delete;

  // Queues the request, its prompt tokenized on the calling thread when it is at most
  // kInlineTokenizeBytes long, else on the engine's tokenizer thread (one per engine, in
  // arrival order). Errors, with nothing queued and the sink never called: kInvalidArgument
  // (max_tokens not -1 or >= 1, an empty stop string, a sampling parameter out of range,
  // top_logprobs outside 0..kMaxTopLogprobs, a prompt of more bytes than context_size tokens can
  // spell in this model's vocabulary, or a short prompt of no tokens or of more than
  // context_size), kDeadlineExceeded (the deadline has passed), kCancelled (the token is
  // cancelled), kResourceExhausted (parallel_sequences + max_waiting_requests requests are in
  // the engine, those being tokenized included), kUnavailable (shut down). A long prompt's own
  // refusal (no tokens, or more than context_size) comes later, as OnEnd(kError) with
  // kInvalidArgument before any OnAccepted; so do its cancellation (kCancelled) and deadline
  // (kDeadline) while it waits for the tokenizer. Every accepted request hears OnAccepted from
  // the engine thread before its OnStart.
  Status Generate(GenerationRequest request, std::shared_ptr<GenerationSink> sink) override;

  // The prompt for `messages` in the model's chat format, ending with the start of the
  // assistant's answer: the template in the GGUF metadata (tokenizer.chat_template) when
  // llama.cpp knows it (llama_chat_apply_template recognises a fixed list of templates by their
  // text; it runs no Jinja), ChatML otherwise ("<|im_start|>{role}\n{content}<|im_end|>\n" per
  // message, then "<|im_start|>assistant\n"); an unknown template is logged at load.
  // Errors: kInvalidArgument (no messages, or a message the template refuses).
  // The contents' ranges come with it when one holds the text of a control token (a CONTROL or
  // UNKNOWN token of the vocabulary), found by applying the template again with markers for the
  // contents (control_text.h). Errors: kInvalidArgument (no messages, a message the template
  // refuses, or such a content where the template changed it beyond trimming).
  StatusOr<ChatPrompt> ApplyChatTemplate(const std::vector<ChatMessage>& messages) override;
  // The same, without the assistant's start when `add_generation_prompt` is false.
  StatusOr<ChatPrompt> ApplyChatTemplate(const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt) const;

  // The tokens Generate would decode for this prompt (BOS included), a control token's text in
  // a `literal` range read as text.
  StatusOr<std::vector<int32_t>> Tokenize(std::string_view text,
                                          const std::vector<TextRange>& literal = {}) const;
  // The prompt's length in tokens, counted as Generate counts it (BOS included).
  StatusOr<int> CountTokens(std::string_view text) const;

  // The most tokens one sequence may hold, prompt and output together (context_size).
  int context_size() const override;
  // parallel_sequences + max_waiting_requests.
  int max_requests() const override;

  // Snapshots, consistent as of the last step: a request whose OnEnd has run is no longer
  // counted, nor its slot as active.
  GenerationStats Stats() const override;
  LlamaEngineStats DetailedStats() const;

  // Refuses new requests with `why` and ends the waiting ones (those queued for a slot or for
  // the tokenizer) with kError and `why`, OnStart never called; the active ones run on. Returns
  // at once: the engine thread ends them before its next step.
  void EndWaiting(const Status& why) override;

  // Refuses new requests, ends every active and waiting request with kError and `why` (OnEnd
  // runs for each; OnStart never for the waiting ones) and stops the engine thread; returns when
  // it has. Idempotent: the first reason holds.
  void Shutdown(const Status& why) override;

 private:
  struct Impl;
  explicit LlamaEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace harrier
