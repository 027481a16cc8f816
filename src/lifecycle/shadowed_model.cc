#include "lifecycle/shadowed_model.h"

#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace harrier {
namespace {

// The two answers of one shadowed request; whichever comes second compares them.
struct ShadowPair {
  std::mutex mu;
  std::optional<std::vector<Tensor>> answered;  // the real answer's outputs (buffers shared)
  bool answered_failed = false;
  std::optional<StatusOr<std::vector<Tensor>>> shadow;
  bool done = false;
};

// A request whose real answer failed counts for nothing, whatever the shadow did: there is no
// answer to compare with, and a shadow failing on an input the answering version failed too
// (a 400 from the request checks, an input the model cannot take) says nothing of the shadow.
// Counted as its error, it made a healthy shadow look broken (probe 38).
void MaybeCompare(ShadowPair& pair, TrafficController& traffic, int64_t shadow_version) {
  // REQUIRES: pair.mu held.
  if (pair.done || !(pair.answered || pair.answered_failed) || !pair.shadow) return;
  pair.done = true;
  if (pair.answered_failed) return;
  ShadowComparison comparison;
  if (!pair.shadow->ok()) {
    comparison.failed = true;
  } else {
    comparison = CompareOutputs(*pair.answered, **pair.shadow);
  }
  traffic.RecordShadow(shadow_version, comparison);
}

}  // namespace

ShadowedModel::ShadowedModel(std::shared_ptr<LoadedModel> answering,
                             std::shared_ptr<LoadedModel> shadow,
                             std::shared_ptr<TrafficController> traffic)
    : ForwardingModel(std::move(answering)),
      shadow_(std::move(shadow)),
      traffic_(std::move(traffic)) {}

void ShadowedModel::Infer(std::unique_ptr<InferenceRequest> request, InferCallback done) {
  const int64_t shadow_version = shadow_->version();
  // Shed first: a shadow version with anything queued gets no copy.
  if (shadow_->queue_depth() > 0) {
    traffic_->RecordShadowShed(shadow_version);
    return ForwardingModel::Infer(std::move(request), std::move(done));
  }
  // The copy, before the real request is validated (which may reshape its inputs in place).
  // Input tensors share their buffers (and the body) with the real request.
  auto copy = std::make_unique<InferenceRequest>();
  copy->model_name = request->model_name;
  copy->model_version = shadow_version;
  copy->id = request->id;
  copy->parameters = request->parameters;
  copy->inputs = request->inputs;
  copy->outputs = request->outputs;
  copy->binary_data_output = request->binary_data_output;
  copy->body = request->body;
  copy->received_at = request->received_at;
  // The least urgent level the shadow version has (Triton: the highest number); 0, its default,
  // without priority levels.
  copy->priority = shadow_->batching_policy().priority_levels;
  copy->deadline = request->deadline;
  copy->allow_inline = InlineAllowance::kNever;

  auto pair = std::make_shared<ShadowPair>();
  ForwardingModel::Infer(std::move(request),
                         [pair, traffic = traffic_, shadow_version,
                          done = std::move(done)](StatusOr<InferenceResponse> r) {
                           {
                             std::lock_guard lock(pair->mu);
                             if (r.ok()) {
                               pair->answered = r->outputs;
                             } else {
                               pair->answered_failed = true;
                             }
                             MaybeCompare(*pair, *traffic, shadow_version);
                           }
                           done(std::move(r));
                         });
  shadow_->InferShadowCopy(
      std::move(copy), [pair, traffic = traffic_, shadow_version](StatusOr<InferenceResponse> r) {
        std::lock_guard lock(pair->mu);
        if (r.ok()) {
          pair->shadow = std::move(r->outputs);
        } else if (r.status().code() == StatusCode::kResourceExhausted) {
          pair->done = true;  // no in-flight slot spare (or a full queue): shed, not an error
          traffic->RecordShadowShed(shadow_version);
          return;
        } else {
          pair->shadow = r.status();
        }
        MaybeCompare(*pair, *traffic, shadow_version);
      });
}

}  // namespace harrier
