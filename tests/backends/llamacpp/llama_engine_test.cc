#include "backends/llamacpp/llama_engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu_quota.h"
#include "util/fake_clock.h"

namespace harrier {
namespace {

using ::testing::HasSubstr;

// 1 layer, embedding size 8, the real Llama-2 tokenizer, random weights: gibberish, but
// deterministic gibberish (../shared/models/README.md).
const char* const kTinyModel = HARRIER_SOURCE_DIR "/../shared/models/llama-2-tiny-random.gguf";

// Everything a request's sink received.
struct Output {
  bool accepted = false;
  std::thread::id accepted_on;  // the thread that called OnAccepted
  bool started = false;
  int prompt_tokens = -1;
  int reused_prompt_tokens = -1;
  std::vector<std::string> texts;  // released with each token (one entry per OnToken)
  std::vector<float> logprobs;
  // OnTokenLogprobs' reports, and for each how many OnTokens had run before it.
  std::vector<TokenLogprobs> reports;
  std::vector<size_t> reported_after;
  std::string text;
  bool ended = false;
  FinishReason reason = FinishReason::kError;
  GenerationUsage usage;
  Status status;
};

// Records what the engine sends; `on_token` / `on_end` run on the engine thread, after the
// record is updated, with the number of tokens so far.
class RecordingSink : public GenerationSink {
 public:
  std::function<void(int tokens)> on_token;
  std::function<void()> on_start;

  void OnAccepted() override {
    std::lock_guard lock(mu_);
    EXPECT_FALSE(out_.accepted) << "OnAccepted twice";
    EXPECT_FALSE(out_.started) << "OnAccepted after OnStart";
    EXPECT_FALSE(out_.ended) << "OnAccepted after OnEnd";
    out_.accepted = true;
    out_.accepted_on = std::this_thread::get_id();
  }

  void OnStart(int prompt_tokens, int reused_prompt_tokens) override {
    {
      std::lock_guard lock(mu_);
      EXPECT_TRUE(out_.accepted) << "OnStart before OnAccepted";
      EXPECT_FALSE(out_.started) << "OnStart twice";
      out_.started = true;
      out_.prompt_tokens = prompt_tokens;
      out_.reused_prompt_tokens = reused_prompt_tokens;
    }
    if (on_start) on_start();
  }

  void OnTokenLogprobs(const TokenLogprobs& token) override {
    std::lock_guard lock(mu_);
    EXPECT_TRUE(out_.started) << "OnTokenLogprobs before OnStart";
    EXPECT_FALSE(out_.ended) << "OnTokenLogprobs after OnEnd";
    out_.reports.push_back(token);
    out_.reported_after.push_back(out_.texts.size());
  }

  void OnToken(std::string_view text, float logprob) override {
    int n = 0;
    {
      std::lock_guard lock(mu_);
      EXPECT_TRUE(out_.started) << "OnToken before OnStart";
      EXPECT_FALSE(out_.ended) << "OnToken after OnEnd";
      out_.texts.emplace_back(text);
      out_.logprobs.push_back(logprob);
      out_.text += text;
      n = static_cast<int>(out_.texts.size());
    }
    if (on_token) on_token(n);
  }

  void OnEnd(FinishReason reason, const GenerationUsage& usage, const Status& status) override {
    std::lock_guard lock(mu_);
    EXPECT_FALSE(out_.ended) << "OnEnd twice";
    out_.ended = true;
    out_.reason = reason;
    out_.usage = usage;
    out_.status = status;
    done_.notify_all();
  }

  // Waits for OnEnd (a generous limit for sanitizer builds; a hang fails the test).
  Output Wait() {
    std::unique_lock lock(mu_);
    EXPECT_TRUE(done_.wait_for(lock, std::chrono::seconds(120), [&] { return out_.ended; }))
        << "the request never ended";
    return out_;
  }

  Output Snapshot() {
    std::lock_guard lock(mu_);
    return out_;
  }

 private:
  std::mutex mu_;
  std::condition_variable done_;
  Output out_;
};

constexpr int kNoLimit = -1;

GenerationRequest Greedy(std::string prompt, int max_tokens) {
  GenerationRequest request;
  request.prompt = std::move(prompt);
  request.max_tokens = max_tokens;
  request.sampling.temperature = 0;
  return request;
}

// Different from their first words on, so that none reuses another's cache.
std::vector<std::string> DistinctPrompts(int n) {
  const char* const subjects[] = {"The cat",   "A river",  "Seven ships", "My neighbour",
                                  "Green tea", "Old maps", "The engine",  "Winter rain"};
  std::vector<std::string> prompts;
  for (int i = 0; i < n; ++i) {
    prompts.push_back(std::string(subjects[i % 8]) + " number " + std::to_string(i) + " said that");
  }
  return prompts;
}

class LlamaEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kTinyModel)) {
      GTEST_SKIP() << "test model " << kTinyModel << " is missing (the shared test models "
                   << "are not checked out next to the repository)";
    }
  }

  static LlamaEngine::Options Options(int parallel = 4) {
    LlamaEngine::Options options;
    options.model_path = kTinyModel;
    options.context_size = 4096;
    options.parallel_sequences = parallel;
    options.threads = 1;
    return options;
  }

  static std::unique_ptr<LlamaEngine> Engine(const LlamaEngine::Options& options) {
    auto engine = LlamaEngine::Create(options);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    return engine.ok() ? std::move(engine).value() : nullptr;
  }

  // `request` on an engine of its own, with nothing cached: what every reuse must give.
  static Output Alone(GenerationRequest request) {
    auto engine = Engine(Options(1));
    if (engine == nullptr) return {};
    Output out = Run(*engine, std::move(request));
    EXPECT_EQ(out.reused_prompt_tokens, 0);
    return out;
  }

  static Output Run(LlamaEngine& engine, GenerationRequest request) {
    auto sink = std::make_shared<RecordingSink>();
    const Status status = engine.Generate(std::move(request), sink);
    EXPECT_TRUE(status.ok()) << status.ToString();
    if (!status.ok()) return {};
    return sink->Wait();
  }
};

TEST_F(LlamaEngineTest, GreedyIsDeterministic) {
  auto engine = Engine(Options());
  ASSERT_NE(engine, nullptr);
  const Output first = Run(*engine, Greedy("Once upon a time", 24));
  const Output second = Run(*engine, Greedy("Once upon a time", 24));
  auto other_engine = Engine(Options());
  ASSERT_NE(other_engine, nullptr);
  const Output third = Run(*other_engine, Greedy("Once upon a time", 24));

  ASSERT_EQ(first.texts.size(), 24u);
  EXPECT_FALSE(first.text.empty());
  EXPECT_EQ(first.texts, second.texts);
  EXPECT_EQ(first.text, second.text);
  EXPECT_EQ(first.texts, third.texts);
}

TEST_F(LlamaEngineTest, MaxTokensEndsWithLengthAfterExactlyThatMany) {
  auto engine = Engine(Options());
  ASSERT_NE(engine, nullptr);
  const Output out = Run(*engine, Greedy("The weather today", 7));
  EXPECT_EQ(out.reason, FinishReason::kLength);
  EXPECT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.texts.size(), 7u);
  EXPECT_EQ(out.usage.completion_tokens, 7);
  EXPECT_EQ(out.usage.prompt_tokens, out.prompt_tokens);
  EXPECT_EQ(out.prompt_tokens, engine->CountTokens("The weather today").value());
}

TEST_F(LlamaEngineTest, StopStringEndsTheOutputBeforeIt) {
  auto engine = Engine(Options());
  ASSERT_NE(engine, nullptr);
  const Output free_run = Run(*engine, Greedy("In the beginning", 32));
  ASSERT_EQ(free_run.texts.size(), 32u);
  // A stop string across a token boundary: the end of one token's text and the start of the
  // next, from the middle of the free run, where it first appears.
  std::string stop;
  size_t stop_token = 0;  // the token that completes it
  std::string before;     // the text before it
  for (size_t i = 4; i + 1 < free_run.texts.size() && stop.empty(); ++i) {
    const std::string& a = free_run.texts[i];
    const std::string& b = free_run.texts[i + 1];
    if (a.size() < 2 || b.size() < 2) continue;
    const std::string candidate = a.substr(a.size() - 2) + b.substr(0, 2);
    std::string prefix;
    for (size_t k = 0; k < i; ++k) prefix += free_run.texts[k];
    prefix += a.substr(0, a.size() - 2);
    if (free_run.text.find(candidate) != prefix.size()) continue;  // appears earlier
    stop = candidate;
    stop_token = i + 1;
    before = prefix;
  }
  ASSERT_FALSE(stop.empty()) << "no usable stop string in: " << free_run.text;

  GenerationRequest request = Greedy("In the beginning", 32);
  request.stop = {"never appears \x01", stop};
  const Output out = Run(*engine, request);
  EXPECT_EQ(out.reason, FinishReason::kStop);
  EXPECT_TRUE(out.status.ok());
  EXPECT_EQ(out.text, before) << "stop string: '" << stop << "'";
  EXPECT_EQ(out.text.find(stop), std::string::npos);
  EXPECT_EQ(out.texts.size(), stop_token + 1);
  // The token that began the stop string released its text only up to it (the rest was held
  // back), and the one that completed it released nothing.
  EXPECT_EQ(out.texts.back(), "");
  const std::string& began = free_run.texts[stop_token - 1];
  EXPECT_EQ(out.texts[stop_token - 1], began.substr(0, began.size() - 2));
}

TEST_F(LlamaEngineTest, ConcurrentRequestsEachGetTheirOwnOutput) {
  const std::vector<std::string> prompts = DistinctPrompts(16);
  auto WithLogprobs = [](const std::string& prompt) {
    GenerationRequest request = Greedy(prompt, 20);
    request.logprobs = true;
    return request;
  };
  // Alone, one sequence at a time.
  std::vector<Output> solo;
  {
    auto engine = Engine(Options(1));
    ASSERT_NE(engine, nullptr);
    for (const std::string& prompt : prompts) solo.push_back(Run(*engine, WithLogprobs(prompt)));
  }
  // All at once, sixteen sequences in each step.
  auto engine = Engine(Options(16));
  ASSERT_NE(engine, nullptr);
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (const std::string& prompt : prompts) {
    sinks.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE(engine->Generate(WithLogprobs(prompt), sinks.back()).ok());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Output out = sinks[i]->Wait();
    EXPECT_EQ(out.texts, solo[i].texts) << "prompt " << i << ": " << prompts[i];
    EXPECT_EQ(out.text, solo[i].text) << "prompt " << i;
    ASSERT_EQ(out.texts.size(), 20u);
    // The same distributions too. Not bit for bit: a step's batch changes the order of float
    // sums (differences of ~1e-6 seen), while another request's tokens would change them wholly.
    for (size_t k = 0; k < out.logprobs.size(); ++k) {
      EXPECT_NEAR(out.logprobs[k], solo[i].logprobs[k], 1e-4) << "prompt " << i << " token " << k;
    }
  }
  const LlamaEngineStats stats = engine->DetailedStats();
  EXPECT_EQ(stats.generation.generated_tokens_total, 16u * 20);
  // Batched: far fewer steps than one per token of every request.
  EXPECT_LT(stats.decode_steps_total, 16u * 20 / 2) << stats.decode_steps_total;
}

TEST_F(LlamaEngineTest, RequestJoinsWhileAnotherIsGenerating) {
  const std::string first_prompt = "Long ago, in a distant land";
  const std::string second_prompt = "Rivers run to the sea";
  Output first_solo;
  Output second_solo;
  {
    auto engine = Engine(Options(1));
    ASSERT_NE(engine, nullptr);
    first_solo = Run(*engine, Greedy(first_prompt, 40));
    second_solo = Run(*engine, Greedy(second_prompt, 12));
  }
  auto engine = Engine(Options(2));
  ASSERT_NE(engine, nullptr);
  auto first = std::make_shared<RecordingSink>();
  auto second = std::make_shared<RecordingSink>();
  std::atomic<int> first_tokens_when_second_started{-1};
  std::atomic<bool> first_active_when_second_started{false};
  // Queued from the first request's sink after its 10th token: it joins mid-generation.
  first->on_token = [&](int n) {
    if (n == 10) {
      EXPECT_TRUE(engine->Generate(Greedy(second_prompt, 12), second).ok());
    }
  };
  second->on_start = [&] {
    first_tokens_when_second_started = static_cast<int>(first->Snapshot().texts.size());
    first_active_when_second_started = !first->Snapshot().ended;
  };
  ASSERT_TRUE(engine->Generate(Greedy(first_prompt, 40), first).ok());
  const Output a = first->Wait();
  const Output b = second->Wait();
  EXPECT_TRUE(first_active_when_second_started);
  EXPECT_EQ(first_tokens_when_second_started, 10);
  EXPECT_EQ(a.texts, first_solo.texts);
  EXPECT_EQ(b.texts, second_solo.texts);
}

TEST_F(LlamaEngineTest, LongPromptIsReadInChunksWhileOthersGenerate) {
  std::string long_prompt = "Here is a long list of things to remember:";
  for (int i = 0; i < 40; ++i) long_prompt += " item " + std::to_string(i) + ",";
  const std::string short_prompt = "A short one";
  Output long_solo;
  Output short_solo;
  {
    auto engine = Engine(Options(1));  // a batch of 512: the whole prompt in one step
    ASSERT_NE(engine, nullptr);
    long_solo = Run(*engine, Greedy(long_prompt, 8));
    short_solo = Run(*engine, Greedy(short_prompt, 40));
  }
  LlamaEngine::Options options = Options(2);
  options.batch_size = 16;
  options.ubatch_size = 16;
  auto engine = Engine(options);
  ASSERT_NE(engine, nullptr);
  auto generating = std::make_shared<RecordingSink>();
  auto reading = std::make_shared<RecordingSink>();
  std::atomic<int> tokens_at_first_long_token{-1};
  generating->on_token = [&](int n) {
    if (n == 5) {
      EXPECT_TRUE(engine->Generate(Greedy(long_prompt, 8), reading).ok());
    }
  };
  reading->on_token = [&](int n) {
    if (n == 1) tokens_at_first_long_token = static_cast<int>(generating->Snapshot().texts.size());
  };
  ASSERT_TRUE(engine->Generate(Greedy(short_prompt, 40), generating).ok());
  const Output a = generating->Wait();
  const Output b = reading->Wait();
  const int chunks = (b.prompt_tokens + 14) / 15;  // 15 prompt tokens beside the other's one
  ASSERT_GT(chunks, 5) << "the prompt should take several steps";
  // The short request kept generating, one token per step, while the long prompt was read.
  EXPECT_GE(tokens_at_first_long_token, 5 + chunks - 1);
  EXPECT_EQ(a.texts, short_solo.texts);
  EXPECT_EQ(b.texts, long_solo.texts);
}

TEST_F(LlamaEngineTest, YoungestSequenceGivesWayWhenTheSharedCacheIsFull) {
  LlamaEngine::Options options = Options(2);
  options.context_size = 256;
  auto engine = Engine(options);
  ASSERT_NE(engine, nullptr);
  auto older = std::make_shared<RecordingSink>();
  auto younger = std::make_shared<RecordingSink>();
  older->on_token = [&](int n) {
    if (n == 1) {
      EXPECT_TRUE(engine->Generate(Greedy("The second of two", kNoLimit), younger).ok());
    }
  };
  ASSERT_TRUE(engine->Generate(Greedy("The first of two", kNoLimit), older).ok());
  const Output a = older->Wait();
  const Output b = younger->Wait();
  // The younger one ends as at the end of its context, with what it generated: a 200 with
  // finish_reason "length" to an OpenAI client, not a 429 that would throw its text away.
  EXPECT_EQ(b.reason, FinishReason::kLength);
  EXPECT_TRUE(b.status.ok()) << b.status.ToString();
  EXPECT_FALSE(b.texts.empty());
  EXPECT_LT(b.prompt_tokens + static_cast<int>(b.texts.size()), 256);
  // The older one then has the cache to itself, up to its own limit.
  EXPECT_EQ(a.reason, FinishReason::kLength);
  EXPECT_EQ(a.prompt_tokens + static_cast<int>(a.texts.size()), 256 + 1);
  EXPECT_EQ(engine->Stats().active_sequences, 0);
}

TEST_F(LlamaEngineTest, CancelledRequestStopsWithinOneStepAndFreesItsSlot) {
  auto engine = Engine(Options(1));
  ASSERT_NE(engine, nullptr);
  auto cancel = std::make_shared<CancellationToken>();
  auto sink = std::make_shared<RecordingSink>();
  GenerationStats stats_at_cancel;
  sink->on_token = [&](int n) {
    if (n == 5) {
      stats_at_cancel = engine->Stats();
      cancel->Cancel();
    }
  };
  GenerationRequest request =
      Greedy("The committee decided", kNoLimit);  // only the context limits it
  request.cancellation = cancel;
  ASSERT_TRUE(engine->Generate(request, sink).ok());
  const Output out = sink->Wait();
  EXPECT_EQ(out.reason, FinishReason::kCancelled);
  EXPECT_EQ(out.status.code(), StatusCode::kCancelled);
  // Cancelled on the engine thread after the 5th token: the next step never decodes it.
  EXPECT_EQ(out.texts.size(), 5u);
  EXPECT_EQ(out.usage.completion_tokens, 5);
  EXPECT_EQ(stats_at_cancel.active_sequences, 1);
  const GenerationStats stats = engine->Stats();
  EXPECT_EQ(stats.active_sequences, 0);
  EXPECT_EQ(stats.waiting_requests, 0);
  // The one slot serves the next request.
  const Output next = Run(*engine, Greedy("Another request", 3));
  EXPECT_EQ(next.reason, FinishReason::kLength);
  EXPECT_EQ(next.texts.size(), 3u);
}

TEST_F(LlamaEngineTest, CancelFromAnotherThreadEndsALongGeneration) {
  auto engine = Engine(Options(1));
  ASSERT_NE(engine, nullptr);
  auto cancel = std::make_shared<CancellationToken>();
  auto sink = std::make_shared<RecordingSink>();
  std::mutex mu;
  std::condition_variable cv;
  bool generating = false;
  sink->on_token = [&](int) {
    std::lock_guard lock(mu);
    generating = true;
    cv.notify_all();
  };
  GenerationRequest request = Greedy("Tell me everything about", kNoLimit);
  request.cancellation = cancel;
  ASSERT_TRUE(engine->Generate(request, sink).ok());
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return generating; }));
  }
  cancel->Cancel();
  const Output out = sink->Wait();
  EXPECT_EQ(out.reason, FinishReason::kCancelled);
  EXPECT_LT(out.texts.size(), 4000u);  // it did not run to the end of its context
  EXPECT_EQ(engine->Stats().active_sequences, 0);
}

TEST_F(LlamaEngineTest, DeadlineEndsTheRequestWithinOneStep) {
  testing::FakeClock clock;
  LlamaEngine::Options options = Options(2);
  options.clock = &clock;
  auto engine = Engine(options);
  ASSERT_NE(engine, nullptr);

  auto sink = std::make_shared<RecordingSink>();
  sink->on_token = [&](int n) {
    if (n == 4) clock.Advance(std::chrono::hours(2));
  };
  GenerationRequest request = Greedy("The deadline is", kNoLimit);
  request.deadline = clock.Now() + std::chrono::hours(1);
  ASSERT_TRUE(engine->Generate(request, sink).ok());
  const Output out = sink->Wait();
  EXPECT_EQ(out.reason, FinishReason::kDeadline);
  EXPECT_EQ(out.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(out.texts.size(), 4u);
  EXPECT_EQ(engine->Stats().active_sequences, 0);

  GenerationRequest late = Greedy("Too late", 4);
  late.deadline = clock.Now() - std::chrono::seconds(1);
  auto never = std::make_shared<RecordingSink>();
  EXPECT_EQ(engine->Generate(late, never).code(), StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(never->Snapshot().started);
}

TEST_F(LlamaEngineTest, SharedPrefixIsReusedAndGivesTheSameOutput) {
  const std::string prefix =
      "You are a helpful assistant. Answer every question briefly and politely, in plain "
      "English, without lists, and never mention that you are a program. Question:";
  const std::string first = prefix + " What colour is the sky?";
  const std::string second = prefix + " How far away is the moon?";

  const Output fresh = Alone(Greedy(second, 16));
  auto engine = Engine(Options(1));
  ASSERT_NE(engine, nullptr);
  const Output a = Run(*engine, Greedy(first, 16));
  EXPECT_EQ(a.reused_prompt_tokens, 0);
  const Output b = Run(*engine, Greedy(second, 16));
  const int prefix_tokens = engine->CountTokens(prefix).value();
  EXPECT_GE(b.reused_prompt_tokens, LlamaEngine::kMinReusedPrefixTokens);
  EXPECT_GE(b.reused_prompt_tokens, prefix_tokens - 1);
  EXPECT_LT(b.reused_prompt_tokens, b.prompt_tokens);
  EXPECT_EQ(b.usage.reused_prompt_tokens, b.reused_prompt_tokens);
  EXPECT_EQ(b.texts, fresh.texts);
  EXPECT_EQ(b.text, fresh.text);
  const GenerationStats stats = engine->Stats();
  EXPECT_EQ(stats.reused_prompt_tokens_total, static_cast<uint64_t>(b.reused_prompt_tokens));
  EXPECT_EQ(stats.prompt_tokens_total, static_cast<uint64_t>(a.prompt_tokens + b.prompt_tokens));

  // The same prompt again: all of it but the last token comes from the cache.
  const Output again = Run(*engine, Greedy(second, 16));
  EXPECT_EQ(again.reused_prompt_tokens, again.prompt_tokens - 1);
  EXPECT_EQ(again.texts, fresh.texts);
}

// A prefix too short to take over a slot's cache (below kMinReusedPrefixTokens) is shared into
// the empty slot the request takes: decoded once, the same output, and the first slot's cache
// still whole for its own next request.
TEST_F(LlamaEngineTest, ShortPrefixIsSharedFromAnotherSlotAndGivesTheSameOutput) {
  const std::string first = "Seven ships sailed to the north";
  const std::string second = "Seven ships burned in the harbour";

  const Output fresh = Alone(Greedy(second, 16));
  auto engine = Engine(Options(2));
  ASSERT_NE(engine, nullptr);
  const Output a = Run(*engine, Greedy(first, 16));
  const Output b = Run(*engine, Greedy(second, 16));
  const int shared = engine->CountTokens("Seven ships").value();  // BOS and the two words
  ASSERT_LT(shared, LlamaEngine::kMinReusedPrefixTokens);
  EXPECT_GE(b.reused_prompt_tokens, shared);
  EXPECT_LT(b.reused_prompt_tokens, b.prompt_tokens);
  EXPECT_EQ(b.texts, fresh.texts);
  // Both slots hold a cache now: the first request's prompt again reuses all of it but the last
  // token, so sharing took nothing from its slot.
  const Output a_again = Run(*engine, Greedy(first, 16));
  EXPECT_EQ(a_again.reused_prompt_tokens, a_again.prompt_tokens - 1);
  EXPECT_EQ(a_again.texts, a.texts);
  const Output b_again = Run(*engine, Greedy(second, 16));
  EXPECT_EQ(b_again.reused_prompt_tokens, b_again.prompt_tokens - 1);
  EXPECT_EQ(b_again.texts, fresh.texts);
}

// While one request generates, another whose prompt starts with the first's whole prompt takes
// those cells from the busy slot: the same output as alone.
TEST_F(LlamaEngineTest, PrefixIsSharedFromABusySlot) {
  const std::string first = "Green tea and old maps were all the";
  const std::string second = first + " travellers carried across the mountains";
  const Output fresh = Alone(Greedy(second, 12));
  auto engine = Engine(Options(2));
  ASSERT_NE(engine, nullptr);
  auto long_one = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine->Generate(Greedy(first, 200), long_one).ok());
  // Once the first request has started generating, its prompt's cells are all there.
  while (long_one->Snapshot().texts.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const Output b = Run(*engine, Greedy(second, 12));
  const int first_tokens = engine->CountTokens(first).value();
  EXPECT_GE(b.reused_prompt_tokens, first_tokens);
  EXPECT_EQ(b.texts, fresh.texts);
  long_one->Wait();
}

TEST_F(LlamaEngineTest, RefusesBadRequests) {
  LlamaEngine::Options options = Options(1);
  options.context_size = 64;
  auto engine = Engine(options);
  ASSERT_NE(engine, nullptr);
  auto sink = std::make_shared<RecordingSink>();

  std::string long_prompt;
  for (int i = 0; i < 100; ++i) long_prompt += " word";
  Status status = engine->Generate(Greedy(long_prompt, 4), sink);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("context of 64"));

  for (int max_tokens : {0, -2}) {
    status = engine->Generate(Greedy("fine", max_tokens), sink);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << max_tokens;
    EXPECT_THAT(status.message(), HasSubstr("max_tokens"));
  }

  GenerationRequest empty_stop = Greedy("fine", 4);
  empty_stop.stop = {"ok", ""};
  EXPECT_EQ(engine->Generate(empty_stop, sink).code(), StatusCode::kInvalidArgument);

  GenerationRequest bad_sampling = Greedy("fine", 4);
  bad_sampling.sampling.top_p = 1.5f;
  EXPECT_EQ(engine->Generate(bad_sampling, sink).code(), StatusCode::kInvalidArgument);

  GenerationRequest cancelled = Greedy("fine", 4);
  cancelled.cancellation = std::make_shared<CancellationToken>();
  cancelled.cancellation->Cancel();
  EXPECT_EQ(engine->Generate(cancelled, sink).code(), StatusCode::kCancelled);

  EXPECT_EQ(engine->Generate(Greedy("fine", 4), nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(sink->Snapshot().started);
  EXPECT_EQ(engine->Stats().prompt_tokens_total, 0u);
}

// llama.cpp's tokenizer spells a newline of Llama's vocabulary out as a byte token, and
// reallocates its output for each such run: quadratic (1 MiB of newlines took 57 s).
TEST_F(LlamaEngineTest, APromptLongerInBytesThanTheContextCanHoldIsRefusedUntokenized) {
  LlamaEngine::Options options = Options(1);
  options.context_size = 256;
  auto engine = Engine(options);
  ASSERT_NE(engine, nullptr);
  auto sink = std::make_shared<RecordingSink>();
  const auto before = std::chrono::steady_clock::now();
  const Status status = engine->Generate(Greedy(std::string(1 << 20, '\n'), 1), sink);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("the prompt is 1048576 bytes: more than the model's "
                                          "context of 256 tokens can hold"));
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(5));
  EXPECT_FALSE(sink->Snapshot().accepted);
}

TEST_F(LlamaEngineTest, ALongPromptIsTokenizedOffTheCallersThread) {
  auto engine = Engine(Options());
  ASSERT_NE(engine, nullptr);
  std::string prompt;
  while (prompt.size() <= LlamaEngine::kInlineTokenizeBytes) prompt += "The cat sat on the mat. ";
  const StatusOr<int> tokens = engine->CountTokens(prompt);
  ASSERT_TRUE(tokens.ok());
  ASSERT_LT(*tokens, 4096);
  const Output out = Run(*engine, Greedy(prompt, 2));
  EXPECT_TRUE(out.accepted);
  EXPECT_NE(out.accepted_on, std::this_thread::get_id());
  EXPECT_EQ(out.prompt_tokens, *tokens);
  EXPECT_EQ(out.texts.size(), 2u);
  EXPECT_EQ(out.reason, FinishReason::kLength);
}

// Too many tokens, found by the tokenizer thread: the sink hears only OnEnd, and the engine
// takes the next request.
TEST_F(LlamaEngineTest, ALongPromptOverTheContextEndsBeforeItIsAccepted) {
  LlamaEngine::Options options = Options(1);
  options.context_size = 512;
  options.max_waiting_requests = 0;
  auto engine = Engine(options);
  ASSERT_NE(engine, nullptr);
  const std::string prompt(LlamaEngine::kInlineTokenizeBytes + 1, '\n');  // a token a byte
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine->Generate(Greedy(prompt, 4), sink).ok());
  const Output out = sink->Wait();
  EXPECT_FALSE(out.accepted);
  EXPECT_FALSE(out.started);
  EXPECT_EQ(out.reason, FinishReason::kError);
  EXPECT_EQ(out.status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status.message(), HasSubstr("tokens, more than the model's context of 512"));
  // Its place in the engine is free again (no waiting room: a leak would refuse this one).
  const Output next = Run(*engine, Greedy("fine", 2));
  EXPECT_EQ(next.texts.size(), 2u);
}

// top_p 0 and min_p 1 (OpenAI accepts both) leave only the likeliest token: greedy's output.
TEST_F(LlamaEngineTest, TopPZeroAndMinPOneSampleTheLikeliestToken) {
  auto engine = Engine(Options());
  ASSERT_NE(engine, nullptr);
  const Output greedy = Run(*engine, Greedy("Once upon a time", 8));
  for (bool top_p : {true, false}) {
    GenerationRequest r = Greedy("Once upon a time", 8);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 3;
    (top_p ? r.sampling.top_p : r.sampling.min_p) = top_p ? 0.0f : 1.0f;
    const Output out = Run(*engine, std::move(r));
    EXPECT_EQ(out.texts, greedy.texts) << (top_p ? "top_p 0" : "min_p 1");
  }
}

TEST_F(LlamaEngineTest, EmptyPromptContinuesFromBos) {
  auto engine = Engine(Options());
  ASSERT_NE(engine, nullptr);
  const Output out = Run(*engine, Greedy("", 3));  // OpenAI's completions allow prompt ""
  EXPECT_EQ(out.prompt_tokens, 1);
  EXPECT_EQ(out.texts.size(), 3u);
}

TEST_F(LlamaEngineTest, OutputThatFillsTheContextEndsWithLength) {
  LlamaEngine::Options options = Options(1);
  options.context_size = 64;
  auto engine = Engine(options);
  ASSERT_NE(engine, nullptr);
  const Output out = Run(*engine, Greedy("Count to a hundred:", kNoLimit));
  EXPECT_EQ(out.reason, FinishReason::kLength);
  EXPECT_EQ(out.prompt_tokens + static_cast<int>(out.texts.size()), 64 + 1)
      << "the last token is sampled from the logits of position 63, never decoded";
}

TEST_F(LlamaEngineTest, QueueIsBounded) {
  LlamaEngine::Options options = Options(1);
  options.max_waiting_requests = 1;
  auto engine = Engine(options);
  ASSERT_NE(engine, nullptr);
  auto cancel = std::make_shared<CancellationToken>();
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int i = 0; i < 2; ++i) {
    sinks.push_back(std::make_shared<RecordingSink>());
    GenerationRequest request = Greedy("Keep going " + std::to_string(i), kNoLimit);
    request.cancellation = cancel;
    ASSERT_TRUE(engine->Generate(request, sinks.back()).ok());
  }
  auto refused = std::make_shared<RecordingSink>();
  const Status status = engine->Generate(Greedy("One too many", 4), refused);
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted) << status.ToString();
  cancel->Cancel();
  for (auto& sink : sinks) EXPECT_EQ(sink->Wait().reason, FinishReason::kCancelled);
  EXPECT_EQ(Run(*engine, Greedy("Room again", 2)).texts.size(), 2u);
}

TEST_F(LlamaEngineTest, WaitingRequestsGetTheSlotMostUrgentFirstThenOldestFirst) {
  auto engine = Engine(Options(1));
  ASSERT_NE(engine, nullptr);
  // The one slot is busy until `cancel`, so the four below wait together.
  auto cancel = std::make_shared<CancellationToken>();
  auto blocker = std::make_shared<RecordingSink>();
  std::promise<void> blocking;
  blocker->on_start = [&blocking] { blocking.set_value(); };
  GenerationRequest long_one = Greedy("Keep going", kNoLimit);
  long_one.cancellation = cancel;
  ASSERT_TRUE(engine->Generate(long_one, blocker).ok());
  blocking.get_future().wait();

  std::mutex mu;
  std::vector<std::string> started;  // guarded by mu
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  const std::pair<const char*, uint64_t> waiting[] = {
      {"late-3", 3}, {"first-1", 1}, {"mid-2", 2}, {"second-1", 1}};
  for (const auto& [name, level] : waiting) {
    auto sink = std::make_shared<RecordingSink>();
    sink->on_start = [&mu, &started, name = std::string(name)] {
      std::lock_guard lock(mu);
      started.push_back(name);
    };
    GenerationRequest request = Greedy(std::string("Prompt ") + name, 1);
    request.priority = level;
    ASSERT_TRUE(engine->Generate(request, sink).ok());
    sinks.push_back(sink);
  }
  cancel->Cancel();
  EXPECT_EQ(blocker->Wait().reason, FinishReason::kCancelled);
  for (auto& sink : sinks) EXPECT_EQ(sink->Wait().reason, FinishReason::kLength);
  std::lock_guard lock(mu);
  EXPECT_EQ(started, (std::vector<std::string>{"first-1", "second-1", "mid-2", "late-3"}));
}

TEST_F(LlamaEngineTest, SeededSamplingIsReproducible) {
  auto engine = Engine(Options());
  ASSERT_NE(engine, nullptr);
  auto sampled = [&](uint32_t seed) {
    GenerationRequest request = Greedy("Pick a word:", 24);
    request.sampling.temperature = 1.0f;
    request.sampling.top_k = 200;
    request.sampling.top_p = 0.95f;
    request.sampling.min_p = 0.01f;
    request.sampling.repeat_penalty = 1.1f;
    request.sampling.seed = seed;
    return Run(*engine, request).texts;
  };
  const std::vector<std::string> first = sampled(42);
  EXPECT_EQ(first.size(), 24u);
  EXPECT_EQ(sampled(42), first);
  bool some_seed_differs = false;
  for (uint32_t seed = 43; seed < 48 && !some_seed_differs; ++seed) {
    some_seed_differs = sampled(seed) != first;
  }
  EXPECT_TRUE(some_seed_differs);
  EXPECT_NE(first, Run(*engine, Greedy("Pick a word:", 24)).texts) << "sampling looked greedy";
}

TEST_F(LlamaEngineTest, PenaltiesChangeGreedyOutput) {
  auto engine = Engine(Options());
  ASSERT_NE(engine, nullptr);
  const std::string prompt = "again and again and again and again";
  const std::vector<std::string> plain = Run(*engine, Greedy(prompt, 24)).texts;
  GenerationRequest repeat = Greedy(prompt, 24);
  repeat.sampling.repeat_penalty = 1.5f;
  GenerationRequest presence = Greedy(prompt, 24);
  presence.sampling.presence_penalty = 2.0f;
  GenerationRequest frequency = Greedy(prompt, 24);
  frequency.sampling.frequency_penalty = 2.0f;
  EXPECT_NE(Run(*engine, repeat).texts, plain);
  EXPECT_NE(Run(*engine, presence).texts, plain);
  EXPECT_NE(Run(*engine, frequency).texts, plain);
  // Still greedy: deterministic.
  EXPECT_EQ(Run(*engine, presence).texts, Run(*engine, presence).texts);
}

TEST_F(LlamaEngineTest, LogprobsWhenAsked) {
  auto engine = Engine(Options());
  ASSERT_NE(engine, nullptr);
  GenerationRequest request = Greedy("Probabilities of", 8);
  request.logprobs = true;
  const Output with = Run(*engine, request);
  ASSERT_EQ(with.logprobs.size(), 8u);
  for (float lp : with.logprobs) {
    EXPECT_TRUE(std::isfinite(lp));
    EXPECT_LE(lp, 0.0f);
  }
  // A random model is unsure: the greedy token is not certain.
  EXPECT_LT(with.logprobs[0], 0.0f);
  const Output without = Run(*engine, Greedy("Probabilities of", 8));
  EXPECT_EQ(without.texts, with.texts);
  for (float lp : without.logprobs) EXPECT_EQ(lp, 0.0f);
}

TEST_F(LlamaEngineTest, NoLogprobsReportsUnlessAsked) {
  auto engine = Engine(Options());
  ASSERT_NE(engine, nullptr);
  GenerationRequest request = Greedy("Probabilities of", 6);
  request.top_logprobs = 5;  // without logprobs: nothing
  const Output out = Run(*engine, request);
  EXPECT_EQ(out.texts.size(), 6u);
  EXPECT_TRUE(out.reports.empty());
}

TEST_F(LlamaEngineTest, TopLogprobsAreTheLikeliestTokensSortedWithTheGreedyOneFirst) {
  auto engine = Engine(Options());
  ASSERT_NE(engine, nullptr);
  GenerationRequest request = Greedy("Probabilities of", 8);
  request.logprobs = true;
  request.top_logprobs = 5;
  const Output out = Run(*engine, request);
  ASSERT_EQ(out.texts.size(), 8u);
  // One report per token, each right before its OnToken, with the same logprob; no stop
  // string and no split character here, so the bytes are the text.
  ASSERT_EQ(out.reports.size(), 8u);
  std::string bytes;
  for (size_t i = 0; i < out.reports.size(); ++i) {
    const TokenLogprobs& r = out.reports[i];
    EXPECT_EQ(out.reported_after[i], i);
    EXPECT_EQ(r.logprob, out.logprobs[i]);
    bytes += r.bytes;
    ASSERT_EQ(r.top.size(), 5u);
    double mass = 0;
    for (size_t j = 0; j < r.top.size(); ++j) {
      EXPECT_LE(r.top[j].logprob, 0.0f);
      if (j > 0) {
        EXPECT_LE(r.top[j].logprob, r.top[j - 1].logprob) << "token " << i;
      }
      mass += std::exp(static_cast<double>(r.top[j].logprob));
    }
    EXPECT_LE(mass, 1.0 + 1e-5);
    EXPECT_GT(mass, 0.0);
    // Greedy with no penalties picks the likeliest: the first alternative is the token itself.
    EXPECT_EQ(r.top[0].bytes, r.bytes) << "token " << i;
    EXPECT_EQ(r.top[0].logprob, r.logprob) << "token " << i;
  }
  EXPECT_EQ(bytes, out.text);
  // Asking changes nothing else.
  const Output plain = Run(*engine, Greedy("Probabilities of", 8));
  EXPECT_EQ(plain.texts, out.texts);

  // No alternatives asked: the chosen tokens only.
  request.top_logprobs = 0;
  const Output chosen = Run(*engine, request);
  ASSERT_EQ(chosen.reports.size(), 8u);
  for (const TokenLogprobs& r : chosen.reports) EXPECT_TRUE(r.top.empty());
  EXPECT_EQ(chosen.reports[3].logprob, out.reports[3].logprob);
}

TEST_F(LlamaEngineTest, LogprobsReportTheTokenThatCompletesAStopString) {
  auto engine = Engine(Options());
  ASSERT_NE(engine, nullptr);
  GenerationRequest request = Greedy("In the beginning", 12);
  request.logprobs = true;
  const Output free_run = Run(*engine, request);
  ASSERT_EQ(free_run.reports.size(), 12u);
  // A stop string: the whole text of a token in the middle, where it first appears.
  size_t stop_token = 0;
  std::string before;
  for (size_t i = 3; i < free_run.texts.size() && stop_token == 0; ++i) {
    std::string prefix;
    for (size_t k = 0; k < i; ++k) prefix += free_run.texts[k];
    if (free_run.texts[i].size() >= 2 && free_run.text.find(free_run.texts[i]) == prefix.size()) {
      stop_token = i;
      before = prefix;
    }
  }
  ASSERT_NE(stop_token, 0u) << "no usable stop string in: " << free_run.text;
  request.stop = {free_run.texts[stop_token]};
  const Output out = Run(*engine, request);
  EXPECT_EQ(out.reason, FinishReason::kStop);
  EXPECT_EQ(out.text, before);
  ASSERT_EQ(out.reports.size(), stop_token + 1);
  EXPECT_EQ(out.reports.back().bytes, free_run.texts[stop_token]);
}

TEST_F(LlamaEngineTest, RefusesTopLogprobsOutOfRange) {
  auto engine = Engine(Options());
  ASSERT_NE(engine, nullptr);
  for (int top : {-1, LlamaEngine::kMaxTopLogprobs + 1}) {
    GenerationRequest request = Greedy("x", 2);
    request.logprobs = true;
    request.top_logprobs = top;
    const Status status = engine->Generate(request, std::make_shared<RecordingSink>());
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << top;
    EXPECT_THAT(status.message(), HasSubstr("top_logprobs"));
  }
}

TEST_F(LlamaEngineTest, ChatTemplateDefaultsToChatML) {
  auto engine = Engine(Options());
  ASSERT_NE(engine, nullptr);
  // The tiny model's GGUF has no tokenizer.chat_template.
  const auto prompt = engine->ApplyChatTemplate({{"system", "Be brief."}, {"user", "Hi there"}},
                                                /*add_generation_prompt=*/true);
  ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
  EXPECT_EQ(prompt->text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_TRUE(prompt->contents.empty());  // no content holds a control token's text
  const auto without_generation_prompt =
      engine->ApplyChatTemplate({{"user", "Hi there"}}, /*add_generation_prompt=*/false);
  ASSERT_TRUE(without_generation_prompt.ok());
  EXPECT_EQ(without_generation_prompt->text, "<|im_start|>user\nHi there<|im_end|>\n");
  EXPECT_EQ(engine->ApplyChatTemplate({}, true).status().code(), StatusCode::kInvalidArgument);
  // llama.cpp's templates read a NUL as the end of the content: refused, not cut short.
  const auto nul = engine->ApplyChatTemplate({{"user", std::string("a\0b", 3)}});
  EXPECT_EQ(nul.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(nul.status().message(), HasSubstr("NUL"));
  // A templated prompt generates like any other.
  const Output out = Run(*engine, Greedy(prompt->text, 4));
  EXPECT_EQ(out.texts.size(), 4u);
}

TEST_F(LlamaEngineTest, AMessagesControlTokenTextIsReadAsText) {
  auto engine = Engine(Options());
  ASSERT_NE(engine, nullptr);
  const std::vector<int32_t> eos = engine->Tokenize("</s>").value();  // BOS, EOS
  ASSERT_EQ(eos.size(), 2u);

  // "</s>" (Llama-2's EOS) in a user's message: where it landed comes with the prompt.
  const auto prompt =
      engine->ApplyChatTemplate({{"system", "Be brief."}, {"user", "hi </s></s></s> x"}});
  ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
  ASSERT_EQ(prompt->contents.size(), 2u);
  const TextRange user = prompt->contents[1];
  EXPECT_EQ(prompt->text.substr(user.begin, user.end - user.begin), "hi </s></s></s> x");
  // Read with its contents as text, the prompt holds no EOS; parsed whole, it would.
  const std::vector<int32_t> as_text = engine->Tokenize(prompt->text, prompt->contents).value();
  const std::vector<int32_t> parsed = engine->Tokenize(prompt->text).value();
  EXPECT_EQ(std::count(as_text.begin(), as_text.end(), eos[1]), 0);
  EXPECT_EQ(std::count(parsed.begin(), parsed.end(), eos[1]), 3);
  EXPECT_GT(as_text.size(), parsed.size());  // "</s></s></s>" spelled out

  // The template's own control tokens are still read as tokens, and the stretch between them is
  // read as one call reads it (SentencePiece's space after a control token included): here
  // BOS, the stretch as text, EOS.
  const std::string text = "<s>[INST] hi </s> x [/INST] ok</s>";
  const std::string stretch = "[INST] hi </s> x [/INST] ok";
  std::vector<int32_t> expected = engine->Tokenize(stretch, {{0, stretch.size()}}).value();
  expected.push_back(eos[1]);
  EXPECT_EQ(engine->Tokenize(text, {{10, 19}}).value(), expected);
  EXPECT_EQ(std::count(expected.begin(), expected.end(), eos[0]), 1);

  // Generate reads the ranges: the prompt's token count is the text's.
  GenerationRequest request = Greedy(prompt->text, 1);
  request.literal = prompt->contents;
  const Output out = Run(*engine, std::move(request));
  EXPECT_EQ(out.prompt_tokens, static_cast<int>(as_text.size()));
}

// Shutdown ends them with the server's reason, never as if their clients had cancelled.
TEST_F(LlamaEngineTest, ShutdownEndsActiveAndWaitingRequestsWithItsReason) {
  auto engine = Engine(Options(2));
  ASSERT_NE(engine, nullptr);
  std::mutex mu;
  std::condition_variable cv;
  int generating = 0;
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int i = 0; i < 4; ++i) {
    auto sink = std::make_shared<RecordingSink>();
    sink->on_token = [&](int n) {
      if (n != 1) return;
      std::lock_guard lock(mu);
      ++generating;
      cv.notify_all();
    };
    sinks.push_back(sink);
    ASSERT_TRUE(
        engine->Generate(Greedy("Endless story " + std::to_string(i), kNoLimit), sink).ok());
  }
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return generating == 2; }));
  }
  const GenerationStats before = engine->Stats();
  EXPECT_EQ(before.active_sequences, 2);
  EXPECT_EQ(before.waiting_requests, 2);
  engine->Shutdown(Unavailable("model 'm' version 1 was unloaded"));
  for (int i = 0; i < 4; ++i) {
    const Output out = sinks[i]->Snapshot();
    EXPECT_TRUE(out.ended) << i;
    EXPECT_EQ(out.reason, FinishReason::kError) << i;
    EXPECT_EQ(out.status.code(), StatusCode::kUnavailable) << i;
    EXPECT_EQ(out.status.message(), "model 'm' version 1 was unloaded") << i;
    EXPECT_EQ(out.started, i < 2) << i;
  }
  EXPECT_EQ(engine->Generate(Greedy("after", 1), sinks[0]).code(), StatusCode::kUnavailable);
  engine->Shutdown(Unavailable("another reason"));  // idempotent
}

// An unload: the waiting requests end at once with its reason, the running ones go on.
TEST_F(LlamaEngineTest, EndWaitingEndsOnlyTheWaitingRequestsAndRefusesNewOnes) {
  auto engine = Engine(Options(2));
  ASSERT_NE(engine, nullptr);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> tokens(4, 0);
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int i = 0; i < 4; ++i) {
    auto sink = std::make_shared<RecordingSink>();
    sink->on_token = [&, i](int n) {
      std::lock_guard lock(mu);
      tokens[i] = n;
      cv.notify_all();
    };
    sinks.push_back(sink);
    ASSERT_TRUE(
        engine->Generate(Greedy("Endless story " + std::to_string(i), kNoLimit), sink).ok());
  }
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60),
                            [&] { return tokens[0] > 0 && tokens[1] > 0; }));
  }
  engine->EndWaiting(Unavailable("model 'm' version 1 was unloaded"));
  for (int i = 2; i < 4; ++i) {
    const Output out = sinks[i]->Wait();
    EXPECT_FALSE(out.started) << i;
    EXPECT_EQ(out.reason, FinishReason::kError) << i;
    EXPECT_EQ(out.status.message(), "model 'm' version 1 was unloaded") << i;
  }
  const Status refused = engine->Generate(Greedy("after", 1), std::make_shared<RecordingSink>());
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_EQ(refused.message(), "model 'm' version 1 was unloaded");
  // The running two go on generating after it.
  int before = 0;
  {
    std::lock_guard lock(mu);
    before = tokens[0];
  }
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(
        cv.wait_for(lock, std::chrono::seconds(60), [&] { return tokens[0] >= before + 3; }));
  }
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(sinks[i]->Snapshot().ended) << i;
  EXPECT_EQ(engine->Stats().active_sequences, 2);
  EXPECT_EQ(engine->Stats().waiting_requests, 0);
  engine->EndWaiting(Unavailable("another reason"));  // idempotent: the first reason holds
  EXPECT_EQ(engine->Generate(Greedy("after", 1), std::make_shared<RecordingSink>()).message(),
            "model 'm' version 1 was unloaded");
  engine->Shutdown(Unavailable("model 'm' version 1 was unloaded"));
  for (int i = 0; i < 2; ++i) {
    const Output out = sinks[i]->Snapshot();
    EXPECT_TRUE(out.started) << i;
    EXPECT_TRUE(out.ended) << i;
  }
}

TEST_F(LlamaEngineTest, StatsCountTokensAndCells) {
  auto engine = Engine(Options(2));
  ASSERT_NE(engine, nullptr);
  LlamaEngineStats stats = engine->DetailedStats();
  EXPECT_EQ(stats.generation.kv_cells_total, 4096);
  EXPECT_EQ(stats.generation.kv_cells_used, 0);
  EXPECT_EQ(engine->context_size(), 4096);
  const Output out = Run(*engine, Greedy("Counting cells", 6));
  stats = engine->DetailedStats();
  EXPECT_EQ(stats.generation.active_sequences, 0);
  EXPECT_EQ(stats.generation.generated_tokens_total, 6u);
  EXPECT_EQ(stats.generation.prompt_tokens_total, static_cast<uint64_t>(out.prompt_tokens));
  // The prompt and every output token but the last (never decoded) stay cached.
  EXPECT_EQ(stats.generation.kv_cells_used, out.prompt_tokens + 5);
  EXPECT_EQ(stats.generation.kv_cells_cached, stats.generation.kv_cells_used);
}

TEST_F(LlamaEngineTest, CreateRefusesWhatItCannotLoad) {
  LlamaEngine::Options options = Options();
  options.model_path = "/nonexistent/model.gguf";
  EXPECT_EQ(LlamaEngine::Create(options).status().code(), StatusCode::kNotFound);

  options.model_path = HARRIER_SOURCE_DIR "/CMakeLists.txt";  // not GGUF
  auto not_gguf = LlamaEngine::Create(options);
  EXPECT_EQ(not_gguf.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(not_gguf.status().message(), HasSubstr("cannot load"));

  options = Options();
  options.batch_size = 2;  // below parallel_sequences
  EXPECT_EQ(LlamaEngine::Create(options).status().code(), StatusCode::kInvalidArgument);
  options = Options();
  options.ubatch_size = 1024;  // above batch_size
  EXPECT_EQ(LlamaEngine::Create(options).status().code(), StatusCode::kInvalidArgument);
  options = Options();
  options.threads = 100000;  // past ggml's 512: its thread pool would abort the process
  auto too_many = LlamaEngine::Create(options);
  EXPECT_EQ(too_many.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(too_many.status().message(), HasSubstr("threads must be in 0..512"));
  options = Options();
  // Past 1,048,576 the slots and the waiting ones overflowed an int: every request refused.
  options.max_waiting_requests = 2147483647;
  auto waiting = LlamaEngine::Create(options);
  EXPECT_EQ(waiting.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(waiting.status().message(), HasSubstr("max_waiting_requests must be in 0..1048576"));
}

// More threads than the usable cores only wait on each other at every step (probe 74: 16 on 2
// cores made a 2-token generation take 2.8 s): the engine uses the usable cores instead.
TEST_F(LlamaEngineTest, ThreadsPastTheUsableCoresAreTheUsableCores) {
  LlamaEngine::Options options = Options();
  options.threads = 64;
  auto engine = LlamaEngine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_LE((*engine)->Stats().compute_threads, UsableCores());
  EXPECT_GE((*engine)->Stats().compute_threads, 1);
}

// A context whose KV cache would not fit in memory is refused before llama.cpp allocates it;
// one that fits is made. The budget is the test's (Options::memory_bytes), not the machine's.
TEST_F(LlamaEngineTest, AContextTooLargeForMemoryIsRefusedBeforeItIsAllocated) {
  LlamaEngine::Options options = Options();
  options.memory_bytes = int64_t{64} << 20;
  options.context_size = 1 << 30;
  auto refused = LlamaEngine::Create(options);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("context_size 1073741824 needs a KV cache of"));
  EXPECT_THAT(refused.status().message(), HasSubstr("more than the 67108864 bytes of memory"));
  options.context_size = 4096;
  auto made = LlamaEngine::Create(options);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
}

}  // namespace
}  // namespace harrier
