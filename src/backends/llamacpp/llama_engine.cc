#include "backends/llamacpp/llama_engine.h"

#include <ggml-cpu.h>
#include <llama.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <future>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>
#include <ranges>
#include <stdexcept>
#include <thread>
#include <utility>

#include "backends/llamacpp/control_text.h"
#include "backends/llamacpp/llama_runtime.h"
#include "backends/llamacpp/llama_sampling.h"
#include "backends/llamacpp/slot_choice.h"
#include "backends/llamacpp/stop_matcher.h"
#include "backends/llamacpp/thread_governor.h"
#include "core/compute_cores.h"
#include "core/cpu_quota.h"
#include "core/thread_spawner.h"
#include "harrier/wake_batch.h"

namespace harrier {
namespace {

// llama_chat_apply_template's name for the template used when the GGUF has none it knows.
constexpr const char* kDefaultChatTemplate = "chatml";

struct ModelDeleter {
  void operator()(llama_model* model) const { llama_model_free(model); }
};
struct ContextDeleter {
  void operator()(llama_context* context) const { llama_free(context); }
};
struct ThreadpoolDeleter {
  void operator()(ggml_threadpool* pool) const { ggml_threadpool_free(pool); }
};
using ModelPtr = std::unique_ptr<llama_model, ModelDeleter>;
using ContextPtr = std::unique_ptr<llama_context, ContextDeleter>;
using ThreadpoolPtr = std::unique_ptr<ggml_threadpool, ThreadpoolDeleter>;

// A request Generate accepted, its prompt tokenized.
struct Job {
  GenerationRequest request;
  std::shared_ptr<GenerationSink> sink;
  std::vector<llama_token> prompt;
};

// A request holding a slot.
struct Sequence {
  Sequence(Job job_in, SamplerChain sampler_in)
      : job(std::move(job_in)), sampler(std::move(sampler_in)), stop(job.request.stop) {}

  Job job;
  SamplerChain sampler;
  StopMatcher stop;
  uint64_t admitted = 0;      // admission order: the largest is the youngest
  int reused_tokens = 0;      // prompt tokens found in the slot's cache
  size_t prompt_decoded = 0;  // prompt tokens whose KV cells the slot holds
  int generated = 0;          // tokens sampled
  // Sampled and sent, to be decoded in the next step (LLAMA_TOKEN_NULL while reading the prompt).
  llama_token next_token = LLAMA_TOKEN_NULL;

  // This step's share of the batch.
  int chunk_tokens = 0;       // prompt tokens
  bool decodes_next = false;  // next_token
  int32_t output_index = -1;  // the batch row it samples from; -1: none this step
};

// One of the context's sequences (seq_id = its index).
struct Slot {
  llama_seq_id seq_id = 0;
  // The tokens whose KV cells this sequence holds, at positions 0..size-1. Kept when a request
  // leaves, for prefix reuse.
  std::vector<llama_token> cached;
  std::unique_ptr<Sequence> sequence;  // null: free
  uint64_t last_used = 0;              // when a request last left it
};

bool IsCancelled(const GenerationRequest& request) {
  return request.cancellation != nullptr && request.cancellation->cancelled();
}

// The log-softmax of one row of logits: logprob(token) = logits[token] - log_normaliser.
// Summed in double: a vocabulary of 100k+ floats loses precision in float.
float LogNormaliser(const float* logits, int n_vocab) {
  const float max_logit = *std::max_element(logits, logits + n_vocab);
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max_logit));
  return max_logit + static_cast<float>(std::log(sum));
}

// The `k` likeliest tokens, likeliest first; among equal logits the lower id first, as greedy
// sampling picks. A partial sort of the ids: O(n_vocab log k), no copy of the logits.
std::vector<llama_token> TopTokens(const float* logits, int n_vocab, int k) {
  std::vector<llama_token> top(static_cast<size_t>(std::min(k, n_vocab)));
  std::ranges::partial_sort_copy(std::views::iota(llama_token{0}, llama_token{n_vocab}), top,
                                 [logits](llama_token a, llama_token b) {
                                   return logits[a] > logits[b] ||
                                          (logits[a] == logits[b] && a < b);
                                 });
  return top;
}

void AddToBatch(llama_batch& batch, llama_token token, llama_pos pos, llama_seq_id seq_id,
                bool output) {
  const int i = batch.n_tokens++;
  batch.token[i] = token;
  batch.pos[i] = pos;
  batch.n_seq_id[i] = 1;
  batch.seq_id[i][0] = seq_id;
  batch.logits[i] = output ? 1 : 0;
}

constexpr int kMaxWaitingRequests = 1 << 20;

Status ValidateOptions(const LlamaEngine::Options& o) {
  if (o.model_path.empty()) return InvalidArgument("model_path is empty");
  if (o.context_size <= 0) return InvalidArgument("context_size must be > 0");
  // ggml's own bound (its thread pool asserts on more, which would end the process).
  if (o.threads < 0 || o.threads > GGML_MAX_N_THREADS) {
    return InvalidArgument("threads must be in 0.." + std::to_string(GGML_MAX_N_THREADS) +
                           " (0 = the usable cores)");
  }
  const auto max_sequences = static_cast<int>(llama_max_parallel_sequences());
  if (o.parallel_sequences < 1 || o.parallel_sequences > max_sequences) {
    return InvalidArgument("parallel_sequences must be in 1.." + std::to_string(max_sequences));
  }
  if (o.batch_size < o.parallel_sequences) {
    return InvalidArgument(
        "batch_size must be >= parallel_sequences (each generating sequence "
        "puts a token in every step)");
  }
  if (o.ubatch_size < 1 || o.ubatch_size > o.batch_size) {
    return InvalidArgument("ubatch_size (" + std::to_string(o.ubatch_size) +
                           ") must be in 1..batch_size (" + std::to_string(o.batch_size) + ")");
  }
  // Bounded so that parallel_sequences + max_waiting_requests stays an int: near INT_MAX the
  // sum overflowed and every request on an idle model was refused (probe 74).
  if (o.max_waiting_requests < 0 || o.max_waiting_requests > kMaxWaitingRequests) {
    return InvalidArgument("max_waiting_requests must be in 0.." +
                           std::to_string(kMaxWaitingRequests));
  }
  if (o.clock == nullptr) return InvalidArgument("clock is null");
  return Status::Ok();
}

}  // namespace

struct LlamaEngine::Impl {
  ~Impl() {
    if (batch.token != nullptr) llama_batch_free(batch);
  }

  StatusOr<std::vector<llama_token>> Tokenize(std::string_view text,
                                              const std::vector<TextRange>& literal) const;
  // kInvalidArgument for a prompt of more bytes than n_ctx_seq tokens can spell (checked before
  // tokenizing: llama.cpp's tokenizer can take seconds over a long one), or, once tokenized, of
  // no tokens or more than n_ctx_seq.
  Status CheckPromptBytes(size_t bytes) const;
  Status CheckPromptTokens(size_t tokens) const;
  // The tokenizer thread: long prompts (over kInlineTokenizeBytes), in arrival order, then into
  // the inbox; ends what it was given once stopping.
  void TokenizerLoop();
  // Throws std::invalid_argument for a prompt llama.cpp cannot tokenize.
  std::vector<llama_token> TokenizeOrThrow(std::string_view text,
                                           const std::vector<TextRange>& literal) const;
  // Appends one llama_tokenize call's tokens; throws as TokenizeOrThrow.
  void AppendTokens(std::string_view text, bool add_special, bool parse_special,
                    std::vector<llama_token>* out) const;
  std::string Piece(llama_token token) const;
  StatusOr<ChatPrompt> FormatChat(const std::vector<ChatMessage>& messages,
                                  bool add_generation_prompt) const;
  StatusOr<std::string> RenderChat(const std::vector<llama_chat_message>& chat, size_t text_bytes,
                                   bool add_generation_prompt) const;

  // The engine thread.
  void Run(std::promise<Status>* ready);
  void Loop();
  void EndExpired();
  void Admit();
  void Step();
  void Sample(Slot& slot, int32_t output_index);
  void OnDecodeFailure(int32_t code);
  // Ends the request in `slot` (its OnEnd runs last). Its KV cells stay as the slot's cache,
  // unless it ended with an error: then they are dropped, as they may be half written.
  void End(Slot& slot, FinishReason reason, const Status& status);
  void EndQueued(Job& job, FinishReason reason, const Status& status);
  // Ends the youngest live request: with kError and `status`, or, when `length_if_generated`
  // and it has generated a token, with kLength (its output so far is its answer).
  void EndYoungest(const Status& status, bool length_if_generated = false);
  void FailActive(const Status& status);
  // Cells neither held by a slot nor taken by this step's batch so far.
  int FreeCells() const;
  // Drops free slots' caches, least recently used first, until `cells` are free (or none is
  // left to drop); returns the free cells.
  int MakeRoom(int cells);
  // Cells a new request could have for its prompt, besides the `reused` ones its slot keeps: all
  // but those live requests hold or will need for the rest of their prompts and their next
  // tokens (free slots' caches can be dropped).
  int CellsForNewRequest(size_t reused) const;
  void PublishStats(int ended_requests);

  // Constant after construction.
  Options options;
  ModelPtr model;  // declared before the context, so destroyed after it
  ContextPtr context;
  const llama_vocab* vocab = nullptr;
  llama_memory_t memory = nullptr;
  int threads = 1;
  int n_ctx = 0;      // cells in the unified KV cache
  int n_ctx_seq = 0;  // the most one sequence may hold
  int n_batch = 0;
  int n_vocab = 0;
  // Whether one slot's cells can be shared into another (ChooseSlot's `share`): not where the
  // memory is recurrent state. (A sliding-window model's cache is full-size, swa_full, so it
  // forgets no position a reused or shared prefix needs.)
  bool share_prefixes = false;
  std::string chat_template;  // the GGUF's, or empty for kDefaultChatTemplate
  ControlTexts controls;      // the vocabulary's CONTROL and UNKNOWN tokens' texts
  // The most bytes of text one token stands for (its piece, special tokens spelled out), for
  // the vocabularies whose pieces spell their input byte for byte (SentencePiece, byte-level
  // BPE); 0, no bound, for those that normalise it (WordPiece drops whitespace).
  size_t max_piece_bytes = 0;

  // The engine thread's own.
  std::vector<Slot> slots;
  llama_batch batch{};
  std::deque<Job> queue;  // taken from the inbox, waiting for a slot (by priority, then age)
  int active = 0;         // slots holding a request
  uint64_t admissions = 0;
  uint64_t slot_clock = 0;
  LlamaEngineStats totals;  // the running totals (prompt, reused, generated tokens, steps)
  ThreadpoolPtr threadpool;
  // How many of the pool's `threads` a step gets: fewer while the machine's cores are
  // contended (thread_governor.h). `applied_threads` is what llama.cpp was last told.
  ThreadGovernor governor{1, std::chrono::steady_clock::now()};
  int applied_threads = 0;

  mutable std::mutex mu;
  std::condition_variable wake;
  std::deque<Job> inbox;        // guarded by mu: accepted by Generate, not yet seen by the engine
  std::deque<Job> to_tokenize;  // guarded by mu: long prompts for the tokenizer thread
  std::condition_variable tokenizer_wake;
  bool stopping = false;       // guarded by mu
  Status stopped_because;      // guarded by mu: Shutdown's reason, once stopping
  Status waiting_end;          // guarded by mu: EndWaiting's reason, once called (ok before)
  int in_engine = 0;           // guarded by mu: accepted requests whose OnEnd has not run
  LlamaEngineStats published;  // guarded by mu

  std::mutex shutdown_mu;  // serialises Shutdown's join
  std::thread thread;      // guarded by shutdown_mu after Create
  std::thread tokenizer;   // guarded by shutdown_mu after Create
};

StatusOr<std::vector<llama_token>> LlamaEngine::Impl::Tokenize(
    std::string_view text, const std::vector<TextRange>& literal) const {
  try {
    return TokenizeOrThrow(text, literal);
  } catch (const std::invalid_argument& e) {
    return InvalidArgument(e.what());
  } catch (const std::exception& e) {
    return Internal(std::string("llama.cpp cannot tokenize the prompt: ") + e.what());
  }
}

std::vector<llama_token> LlamaEngine::Impl::TokenizeOrThrow(
    std::string_view text, const std::vector<TextRange>& literal) const {
  if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2)) {
    throw std::invalid_argument("the prompt is too long to tokenize");
  }
  std::vector<llama_token> tokens;
  const std::vector<TokenizePiece> plan = PlanTokenization(text, literal, controls);
  if (plan.size() == 1 && plan[0].parse_special) {
    // add_special: BOS where the model wants one; parse_special: a templated prompt writes
    // special tokens as text.
    AppendTokens(text, /*add_special=*/true, /*parse_special=*/true, &tokens);
  } else {
    // A content's control text read as text (control_text.h): the pieces one by one, with the
    // BOS and EOS that one call would add around them all.
    if (llama_vocab_get_add_bos(vocab)) tokens.push_back(llama_vocab_bos(vocab));
    for (const TokenizePiece& piece : plan) {
      AppendTokens(text.substr(piece.range.begin, piece.range.end - piece.range.begin),
                   /*add_special=*/false, piece.parse_special, &tokens);
    }
    if (llama_vocab_get_add_eos(vocab)) tokens.push_back(llama_vocab_eos(vocab));
  }
  // A chat template that writes BOS itself, after llama.cpp added one.
  const llama_token bos = llama_vocab_bos(vocab);
  if (tokens.size() >= 2 && bos != LLAMA_TOKEN_NULL && tokens[0] == bos && tokens[1] == bos) {
    tokens.erase(tokens.begin());
  }
  return tokens;
}

void LlamaEngine::Impl::AppendTokens(std::string_view text, bool add_special, bool parse_special,
                                     std::vector<llama_token>* out) const {
  const size_t at = out->size();
  const auto length = static_cast<int32_t>(text.size());  // TokenizeOrThrow bounds it
  out->resize(at + text.size() + 2);
  int32_t n = llama_tokenize(vocab, text.data(), length, out->data() + at,
                             static_cast<int32_t>(out->size() - at), add_special, parse_special);
  if (n < 0 && n != std::numeric_limits<int32_t>::min()) {
    out->resize(at + static_cast<size_t>(-n));
    n = llama_tokenize(vocab, text.data(), length, out->data() + at, -n, add_special,
                       parse_special);
  }
  if (n < 0) throw std::invalid_argument("the prompt cannot be tokenized");
  out->resize(at + static_cast<size_t>(n));
}

Status LlamaEngine::Impl::CheckPromptBytes(size_t bytes) const {
  if (max_piece_bytes == 0 || bytes <= static_cast<size_t>(n_ctx_seq) * max_piece_bytes) {
    return Status::Ok();
  }
  return InvalidArgument("the prompt is " + std::to_string(bytes) +
                         " bytes: more than the model's context of " + std::to_string(n_ctx_seq) +
                         " tokens can hold (no token of this model stands for more than " +
                         std::to_string(max_piece_bytes) + " bytes)");
}

Status LlamaEngine::Impl::CheckPromptTokens(size_t tokens) const {
  if (tokens == 0) {
    return InvalidArgument("the prompt is empty, and the model adds no BOS token to start from");
  }
  if (tokens > static_cast<size_t>(n_ctx_seq)) {
    return InvalidArgument("the prompt is " + std::to_string(tokens) +
                           " tokens, more than the model's context of " +
                           std::to_string(n_ctx_seq));
  }
  return Status::Ok();
}

void LlamaEngine::Impl::TokenizerLoop() {
  pthread_setname_np(pthread_self(), "llama-tokenize");
  std::unique_lock lock(mu);
  while (true) {
    tokenizer_wake.wait(lock, [&] { return stopping || !to_tokenize.empty(); });
    if (stopping) break;
    Job job = std::move(to_tokenize.front());
    to_tokenize.pop_front();
    const Status ending = waiting_end;
    lock.unlock();
    // Checked again here: the request may have waited behind another long prompt.
    FinishReason reason = FinishReason::kError;
    Status refused;
    if (!ending.ok()) {
      refused = ending;
    } else if (IsCancelled(job.request)) {
      reason = FinishReason::kCancelled;
      refused = Cancelled("the request was cancelled before its prompt was read");
    } else if (options.clock->Now() >= job.request.deadline) {
      reason = FinishReason::kDeadline;
      refused = DeadlineExceeded("the request's deadline passed before its prompt was read");
    } else if (StatusOr<std::vector<llama_token>> tokens =
                   Tokenize(job.request.prompt, job.request.literal);
               !tokens.ok()) {
      refused = tokens.status();
    } else if (Status fits = CheckPromptTokens(tokens->size()); !fits.ok()) {
      refused = fits;
    } else {
      job.prompt = std::move(tokens).value();
    }
    if (!refused.ok()) {
      EndQueued(job, reason, refused);
      lock.lock();
      continue;
    }
    lock.lock();
    if (stopping) {  // the engine thread may have ended what it had: end this one here
      const Status why = stopped_because;
      lock.unlock();
      EndQueued(job, FinishReason::kError, why);
      lock.lock();
      break;
    }
    inbox.push_back(std::move(job));
    wake.notify_one();
  }
  std::deque<Job> left = std::exchange(to_tokenize, {});
  const Status why = stopped_because;
  lock.unlock();
  for (Job& job : left) EndQueued(job, FinishReason::kError, why);
}

std::string LlamaEngine::Impl::Piece(llama_token token) const {
  std::string piece(32, '\0');
  int32_t n = llama_token_to_piece(vocab, token, piece.data(), static_cast<int32_t>(piece.size()),
                                   /*lstrip=*/0, /*special=*/false);
  if (n < 0) {
    piece.resize(static_cast<size_t>(-n));
    n = llama_token_to_piece(vocab, token, piece.data(), static_cast<int32_t>(piece.size()), 0,
                             false);
  }
  piece.resize(static_cast<size_t>(std::max(n, 0)));
  return piece;
}

void LlamaEngine::Impl::Run(std::promise<Status>* ready) {
  // Named before the pool exists: ggml's workers inherit the name, so per-thread CPU
  // (/proc/PID/task/*/comm, top -H, perf) tells the engine's threads from the server's.
  pthread_setname_np(pthread_self(), "llama-engine");
  // The pool is created here, on a thread SpawnThread started at the normal priority, because
  // its threads inherit the creator's (a load runs on a nice +10 lifecycle thread). Polling
  // off: its threads sleep between graphs instead of spinning on cores other models share.
  ggml_threadpool_params params = ggml_threadpool_params_default(threads);
  params.poll = 0;
  threadpool.reset(ggml_threadpool_new(&params));
  if (threadpool == nullptr) {
    ready->set_value(
        Internal("ggml cannot create a thread pool of " + std::to_string(threads) + " threads"));
    return;
  }
  llama_attach_threadpool(context.get(), threadpool.get(), threadpool.get());
  ready->set_value(Status::Ok());  // `ready` is gone after this
  Loop();
  llama_detach_threadpool(context.get());
  threadpool.reset();
}

void LlamaEngine::Impl::Loop() {
  std::vector<std::shared_ptr<GenerationSink>> accepted;
  Status end_waiting;  // EndWaiting's reason, as of this step
  while (true) {
    {
      std::unique_lock lock(mu);
      // Cancellation and deadlines need no wake-up: the loop only sleeps with no request at all.
      wake.wait(lock, [&] { return stopping || !inbox.empty() || !queue.empty() || active > 0; });
      for (Job& job : inbox) {
        accepted.push_back(job.sink);
        // Most urgent first (the lowest level), in arrival order within a level.
        auto at = std::upper_bound(
            queue.begin(), queue.end(), job.request.priority,
            [](uint64_t level, const Job& queued) { return level < queued.request.priority; });
        queue.insert(at, std::move(job));
      }
      inbox.clear();
      if (stopping) break;
      end_waiting = waiting_end;
    }
    // Here, on this thread, so that each OnAccepted comes before its OnStart (Admit, below).
    for (const auto& sink : accepted) sink->OnAccepted();
    accepted.clear();
    if (!end_waiting.ok()) {
      WakeBatch wakes;
      for (Job& job : queue) EndQueued(job, FinishReason::kError, end_waiting);
      queue.clear();
    }
    // llama.cpp's C API lets C++ exceptions out of llama_decode (and the sampler, the
    // tokenizer); they end what was running, not the process.
    try {
      {
        WakeBatch wakes;  // the streams of the requests that end or start here, woken together
        EndExpired();
        Admit();
      }
      Step();
    } catch (const std::exception& e) {
      FailActive(Internal(std::string("llama.cpp failed: ") + e.what()));
    }
  }
  Status shutting_down;
  {
    std::lock_guard lock(mu);
    shutting_down = stopped_because;
  }
  for (Slot& slot : slots) {
    if (slot.sequence != nullptr) End(slot, FinishReason::kError, shutting_down);
  }
  while (!queue.empty()) {
    EndQueued(queue.front(), FinishReason::kError, shutting_down);
    queue.pop_front();
  }
}

void LlamaEngine::Impl::EndExpired() {
  const Clock::time_point now = options.clock->Now();
  for (Slot& slot : slots) {
    if (slot.sequence == nullptr) continue;
    const GenerationRequest& request = slot.sequence->job.request;
    if (IsCancelled(request)) {
      End(slot, FinishReason::kCancelled, Cancelled("the request was cancelled"));
    } else if (now >= request.deadline) {
      End(slot, FinishReason::kDeadline, DeadlineExceeded("the request's deadline passed"));
    }
  }
  for (auto it = queue.begin(); it != queue.end();) {
    if (IsCancelled(it->request)) {
      EndQueued(*it, FinishReason::kCancelled, Cancelled("the request was cancelled"));
    } else if (now >= it->request.deadline) {
      EndQueued(*it, FinishReason::kDeadline,
                DeadlineExceeded("the request's deadline passed before it got a sequence"));
    } else {
      ++it;
      continue;
    }
    it = queue.erase(it);
  }
}

int LlamaEngine::Impl::CellsForNewRequest(size_t reused) const {
  int needed_by_live = 0;
  for (const Slot& slot : slots) {
    if (slot.sequence == nullptr) continue;
    const Sequence& s = *slot.sequence;
    needed_by_live +=
        static_cast<int>(slot.cached.size() + (s.job.prompt.size() - s.prompt_decoded) +
                         (s.next_token != LLAMA_TOKEN_NULL ? 1 : 0));
  }
  return n_ctx - needed_by_live - static_cast<int>(reused);
}

void LlamaEngine::Impl::Admit() {
  while (!queue.empty()) {
    Job& job = queue.front();
    std::vector<SlotState> states;
    states.reserve(slots.size());
    for (const Slot& slot : slots) {
      states.push_back({slot.sequence == nullptr, slot.cached, slot.last_used});
    }
    const SlotChoice choice =
        ChooseSlot(states, job.prompt, static_cast<size_t>(kMinReusedPrefixTokens), share_prefixes);
    if (choice.slot < 0) return;  // every slot is taken
    Slot& slot = slots[choice.slot];
    size_t reused = choice.reused_tokens;
    // Waits (first come, first served) until live requests leave room for its whole prompt, so
    // that prompts being read cannot fill the cache between them. With none live it always fits:
    // Generate refused prompts longer than a sequence may be.
    const auto to_decode = static_cast<int>(job.prompt.size() - reused);
    if (active > 0 && to_decode > CellsForNewRequest(reused)) return;
    if (choice.share_from >= 0) {
      // The other slot's first cells become this one's too (in the unified cache a cell holds
      // a set of sequences): nothing is copied, and the other slot keeps them.
      const Slot& from = slots[choice.share_from];
      llama_memory_seq_rm(memory, slot.seq_id, -1, -1);
      llama_memory_seq_cp(memory, from.seq_id, slot.seq_id, 0, static_cast<llama_pos>(reused));
      slot.cached.assign(from.cached.begin(), from.cached.begin() + static_cast<ptrdiff_t>(reused));
    } else if (reused < slot.cached.size()) {
      // Partial removal fails where the memory cannot forget a suffix (recurrent state).
      if (!llama_memory_seq_rm(memory, slot.seq_id, static_cast<llama_pos>(reused), -1)) {
        llama_memory_seq_rm(memory, slot.seq_id, -1, -1);
        reused = 0;
      }
      slot.cached.resize(reused);
    }
    SamplerChain sampler = MakeSamplerChain(job.request.sampling, n_vocab, n_ctx_seq);
    auto sequence = std::make_unique<Sequence>(std::move(job), std::move(sampler));
    // The repetition penalty looks at the prompt too.
    for (llama_token token : sequence->job.prompt) {
      llama_sampler_accept(sequence->sampler.get(), token);
    }
    sequence->admitted = ++admissions;
    sequence->reused_tokens = static_cast<int>(reused);
    sequence->prompt_decoded = reused;
    totals.generation.prompt_tokens_total += sequence->job.prompt.size();
    totals.generation.reused_prompt_tokens_total += reused;
    queue.pop_front();
    slot.sequence = std::move(sequence);
    ++active;
    PublishStats(0);
    slot.sequence->job.sink->OnStart(static_cast<int>(slot.sequence->job.prompt.size()),
                                     static_cast<int>(reused));
  }
}

int LlamaEngine::Impl::FreeCells() const {
  int used = batch.n_tokens;
  for (const Slot& slot : slots) used += static_cast<int>(slot.cached.size());
  return n_ctx - used;
}

int LlamaEngine::Impl::MakeRoom(int cells) {
  while (FreeCells() < cells) {
    Slot* victim = nullptr;
    for (Slot& slot : slots) {
      if (slot.sequence != nullptr || slot.cached.empty()) continue;
      if (victim == nullptr || slot.last_used < victim->last_used) victim = &slot;
    }
    if (victim == nullptr) break;
    llama_memory_seq_rm(memory, victim->seq_id, -1, -1);
    victim->cached.clear();
  }
  return FreeCells();
}

void LlamaEngine::Impl::Step() {
  batch.n_tokens = 0;
  // Every generating sequence's next token, first: a step never leaves one out.
  auto generating = [&] {
    return static_cast<int>(std::count_if(slots.begin(), slots.end(), [](const Slot& slot) {
      return slot.sequence != nullptr && slot.sequence->next_token != LLAMA_TOKEN_NULL;
    }));
  };
  while (generating() > 0 && MakeRoom(generating()) < generating()) {
    // The shared context ran out: the youngest request ends as at its own context's end, with
    // what it generated (one that has generated nothing yet is refused, to be sent again).
    EndYoungest(ResourceExhausted("the KV cache is full: the model's context_size is shared by "
                                  "its parallel sequences, and they outgrew it"),
                /*length_if_generated=*/true);
  }
  for (Slot& slot : slots) {
    if (slot.sequence == nullptr || slot.sequence->next_token == LLAMA_TOKEN_NULL) continue;
    Sequence& s = *slot.sequence;
    AddToBatch(batch, s.next_token, static_cast<llama_pos>(slot.cached.size()), slot.seq_id, true);
    s.decodes_next = true;
    s.output_index = batch.n_tokens - 1;
  }
  // Then prompt chunks, oldest request first, as far as the batch and the cache allow.
  std::vector<Slot*> reading;
  int wanted = 0;
  for (Slot& slot : slots) {
    if (slot.sequence == nullptr || slot.sequence->next_token != LLAMA_TOKEN_NULL) continue;
    reading.push_back(&slot);
    wanted += static_cast<int>(slot.sequence->job.prompt.size() - slot.sequence->prompt_decoded);
  }
  std::sort(reading.begin(), reading.end(), [](const Slot* a, const Slot* b) {
    return a->sequence->admitted < b->sequence->admitted;
  });
  int budget = std::min(n_batch - batch.n_tokens, wanted);
  if (budget > 0) budget = std::min(budget, MakeRoom(budget));
  for (Slot* slot : reading) {
    if (budget <= 0) break;
    Sequence& s = *slot->sequence;
    const size_t left = s.job.prompt.size() - s.prompt_decoded;
    const auto take = std::min(static_cast<size_t>(budget), left);
    for (size_t i = s.prompt_decoded; i < s.prompt_decoded + take; ++i) {
      AddToBatch(batch, s.job.prompt[i], static_cast<llama_pos>(i), slot->seq_id,
                 i + 1 == s.job.prompt.size());
    }
    s.chunk_tokens = static_cast<int>(take);
    if (take == left) s.output_index = batch.n_tokens - 1;
    budget -= static_cast<int>(take);
  }
  if (batch.n_tokens == 0) {
    // Requests reading their prompts with no room left for any of it: the youngest gives way.
    if (active > 0) EndYoungest(ResourceExhausted("the KV cache is full"));
    return;
  }

  int32_t code = 0;
  {
    const int step_threads = governor.StepThreads(std::chrono::steady_clock::now());
    if (step_threads != applied_threads) {
      llama_set_n_threads(context.get(), step_threads, step_threads);
      applied_threads = step_threads;
    }
    // The process's cores, taken for the step: another model's pool that would not fit beside
    // this one waits instead of preempting it at every barrier (core/compute_cores.h).
    const ComputeCores::Lease cores = ComputeCores::Process().Take(step_threads);
    const auto wall_start = std::chrono::steady_clock::now();
    const ThreadGovernor::Duration cpu_start = ThreadGovernor::ThreadCpuTime();
    code = llama_decode(context.get(), batch);
    const ThreadGovernor::Duration cpu = ThreadGovernor::ThreadCpuTime() - cpu_start;
    const auto wall_end = std::chrono::steady_clock::now();
    // Not the engine's first step (its warm-up's): it faults the mapped weights in from disk,
    // time off the core that says nothing of the machine's other work (probe 37).
    if (totals.decode_steps_total > 0) governor.Record(wall_end - wall_start, cpu, wall_end);
  }
  ++totals.decode_steps_total;
  if (code != 0) {
    OnDecodeFailure(code);
    return;
  }
  for (Slot& slot : slots) {
    if (slot.sequence == nullptr) continue;
    Sequence& s = *slot.sequence;
    const auto chunk_begin = s.job.prompt.begin() + static_cast<std::ptrdiff_t>(s.prompt_decoded);
    slot.cached.insert(slot.cached.end(), chunk_begin, chunk_begin + s.chunk_tokens);
    s.prompt_decoded += static_cast<size_t>(s.chunk_tokens);
    s.chunk_tokens = 0;
    if (s.decodes_next) {
      slot.cached.push_back(s.next_token);
      s.next_token = LLAMA_TOKEN_NULL;
      s.decodes_next = false;
    }
  }
  // Every sequence's token of this step reaches its sink before any transport is woken: each
  // I/O thread then wakes once per step for all of its streams (harrier/wake_batch.h).
  WakeBatch wakes;
  for (Slot& slot : slots) {
    if (slot.sequence == nullptr || slot.sequence->output_index < 0) continue;
    Sample(slot, std::exchange(slot.sequence->output_index, -1));
  }
  PublishStats(0);
}

void LlamaEngine::Impl::Sample(Slot& slot, int32_t output_index) {
  Sequence& s = *slot.sequence;
  const GenerationRequest& request = s.job.request;
  const llama_token token = llama_sampler_sample(s.sampler.get(), context.get(), output_index);
  // The raw logits: the sampler chain works on a copy, so these are before the penalties,
  // temperature and the filters.
  const float* logits =
      request.logprobs ? llama_get_logits_ith(context.get(), output_index) : nullptr;
  const float log_normaliser = logits != nullptr ? LogNormaliser(logits, n_vocab) : 0.0f;
  const float logprob = logits != nullptr ? logits[token] - log_normaliser : 0.0f;
  ++s.generated;
  ++totals.generation.generated_tokens_total;
  std::string text;
  std::optional<FinishReason> finish;
  const bool end_of_generation = llama_vocab_is_eog(vocab, token);
  if (end_of_generation) {
    text = s.stop.Flush();
    finish = FinishReason::kStop;
  } else {
    std::string piece = Piece(token);
    if (logits != nullptr) {
      TokenLogprobs report;
      report.bytes = piece;
      report.logprob = logprob;
      for (llama_token alternative : TopTokens(logits, n_vocab, request.top_logprobs)) {
        report.top.push_back({Piece(alternative), logits[alternative] - log_normaliser});
      }
      s.job.sink->OnTokenLogprobs(report);
    }
    text = s.stop.Append(piece);
    const int max_tokens = request.max_tokens;
    // The token would be decoded at position cached.size().
    const bool full = static_cast<int>(slot.cached.size()) >= n_ctx_seq;
    if (s.stop.stopped()) {
      finish = FinishReason::kStop;
    } else if ((max_tokens > 0 && s.generated >= max_tokens) || full) {
      text += s.stop.Flush();
      // The flush may complete a stop string (one ending with U+FFFD): the text stops there.
      finish = s.stop.stopped() ? FinishReason::kStop : FinishReason::kLength;
    }
  }
  s.job.sink->OnToken(text, logprob);
  if (finish.has_value()) {
    End(slot, *finish, Status::Ok());
  } else {
    s.next_token = token;
  }
}

void LlamaEngine::Impl::OnDecodeFailure(int32_t code) {
  if (code == 1) {
    // No KV slot for the batch; llama.cpp restored the cache as it was.
    for (Slot& slot : slots) {
      if (slot.sequence == nullptr) continue;
      slot.sequence->chunk_tokens = 0;
      slot.sequence->decodes_next = false;
      slot.sequence->output_index = -1;
    }
    EndYoungest(ResourceExhausted("the KV cache is full"));
    return;
  }
  // Fatal: what llama.cpp decoded before failing stays in the cache, so every request in the
  // batch ends and its cells go.
  const Status failure = Internal("llama_decode failed (code " + std::to_string(code) + ")");
  spdlog::error("llama.cpp engine for {}: {}", options.model_path, failure.message());
  for (Slot& slot : slots) {
    if (slot.sequence == nullptr) continue;
    if (slot.sequence->chunk_tokens > 0 || slot.sequence->decodes_next) {
      End(slot, FinishReason::kError, failure);
    }
  }
}

void LlamaEngine::Impl::End(Slot& slot, FinishReason reason, const Status& status) {
  std::unique_ptr<Sequence> s = std::move(slot.sequence);
  --active;
  slot.last_used = ++slot_clock;
  if (reason == FinishReason::kError) {
    llama_memory_seq_rm(memory, slot.seq_id, -1, -1);
    slot.cached.clear();
  }
  const GenerationUsage usage{.prompt_tokens = static_cast<int>(s->job.prompt.size()),
                              .completion_tokens = s->generated,
                              .reused_prompt_tokens = s->reused_tokens};
  PublishStats(1);
  s->job.sink->OnEnd(reason, usage, status);
}

void LlamaEngine::Impl::EndQueued(Job& job, FinishReason reason, const Status& status) {
  {
    std::lock_guard lock(mu);
    --in_engine;
  }
  job.sink->OnEnd(reason, GenerationUsage{.prompt_tokens = static_cast<int>(job.prompt.size())},
                  status);
}

void LlamaEngine::Impl::EndYoungest(const Status& status, bool length_if_generated) {
  Slot* youngest = nullptr;
  for (Slot& slot : slots) {
    if (slot.sequence == nullptr) continue;
    if (youngest == nullptr || slot.sequence->admitted > youngest->sequence->admitted) {
      youngest = &slot;
    }
  }
  if (youngest == nullptr) return;
  if (length_if_generated && youngest->sequence->generated > 0) {
    End(*youngest, FinishReason::kLength, Status::Ok());
  } else {
    End(*youngest, FinishReason::kError, status);
  }
}

void LlamaEngine::Impl::FailActive(const Status& status) {
  spdlog::error("llama.cpp engine for {}: {}", options.model_path, status.message());
  batch.n_tokens = 0;
  for (Slot& slot : slots) {
    if (slot.sequence != nullptr) End(slot, FinishReason::kError, status);
  }
}

void LlamaEngine::Impl::PublishStats(int ended_requests) {
  LlamaEngineStats s = totals;
  s.generation.active_sequences = active;
  s.generation.kv_cells_total = n_ctx;
  s.generation.compute_threads = governor.threads();
  for (const Slot& slot : slots) {
    s.generation.kv_cells_used += static_cast<int64_t>(slot.cached.size());
    if (slot.sequence == nullptr)
      s.generation.kv_cells_cached += static_cast<int64_t>(slot.cached.size());
  }
  std::lock_guard lock(mu);
  in_engine -= ended_requests;
  published = s;
}

StatusOr<std::unique_ptr<LlamaEngine>> LlamaEngine::Create(const Options& options) {
  RETURN_IF_ERROR(ValidateOptions(options));
  std::error_code error;
  const auto file_status = std::filesystem::status(options.model_path, error);
  if (!std::filesystem::exists(file_status)) {
    return NotFound("no model file at '" + options.model_path + "'");
  }
  if (std::filesystem::is_directory(file_status)) {
    return InvalidArgument("'" + options.model_path + "' is a directory, not a GGUF file");
  }
  InitLlamaRuntime();

  auto impl = std::make_unique<Impl>();
  impl->options = options;
  // More threads than cores only wait on each other at every step's barriers: a value copied
  // from a larger machine (16 on a 2-core pod) made generation 100x slower, 512 unusable
  // (probe 74). The usable cores are the most a step could run on anyway.
  const int usable = UsableCores();
  if (options.threads > usable) {
    spdlog::warn("llama.cpp model '{}': threads {} is more than the {} usable core(s); using {}",
                 options.model_path, options.threads, usable, usable);
  }
  impl->threads = options.threads > 0 ? std::min(options.threads, usable) : usable;
  impl->governor = ThreadGovernor(impl->threads, std::chrono::steady_clock::now());
  impl->applied_threads = impl->threads;

  llama_model_params model_params = llama_model_default_params();
  model_params.n_gpu_layers = 0;
  model_params.load_mode = LLAMA_LOAD_MODE_MMAP;
  TakeLastLlamaError();
  impl->model.reset(llama_model_load_from_file(options.model_path.c_str(), model_params));
  if (impl->model == nullptr) {
    const std::string why = TakeLastLlamaError();
    return InvalidArgument("llama.cpp cannot load '" + options.model_path + "' as a model" +
                           (why.empty() ? "" : ": " + why));
  }
  if (llama_model_has_encoder(impl->model.get()) || !llama_model_has_decoder(impl->model.get())) {
    return InvalidArgument("'" + options.model_path +
                           "' is not a decoder-only model (encoder-decoder models are not "
                           "supported)");
  }

  // The KV cache's size, checked before llama.cpp allocates and clears it: a config (or a load
  // request's config override) may ask for 2^31 cells, and llama.cpp fails only after touching
  // what it could (8 GiB for the 1-layer test model, under a 12 GB address-space limit).
  {
    const llama_model* model = impl->model.get();
    const int64_t heads = std::max(1, llama_model_n_head(model));
    const int64_t cell_bytes = int64_t{llama_model_n_layer(model)} * 2 /* K and V */ *
                               (llama_model_n_embd(model) / heads) * llama_model_n_head_kv(model) *
                               2 /* f16 */;
    int64_t memory = options.memory_bytes;
    if (memory <= 0) {
      const uint64_t usable = UsableMemoryBytes();
      memory = usable > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                   ? 0
                   : static_cast<int64_t>(usable);
    }
    if (memory > 0 && cell_bytes > 0 && options.context_size > memory / cell_bytes) {
      return InvalidArgument(
          "context_size " + std::to_string(options.context_size) + " needs a KV cache of " +
          std::to_string(options.context_size * cell_bytes) + " bytes, more than the " +
          std::to_string(memory) + " bytes of memory there are");
    }
  }

  llama_context_params context_params = llama_context_default_params();
  context_params.n_ctx = static_cast<uint32_t>(options.context_size);
  context_params.n_batch = static_cast<uint32_t>(options.batch_size);
  context_params.n_ubatch = static_cast<uint32_t>(options.ubatch_size);
  context_params.n_seq_max = static_cast<uint32_t>(options.parallel_sequences);
  // At most one output row per sequence and step: the output buffer is sized for that, not for
  // a whole batch of logits (n_vocab floats each).
  context_params.n_outputs_max = static_cast<uint32_t>(options.parallel_sequences);
  context_params.n_threads = impl->threads;
  context_params.n_threads_batch = impl->threads;
  context_params.kv_unified = true;
  // llama.cpp's default, stated because prefix reuse and sharing rely on it: a sliding-window
  // model keeps every position's cells (a smaller cache drops those that slid out of the window,
  // which a later request reusing that prefix would need).
  context_params.swa_full = true;
  context_params.no_perf = true;
  impl->context.reset(llama_init_from_model(impl->model.get(), context_params));
  if (impl->context == nullptr) {
    const std::string why = TakeLastLlamaError();
    return ResourceExhausted("llama.cpp cannot create a context of " +
                             std::to_string(options.context_size) + " cells for '" +
                             options.model_path + "'" + (why.empty() ? "" : ": " + why));
  }
  impl->vocab = llama_model_get_vocab(impl->model.get());
  impl->memory = llama_get_memory(impl->context.get());
  // llama.cpp rounds the cache up to a multiple of 256 cells; the engine uses what was asked.
  impl->n_ctx = std::min(options.context_size, static_cast<int>(llama_n_ctx(impl->context.get())));
  impl->n_ctx_seq = std::min(impl->n_ctx, static_cast<int>(llama_n_ctx_seq(impl->context.get())));
  impl->n_batch = static_cast<int>(llama_n_batch(impl->context.get()));
  impl->n_vocab = llama_vocab_n_tokens(impl->vocab);
  if (const enum llama_vocab_type type = llama_vocab_type(impl->vocab);
      type == LLAMA_VOCAB_TYPE_SPM || type == LLAMA_VOCAB_TYPE_BPE) {
    std::string piece(256, '\0');
    for (llama_token t = 0; t < impl->n_vocab; ++t) {
      int32_t n = llama_token_to_piece(impl->vocab, t, piece.data(),
                                       static_cast<int32_t>(piece.size()), 0, /*special=*/true);
      if (n < 0) n = -n;  // longer than the buffer: its length, negated
      impl->max_piece_bytes = std::max(impl->max_piece_bytes, static_cast<size_t>(n));
    }
  }
  std::vector<std::string> control_texts;  // what only a parse of special tokens reads as such
  for (llama_token t = 0; t < impl->n_vocab; ++t) {
    if ((llama_vocab_get_attr(impl->vocab, t) &
         (LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_UNKNOWN)) != 0) {
      if (const char* text = llama_vocab_get_text(impl->vocab, t); text != nullptr) {
        control_texts.emplace_back(text);
      }
    }
  }
  impl->controls = ControlTexts(control_texts);
  impl->share_prefixes =
      !llama_model_is_recurrent(impl->model.get()) && !llama_model_is_hybrid(impl->model.get());

  if (const char* tmpl = llama_model_chat_template(impl->model.get(), nullptr); tmpl != nullptr) {
    const llama_chat_message probe{"user", "hi"};
    if (llama_chat_apply_template(tmpl, &probe, 1, true, nullptr, 0) >= 0) {
      impl->chat_template = tmpl;
    } else {
      spdlog::warn("{}: llama.cpp does not know the model's chat template; using ChatML",
                   options.model_path);
    }
  }

  impl->batch = llama_batch_init(impl->n_batch, 0, 1);
  impl->slots.resize(static_cast<size_t>(options.parallel_sequences));
  for (size_t i = 0; i < impl->slots.size(); ++i) {
    impl->slots[i].seq_id = static_cast<llama_seq_id>(i);
  }
  impl->PublishStats(0);

  std::promise<Status> ready;
  std::future<Status> started = ready.get_future();
  Impl* raw = impl.get();
  StatusOr<std::thread> engine_thread = SpawnThread([raw, &ready] { raw->Run(&ready); });
  if (!engine_thread.ok()) return engine_thread.status().WithContext("the engine's thread");
  impl->thread = std::move(engine_thread).value();
  const Status status = started.get();
  if (!status.ok()) {
    impl->thread.join();
    return status;
  }
  StatusOr<std::thread> tokenizer = SpawnThread([raw] { raw->TokenizerLoop(); });
  if (!tokenizer.ok()) {
    LlamaEngine running(std::move(impl));  // its destructor stops the engine's thread
    return tokenizer.status().WithContext("the tokenizer's thread");
  }
  impl->tokenizer = std::move(tokenizer).value();
  spdlog::debug("llama.cpp engine for {}: {} cells, {} sequences, batch {}, {} threads",
                options.model_path, impl->n_ctx, options.parallel_sequences, impl->n_batch,
                impl->threads);
  return std::unique_ptr<LlamaEngine>(new LlamaEngine(std::move(impl)));
}

LlamaEngine::LlamaEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

LlamaEngine::~LlamaEngine() {
  Shutdown(Unavailable("the model's engine is shutting down"));
}

Status LlamaEngine::Generate(GenerationRequest request, std::shared_ptr<GenerationSink> sink) {
  if (sink == nullptr) return InvalidArgument("no sink for the request's output");
  if (request.max_tokens != -1 && request.max_tokens < 1) {
    return InvalidArgument("max_tokens must be -1 (no limit) or at least 1, not " +
                           std::to_string(request.max_tokens));
  }
  for (const std::string& stop : request.stop) {
    if (stop.empty()) return InvalidArgument("a stop string is empty");
  }
  if (request.top_logprobs < 0 || request.top_logprobs > kMaxTopLogprobs) {
    return InvalidArgument("top_logprobs must be in 0.." + std::to_string(kMaxTopLogprobs) +
                           ", not " + std::to_string(request.top_logprobs));
  }
  RETURN_IF_ERROR(ValidateSamplingParams(request.sampling));
  if (IsCancelled(request)) return Cancelled("the request was cancelled before it was queued");
  if (impl_->options.clock->Now() >= request.deadline) {
    return DeadlineExceeded("the request's deadline passed before it was queued");
  }
  RETURN_IF_ERROR(impl_->CheckPromptBytes(request.prompt.size()));
  const bool tokenize_here = request.prompt.size() <= kInlineTokenizeBytes;
  std::vector<llama_token> prompt;
  if (tokenize_here) {
    ASSIGN_OR_RETURN(prompt, impl_->Tokenize(request.prompt, request.literal));
    RETURN_IF_ERROR(impl_->CheckPromptTokens(prompt.size()));
  }
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopping) return Unavailable("the model's engine is shutting down");
    if (!impl_->waiting_end.ok()) return impl_->waiting_end;
    if (impl_->in_engine >=
        impl_->options.parallel_sequences + impl_->options.max_waiting_requests) {
      return ResourceExhausted(
          "the model has " + std::to_string(impl_->in_engine) +
          " requests in progress or waiting, which is its limit (parallel_sequences " +
          std::to_string(impl_->options.parallel_sequences) + " + max_waiting_requests " +
          std::to_string(impl_->options.max_waiting_requests) + ")");
    }
    (tokenize_here ? impl_->inbox : impl_->to_tokenize)
        .push_back(Job{std::move(request), std::move(sink), std::move(prompt)});
    ++impl_->in_engine;
  }
  (tokenize_here ? impl_->wake : impl_->tokenizer_wake).notify_one();
  return Status::Ok();
}

StatusOr<ChatPrompt> LlamaEngine::ApplyChatTemplate(const std::vector<ChatMessage>& messages) {
  return ApplyChatTemplate(messages, /*add_generation_prompt=*/true);
}

StatusOr<ChatPrompt> LlamaEngine::ApplyChatTemplate(const std::vector<ChatMessage>& messages,
                                                    bool add_generation_prompt) const {
  if (messages.empty()) return InvalidArgument("a chat needs at least one message");
  try {
    return impl_->FormatChat(messages, add_generation_prompt);
  } catch (const std::exception& e) {
    return Internal(std::string("llama.cpp cannot apply the chat template: ") + e.what());
  }
}

StatusOr<ChatPrompt> LlamaEngine::Impl::FormatChat(const std::vector<ChatMessage>& messages,
                                                   bool add_generation_prompt) const {
  std::vector<llama_chat_message> chat;
  chat.reserve(messages.size());
  size_t text_bytes = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    // llama_chat_apply_template takes C strings: the text after a NUL would be dropped unseen.
    if (m.content.find('\0') != std::string::npos || m.role.find('\0') != std::string::npos) {
      return InvalidArgument("message " + std::to_string(i) +
                             " holds a NUL character (\\u0000), which llama.cpp's chat "
                             "templates read as the end of its text");
    }
    chat.push_back({m.role.c_str(), m.content.c_str()});
    text_bytes += m.role.size() + m.content.size();
  }
  // Contents too long for the context are not scanned: Generate refuses their prompt unread.
  const bool control_text =
      CheckPromptBytes(text_bytes).ok() && std::ranges::any_of(messages, [&](const ChatMessage& m) {
        return controls.Find(m.content).has_value();
      });
  ChatPrompt prompt;
  ASSIGN_OR_RETURN(prompt.text, RenderChat(chat, text_bytes, add_generation_prompt));
  if (!control_text) return prompt;  // nothing to read as text: no ranges needed

  // Where each content landed: the template again, a marker in each content's place.
  std::vector<std::string> markers;
  std::vector<std::string_view> contents;
  markers.reserve(messages.size());
  contents.reserve(messages.size());
  size_t marked_bytes = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    markers.push_back(ContentMarker(i));
    chat[i].content = markers.back().c_str();
    contents.push_back(messages[i].content);
    marked_bytes += messages[i].role.size() + markers.back().size();
  }
  ASSIGN_OR_RETURN(const std::string marked, RenderChat(chat, marked_bytes, add_generation_prompt));
  ASSIGN_OR_RETURN(prompt.contents, LocateContents(prompt.text, marked, contents));
  return prompt;
}

StatusOr<std::string> LlamaEngine::Impl::RenderChat(const std::vector<llama_chat_message>& chat,
                                                    size_t text_bytes,
                                                    bool add_generation_prompt) const {
  const char* tmpl = chat_template.empty() ? kDefaultChatTemplate : chat_template.c_str();
  std::string prompt(2 * text_bytes + 256, '\0');
  if (prompt.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return InvalidArgument("the chat is too long");
  }
  int32_t n = llama_chat_apply_template(tmpl, chat.data(), chat.size(), add_generation_prompt,
                                        prompt.data(), static_cast<int32_t>(prompt.size()));
  if (n > static_cast<int32_t>(prompt.size())) {
    prompt.resize(static_cast<size_t>(n));
    n = llama_chat_apply_template(tmpl, chat.data(), chat.size(), add_generation_prompt,
                                  prompt.data(), n);
  }
  if (n < 0) return InvalidArgument("the model's chat template cannot format these messages");
  prompt.resize(static_cast<size_t>(n));
  return prompt;
}

StatusOr<std::vector<int32_t>> LlamaEngine::Tokenize(std::string_view text,
                                                     const std::vector<TextRange>& literal) const {
  return impl_->Tokenize(text, literal);
}

StatusOr<int> LlamaEngine::CountTokens(std::string_view text) const {
  ASSIGN_OR_RETURN(std::vector<llama_token> tokens, impl_->Tokenize(text, {}));
  return static_cast<int>(tokens.size());
}

int LlamaEngine::max_requests() const {
  return impl_->options.parallel_sequences + impl_->options.max_waiting_requests;
}

int LlamaEngine::context_size() const {
  return impl_->n_ctx_seq;
}

GenerationStats LlamaEngine::Stats() const {
  return DetailedStats().generation;
}

LlamaEngineStats LlamaEngine::DetailedStats() const {
  std::lock_guard lock(impl_->mu);
  LlamaEngineStats stats = impl_->published;
  stats.generation.waiting_requests = impl_->in_engine - stats.generation.active_sequences;
  return stats;
}

void LlamaEngine::EndWaiting(const Status& why) {
  {
    std::lock_guard lock(impl_->mu);
    if (!impl_->waiting_end.ok()) return;
    impl_->waiting_end = why.ok() ? Unavailable("the model's engine is shutting down") : why;
  }
  impl_->wake.notify_all();
}

void LlamaEngine::Shutdown(const Status& why) {
  std::lock_guard join_lock(impl_->shutdown_mu);
  {
    std::lock_guard lock(impl_->mu);
    if (!impl_->stopping) {
      impl_->stopping = true;
      impl_->stopped_because = why.ok() ? Unavailable("the model's engine is shutting down") : why;
    }
  }
  impl_->wake.notify_all();
  impl_->tokenizer_wake.notify_all();
  if (impl_->tokenizer.joinable()) impl_->tokenizer.join();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace harrier
