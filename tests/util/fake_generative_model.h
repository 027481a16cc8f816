// A GenerativeModel for generation front-end tests: no engine, no threads. The chat template
// writes "<role>content" per message then "<assistant>". In scripted mode (the default) Generate
// plays `script` at once on the calling thread: OnAccepted, OnStart, one OnToken per piece (up to
// max_tokens, stopping early when the request's token is cancelled), then OnEnd (length when
// max_tokens cut it, else stop). When the request asks for logprobs, each OnToken is preceded
// by OnTokenLogprobs: the token's bytes (`token_bytes[i]`, or the piece itself when
// `token_bytes` is shorter), logprob -0.5 (as OnToken's), and request.top_logprobs
// alternatives: the token itself at -0.5, then "alt1", "alt2", ... at -1, -2, ... In held mode
// (`hold`) it keeps each request and its sink for the test to drive, having called OnAccepted
// unless `accept_held` is false (a prompt an engine has yet to tokenize: the test accepts or
// ends it).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "harrier/backend.h"
#include "harrier/generation.h"

namespace harrier::testing {

class FakeGenerativeModel : public GenerativeModel {
 public:
  struct Held {
    GenerationRequest request;
    std::shared_ptr<GenerationSink> sink;
  };

  // "<role>content" per message, then "<assistant>"; every content's range is returned.
  StatusOr<ChatPrompt> ApplyChatTemplate(const std::vector<ChatMessage>& messages) override {
    ChatPrompt out;
    for (const auto& m : messages) {
      if (m.role == "tool") return InvalidArgument("the template knows no role 'tool'");
      out.text += "<" + m.role + ">";
      out.contents.push_back({out.text.size(), out.text.size() + m.content.size()});
      out.text += m.content;
    }
    out.text += "<assistant>";
    return out;
  }

  Status Generate(GenerationRequest request, std::shared_ptr<GenerationSink> sink) override {
    {
      std::lock_guard lock(mu);
      prompts.push_back(request.prompt);
      literals.push_back(request.literal);
      if (!refuse.ok() && prompts.size() > static_cast<size_t>(refuse_after_calls)) return refuse;
      if (hold) {
        if (accept_held) sink->OnAccepted();
        held.push_back({std::move(request), std::move(sink)});
        return Status::Ok();
      }
    }
    const int prompt_tokens = static_cast<int>(request.prompt.size());
    sink->OnAccepted();
    sink->OnStart(prompt_tokens, 0);
    int produced = 0;
    for (const auto& piece : script) {
      if (request.cancellation && request.cancellation->cancelled()) {
        sink->OnEnd(FinishReason::kCancelled, {prompt_tokens, produced, 0}, Status::Ok());
        return Status::Ok();
      }
      if (request.max_tokens >= 0 && produced >= request.max_tokens) {
        sink->OnEnd(FinishReason::kLength, {prompt_tokens, produced, 0}, Status::Ok());
        return Status::Ok();
      }
      if (request.logprobs) {
        TokenLogprobs report;
        report.bytes =
            produced < static_cast<int>(token_bytes.size()) ? token_bytes[produced] : piece;
        report.logprob = -0.5f;
        for (int j = 0; j < request.top_logprobs; ++j) {
          report.top.push_back(j == 0 ? TokenLogprobs::Alternative{report.bytes, -0.5f}
                                      : TokenLogprobs::Alternative{"alt" + std::to_string(j),
                                                                   -1.0f * static_cast<float>(j)});
        }
        sink->OnTokenLogprobs(report);
      }
      sink->OnToken(piece, -0.5f);
      ++produced;
    }
    sink->OnEnd(FinishReason::kStop, {prompt_tokens, produced, 0}, Status::Ok());
    return Status::Ok();
  }

  int context_size() const override { return 512; }
  int max_requests() const override { return max_requests_value; }
  GenerationStats Stats() const override { return {}; }
  // Records the first reason (GenerativeModel::Shutdown: the first holds) for on_shutdown.
  void Shutdown(const Status& why) override {
    std::function<void(const Status&)> tell;
    {
      std::lock_guard lock(mu);
      if (shut_down) return;
      shut_down = true;
      tell = on_shutdown;
    }
    if (tell) tell(why);
  }

  std::vector<Held> TakeHeld() {
    std::lock_guard lock(mu);
    return std::exchange(held, {});
  }

  std::vector<std::string> script = {"Hello", ",", " world", "!"};
  // The bytes each token reports with its logprobs, where they differ from its piece (the
  // piece "" of a token whose text is held back).
  std::vector<std::string> token_bytes;
  bool hold = false;
  bool accept_held = true;
  int max_requests_value = 0;  // max_requests(): 0, no bound
  Status refuse;  // not OK: Generate returns it (after the first refuse_after_calls calls)
  int refuse_after_calls = 0;
  std::mutex mu;
  std::vector<std::string> prompts;              // guarded by mu
  std::vector<std::vector<TextRange>> literals;  // guarded by mu: each prompt's
  std::vector<Held> held;                        // guarded by mu
  bool shut_down = false;                        // guarded by mu
  std::function<void(const Status&)> on_shutdown;  // set before the model is used
};

// A GenerativeBackend named "llama.cpp" (platform too, file model.gguf) whose Load gives a
// scripted FakeGenerativeModel: what the registry and the loader see of llama.cpp's.
class FakeGenerativeBackend final : public GenerativeBackend {
 public:
  std::string_view name() const override { return "llama.cpp"; }
  std::string_view platform() const override { return "llama.cpp"; }
  std::string_view default_model_filename() const override { return "model.gguf"; }
  StatusOr<std::unique_ptr<GenerativeModel>> Load(const std::string&,
                                                  const std::map<std::string, std::string>&,
                                                  int) override {
    auto model = std::make_unique<FakeGenerativeModel>();
    model->on_shutdown = [this](const Status& why) {
      std::lock_guard lock(mu_);
      shutdown_reasons_.push_back(why);
    };
    return std::unique_ptr<GenerativeModel>(std::move(model));
  }

  // Why each model this backend loaded was shut down, in order.
  std::vector<Status> shutdown_reasons() const {
    std::lock_guard lock(mu_);
    return shutdown_reasons_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Status> shutdown_reasons_;  // guarded by mu_
};

}  // namespace harrier::testing
