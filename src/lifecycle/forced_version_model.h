// ForcedVersionModel: the handle the router gives a request whose version the client forced with
// X-Harrier-Model-Version (docs/routing.md, "Which version answers"). It is the version itself,
// except that Infer() marks the request as naming its version (InferenceRequest::model_version
// set), as a version in the URL does. Such a request feeds the version's circuit breaker but not
// a rollout's guard windows (RequestOutcome::routed_by_split): a tester's — or anyone's —
// requests forced to the candidate are not the traffic the rollout sends, and must not decide it.
//
// Header-only on purpose: one line of Infer() over the version, no state of its own.
// Thread safety: as ServableModel.
#pragma once

#include <memory>
#include <utility>

#include "lifecycle/forwarding_model.h"

namespace harrier {

class ForcedVersionModel : public ForwardingModel {
 public:
  using ForwardingModel::ForwardingModel;

  void Infer(std::unique_ptr<InferenceRequest> request, InferCallback done) override {
    request->model_version = version();
    ForwardingModel::Infer(std::move(request), std::move(done));
  }
};

}  // namespace harrier
