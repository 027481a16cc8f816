// Admission control: the server says "no" early and cheaply, before a request is queued.
//
//   AdmissionController  one per server (built in main.cc): the server-wide in-flight limit and
//                        the server-wide per-client rate limit; makes one ModelAdmission per
//                        model version.
//   ModelAdmission       one per model version (owned by LoadedModel): overload protection
//                        (OverloadLimiter), the model's rate limit and its per-client limit.
//   AdmissionTicket      what an admitted request holds until its response is produced; its
//                        destructor gives back the in-flight and overload slots.
//
// Every rejection is kResourceExhausted (HTTP 429) with a message that names the limit and ends
// in "; retry after N s" (RetryAfterSeconds() in core/status_mapping.h reads it back for the
// Retry-After header).
// Order of checks: overload (one atomic add, a few loads), server in-flight (one atomic), then
// the rate limits (model bucket, model per-client bucket, server per-client bucket). A rejected
// request holds nothing afterwards: slots and tokens taken by earlier checks are given back.
//
// Knobs, defaults and the algorithm: docs/admission.md.
// Thread safety: every method may be called from any thread. Admit() costs two atomic
// read-modify-writes with no rate limits configured; a per-client limit adds one short lock of
// one of 16 shards.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "harrier/clock.h"
#include "harrier/status.h"
#include "scheduler/overload_limiter.h"
#include "scheduler/rate_limiter.h"
#include "scheduler/token_bucket.h"

namespace harrier {

class ModelAdmission;

// Proof of admission. Move-only; releases its slots on destruction (or Release()).
// REQUIRES: destroyed before the ModelAdmission that issued it.
class AdmissionTicket {
 public:
  AdmissionTicket() = default;  // holds nothing
  AdmissionTicket(AdmissionTicket&& other) noexcept
      : model_(std::exchange(other.model_, nullptr)) {}
  AdmissionTicket& operator=(AdmissionTicket&& other) noexcept {
    if (this != &other) {
      Release();
      model_ = std::exchange(other.model_, nullptr);
    }
    return *this;
  }
  AdmissionTicket(const AdmissionTicket&) = delete;
  AdmissionTicket& operator=(const AdmissionTicket&) = delete;
  ~AdmissionTicket() { Release(); }

  bool held() const { return model_ != nullptr; }

  // Feedback for overload protection: how long the request waited in the queue (admission to
  // the start of its run, or to its removal if it never ran) and how long its run (its batch's
  // run) took, 0 when it never ran. Call at most once, before Release(); optional (a request
  // rejected by validation has nothing to report).
  void OnComplete(uint64_t queue_ns, uint64_t service_ns);

  // Gives back the slots. Idempotent.
  void Release();

 private:
  friend class ModelAdmission;
  explicit AdmissionTicket(ModelAdmission* model) : model_(model) {}

  ModelAdmission* model_ = nullptr;
};

class AdmissionController {
 public:
  // Server-wide settings (startup flags). Defaults: what `harrier serve` does with no flags.
  struct Options {
    const Clock* clock = &SteadyClock();  // not owned; must outlive the controller
    // Requests admitted and not yet answered, across all models (--max-inflight); 0: no limit.
    int64_t max_inflight = 1024;
    // Each client key, across all models together (--rate-limit-per-client); off by default.
    RateLimit per_client;
    // Each model version's total, unless its config says otherwise (--rate-limit-per-model);
    // off by default.
    RateLimit per_model;
    // Client keys remembered per table (--rate-limit-max-clients).
    size_t max_clients = 65536;
    // Overload protection for every model unless its config says otherwise
    // (--overload-protection on|off).
    bool overload_protection = true;
    // Every model's target queue delay unless its config says otherwise
    // (--overload-target-queue-delay-us); 0: derived from each model's service time.
    std::chrono::nanoseconds target_queue_delay{0};
  };

  // What the controller needs to know about one model version.
  struct ModelSpec {
    std::string name;  // for messages
    int instance_count = 1;
    // Requests one run can take: max_batch_size when the model has a dynamic batcher, else 1.
    int requests_per_run = 1;
    // dynamic_batching.max_queue_delay_microseconds: queueing on purpose, not overload.
    std::chrono::nanoseconds batching_delay{0};
    // The model config's `parameters` (string values); the harrier.rate_limit.* and
    // harrier.overload.* keys are read, the others ignored.
    std::map<std::string, std::string> parameters;
  };

  // kInvalidArgument when a rate limit is malformed (rate set, burst < 1) or max_inflight < 0.
  static StatusOr<std::unique_ptr<AdmissionController>> Create(const Options& options);
  AdmissionController(const AdmissionController&) = delete;
  AdmissionController& operator=(const AdmissionController&) = delete;

  // Admission for one model version, from the server's defaults and the model's parameters.
  // kInvalidArgument names the parameter when a harrier.* value is malformed (the model then
  // fails to load with that reason). The result must not outlive the controller.
  StatusOr<std::unique_ptr<ModelAdmission>> ForModel(const ModelSpec& spec);

  const Options& options() const { return options_; }
  int64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

 private:
  friend class ModelAdmission;
  friend class AdmissionTicket;
  explicit AdmissionController(const Options& options);

  bool TryAcquireInflight() {
    if (options_.max_inflight == 0) return true;
    if (in_flight_.fetch_add(1, std::memory_order_relaxed) < options_.max_inflight) return true;
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  bool WouldAcquireInflight() const {
    return options_.max_inflight == 0 ||
           in_flight_.load(std::memory_order_relaxed) < options_.max_inflight;
  }
  void ReleaseInflight() {
    if (options_.max_inflight != 0) in_flight_.fetch_sub(1, std::memory_order_relaxed);
  }

  // Constant after construction.
  const Options options_;
  const std::unique_ptr<ClientRateLimiter> per_client_;  // null when off

  // Every admission in the server touches this line: keep it to itself.
  alignas(64) std::atomic<int64_t> in_flight_{0};
};

// The per-model settings, resolved from the server's defaults and the model's parameters.
struct ModelAdmissionConfig {
  RateLimit model_rate;       // harrier.rate_limit.rps / .burst
  RateLimit per_client_rate;  // harrier.rate_limit.per_client_rps / .per_client_burst
  OverloadLimiter::Options overload;
};

// Pure: the parameters table in docs/admission.md. kInvalidArgument names the bad key.
StatusOr<ModelAdmissionConfig> ResolveModelAdmission(const AdmissionController::Options& server,
                                                     const AdmissionController::ModelSpec& spec);

class ModelAdmission {
 public:
  // Admits one request from `client_id` (empty: anonymous; all anonymous requests share one
  // client key). kResourceExhausted names the limit hit; see the file comment. `urgent`: the
  // request is more urgent than the model's default priority level, so the scheduler will put
  // it ahead of queued work; overload protection counts it but does not refuse it (the
  // in-flight and rate limits still apply).
  StatusOr<AdmissionTicket> Admit(std::string_view client_id, bool urgent = false);
  StatusOr<AdmissionTicket> Admit(std::string_view client_id, Clock::time_point now,
                                  bool urgent = false);

  // Would Admit(client_id) refuse a request now? The same checks in the same order, with the
  // same kResourceExhausted message, but nothing is taken or counted (no slot, no token, no
  // client key remembered): a peek for a transport that has only the request's headers.
  // `check_overload` false skips overload protection (the request may turn out to be urgent,
  // which Admit() exempts from it). OK does not promise that Admit() will admit.
  Status Peek(std::string_view client_id, bool check_overload = true) const;
  Status Peek(std::string_view client_id, Clock::time_point now, bool check_overload) const;

  // Whether the server has an in-flight slot to spare now (a peek: nothing taken). A shadow copy
  // of a traffic policy takes no slot, and runs only when one is spare (LoadedModel::
  // InferShadowCopy).
  bool ServerHasSpareInflight() const { return server_->WouldAcquireInflight(); }

  // Feedback without a ticket (AdmissionTicket::OnComplete calls this).
  void OnComplete(uint64_t queue_ns, uint64_t service_ns);
  // The scheduler's report of each model execution (OverloadLimiter::RunStarted/RunFinished):
  // what the predicted queue delay of the next arrival is computed from.
  void RunStarted(const OverloadLimiter::Run& run) {
    if (config_.overload.enabled) overload_.RunStarted(run, server_->options().clock->Now());
  }
  void RunFinished(const OverloadLimiter::Run& run, std::chrono::nanoseconds service,
                   std::chrono::nanoseconds busy) {
    if (config_.overload.enabled) overload_.RunFinished(run, service, busy);
  }

  const std::string& name() const { return name_; }
  const ModelAdmissionConfig& config() const { return config_; }
  OverloadLimiter::Snapshot overload() const { return overload_.snapshot(); }
  // The queue delay overload protection predicts for a request arriving now
  // (OverloadLimiter::PredictedWait); nullopt when overload protection is off for the model.
  std::optional<std::chrono::nanoseconds> PredictedQueueWait() const {
    if (!config_.overload.enabled) return std::nullopt;
    return overload_.PredictedWait(server_->options().clock->Now());
  }

 private:
  friend class AdmissionController;
  friend class AdmissionTicket;
  ModelAdmission(AdmissionController* server, std::string name, ModelAdmissionConfig config);
  void Release() {
    overload_.Release();
    server_->ReleaseInflight();
  }
  Status OverloadRefusal(const OverloadLimiter::Refusal& why) const;
  Status InflightRefusal() const;
  Status ModelRateRefusal(Clock::duration wait) const;
  Status ModelClientRefusal(std::string_view client_id, Clock::duration wait) const;
  Status ServerClientRefusal(std::string_view client_id, Clock::duration wait) const;
  // Whether admission reads the clock: overload protection or a rate limit is on.
  bool NeedsClock() const {
    return config_.overload.enabled || model_bucket_ != nullptr || per_client_ != nullptr ||
           server_->per_client_ != nullptr;
  }

  // Constant after construction.
  AdmissionController* const server_;
  const std::string name_;
  const ModelAdmissionConfig config_;
  const std::unique_ptr<TokenBucket> model_bucket_;      // null when off
  const std::unique_ptr<ClientRateLimiter> per_client_;  // null when off

  OverloadLimiter overload_;
};

inline void AdmissionTicket::OnComplete(uint64_t queue_ns, uint64_t service_ns) {
  if (model_ != nullptr) model_->OnComplete(queue_ns, service_ns);
}

inline void AdmissionTicket::Release() {
  if (model_ != nullptr) std::exchange(model_, nullptr)->Release();
}

}  // namespace harrier
