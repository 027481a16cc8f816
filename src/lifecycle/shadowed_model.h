// ShadowedModel: the handle the router gives a request that also goes, as a shadow copy, to
// another version of its model (the traffic policy's `shadow`, docs/routing.md). The answering
// version serves the request as usual; the copy is submitted after it, to the shadow version,
// and its answer is dropped once compared with the real one (TrafficController::RecordShadow:
// max absolute difference, top-1 agreement).
//
// Shadow work never refuses or delays the real answer: the copy goes only when the shadow
// version is idle (nothing queued) and the server has an in-flight slot to spare (otherwise it
// is shed and counted); it takes no slot of admission control (LoadedModel::InferShadowCopy:
// no in-flight, overload or rate-limit slot), is submitted after the real request, at the
// lowest priority, never inline, without the client's cancellation token; and the real answer
// is handed on the moment it is ready, whatever the shadow does. The copy names its version,
// so it feeds the shadow version's breaker but no rollout's guard window.
//
// A generation is not copied: generative() is the answering version's engine, and a text
// generation runs there alone (docs/routing.md).
//
// Thread safety: as ServableModel.
#pragma once

#include <memory>
#include <string>

#include "lifecycle/forwarding_model.h"
#include "routing/traffic_controller.h"

namespace harrier {

class ShadowedModel : public ForwardingModel {
 public:
  ShadowedModel(std::shared_ptr<LoadedModel> answering, std::shared_ptr<LoadedModel> shadow,
                std::shared_ptr<TrafficController> traffic);

  void Infer(std::unique_ptr<InferenceRequest> request, InferCallback done) override;

 private:
  const std::shared_ptr<LoadedModel> shadow_;
  const std::shared_ptr<TrafficController> traffic_;
};

}  // namespace harrier
