// ForcedVersionModel: the handle the router gives a request whose version the client forced with
// X-Harrier-Model-Version (docs/routing.md, "Which version answers"). It is the version itself,
// except that Infer() marks the request as naming its version (InferenceRequest::model_version
// set), as a version in the URL does. Such a request feeds the version's circuit breaker but not
// a rollout's guard windows (RequestOutcome::routed_by_split): a tester's — or anyone's —
// requests forced to the candidate are not the traffic the rollout sends, and must not decide it.
//
// Header-only on purpose: one line of Infer() over a LoadedModel, no state of its own.
// Thread safety: as ServableModel.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "harrier/model_manager.h"
#include "lifecycle/loaded_model.h"

namespace harrier {

class ForcedVersionModel : public ServableModel {
 public:
  explicit ForcedVersionModel(std::shared_ptr<LoadedModel> version) : model_(std::move(version)) {}

  const std::string& name() const override { return model_->name(); }
  int64_t version() const override { return model_->version(); }
  int64_t max_batch_size() const override { return model_->max_batch_size(); }
  std::shared_ptr<const std::vector<std::string>> ClassificationLabels(
      std::string_view output) const override {
    return model_->ClassificationLabels(output);
  }
  std::string ConfigJson() const override { return model_->ConfigJson(); }
  void Infer(std::unique_ptr<InferenceRequest> request, InferCallback done) override {
    request->model_version = model_->version();
    model_->Infer(std::move(request), std::move(done));
  }
  Status CheckAdmission(std::string_view client_id) const override {
    return model_->CheckAdmission(client_id);
  }
  void RecordFailure(StatusCode code, Clock::time_point received_at) override {
    model_->RecordFailure(code, received_at);
  }
  GenerativeModel* generative() override { return model_->generative(); }

 private:
  const std::shared_ptr<LoadedModel> model_;
};

}  // namespace harrier
