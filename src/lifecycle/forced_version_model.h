// ForcedVersionModel: the handle the router gives a request whose version the client forced with
// X-Harrier-Model-Version (docs/routing.md, "Which version answers"). It is the version itself,
// except that Infer() marks the request as naming its version (InferenceRequest::model_version
// set), as a version in the URL does, and a generation too (GenerationRequest::version_named). Such
// a request feeds the version's circuit breaker but not a rollout's guard windows
// (RequestOutcome::routed_by_split): a tester's — or anyone's — requests forced to the candidate
// are not the traffic the rollout sends, and must not decide it.
//
// Header-only on purpose: a line over the version in Infer() and Generate(); its only state is
// the pointer to the version's engine that its generative() wraps.
// Thread safety: as ServableModel.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "harrier/generation.h"
#include "lifecycle/forwarding_model.h"
#include "lifecycle/loaded_model.h"

namespace harrier {

class ForcedVersionModel : public ForwardingModel {
 public:
  explicit ForcedVersionModel(std::shared_ptr<LoadedModel> version)
      : ForwardingModel(version), named_(version->generative()) {}

  void Infer(std::unique_ptr<InferenceRequest> request, InferCallback done) override {
    request->model_version = version();
    ForwardingModel::Infer(std::move(request), std::move(done));
  }
  // A generation marks itself the same way (GenerationRequest::version_named): forced to the
  // candidate, generations rolled a rollout back when they counted as the split's (probe 28).
  GenerativeModel* generative() override { return named_.engine ? &named_ : nullptr; }

 private:
  class NamedVersionGenerator final : public GenerativeModel {
   public:
    explicit NamedVersionGenerator(GenerativeModel* engine) : engine(engine) {}
    StatusOr<ChatPrompt> ApplyChatTemplate(const std::vector<ChatMessage>& messages) override {
      return engine->ApplyChatTemplate(messages);
    }
    Status Generate(GenerationRequest request, std::shared_ptr<GenerationSink> sink) override {
      request.version_named = true;
      return engine->Generate(std::move(request), std::move(sink));
    }
    int context_size() const override { return engine->context_size(); }
    int max_requests() const override { return engine->max_requests(); }
    GenerationStats Stats() const override { return engine->Stats(); }
    void EndWaiting(const Status& why) override { engine->EndWaiting(why); }
    void Shutdown(const Status& why) override { engine->Shutdown(why); }
    GenerativeModel* const engine;  // the version's; null for a tensor model
  };
  NamedVersionGenerator named_;
};

}  // namespace harrier
