// ForwardingModel: a ServableModel that is one loaded version, every call passed to it. The
// handles the router wraps around a version (ForcedVersionModel, ShadowedModel) derive from it
// and override only what they change, so that a method added to ServableModel reaches the
// version through all of them (a wrapper that forgot generative() once turned generations away).
//
// Thread safety: as ServableModel.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harrier/model_manager.h"
#include "lifecycle/loaded_model.h"

namespace harrier {

class ForwardingModel : public ServableModel {
 public:
  explicit ForwardingModel(std::shared_ptr<LoadedModel> version) : model_(std::move(version)) {}

  const std::string& name() const override { return model_->name(); }
  int64_t version() const override { return model_->version(); }
  int64_t max_batch_size() const override { return model_->max_batch_size(); }
  std::shared_ptr<const std::vector<std::string>> ClassificationLabels(
      std::string_view output) const override {
    return model_->ClassificationLabels(output);
  }
  std::string ConfigJson() const override { return model_->ConfigJson(); }
  void Infer(std::unique_ptr<InferenceRequest> request, InferCallback done) override {
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
