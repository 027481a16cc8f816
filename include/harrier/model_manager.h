// ModelManager: what the protocol handlers see of the loaded models.
//
// The implementation (src/lifecycle/) scans the repository, loads versions through a Backend,
// keeps each version's state and statistics, and runs requests on its instances. Handlers only
// use this interface, so they can be tested against a fake (tests/util/).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harrier/backend.h"
#include "harrier/clock.h"
#include "harrier/generation.h"
#include "harrier/inference_request.h"
#include "harrier/model_file_override.h"
#include "harrier/status.h"

namespace harrier {

enum class ModelState { kLoading, kReady, kUnloading, kUnavailable };
// "LOADING", "READY", "UNLOADING", "UNAVAILABLE" (Triton's repository index names).
std::string_view ModelStateName(ModelState state);

// One row of the repository index.
struct ModelVersionState {
  std::string name;
  int64_t version = 0;  // 0 when the model failed before any version was known
  ModelState state = ModelState::kLoading;
  std::string reason;  // why it is UNAVAILABLE; empty otherwise
};

// Triton's model metadata: what a client needs to build a request.
struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;  // ready versions, ascending, as strings
  std::string platform;               // "onnxruntime_onnx"
  // Shapes as clients see them: the batch dim (when max_batch_size > 0) is included as -1.
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
};

// Counts and cumulative nanoseconds, as Triton's statistics extension reports them.
struct DurationStat {
  uint64_t count = 0;
  uint64_t ns = 0;
};

// Triton's batch_stats entry: the executions of one batch size (count = executions).
struct BatchStat {
  uint64_t batch_size = 0;
  DurationStat compute_input, compute_infer, compute_output;
};

struct ModelVersionStats {
  std::string name;
  int64_t version = 0;
  uint64_t last_inference_ms = 0;  // milliseconds since the epoch; 0 when never
  uint64_t inference_count = 0;    // items: a request of batch dim n counts n
  uint64_t execution_count = 0;    // model executions (a batch of requests counts 1)
  DurationStat success, fail, queue, compute_input, compute_infer, compute_output;
  std::vector<BatchStat> batch_stats;  // sizes that ran, ascending
};

// A ready model version, pinned for as long as the handle lives. Do not hold a handle longer
// than one request: unloading waits for handles to drop. Releasing the last handle of a
// version the manager has not shut down destroys it, which joins its threads (model workers, a
// generation engine's loop): so never release a handle from a callback the version runs on one
// of its own threads (a completion callback, a generation sink's OnToken/OnEnd) unless another
// handle outlives it. The manager shuts every version down before it drops its own handle, and
// front ends that keep a handle past a request's callbacks release it on their own threads
// (the OpenAI handler's timer thread, for a stream that waits for a reconnect).
class ServableModel {
 public:
  virtual ~ServableModel() = default;
  virtual const std::string& name() const = 0;
  virtual int64_t version() const = 0;
  virtual int64_t max_batch_size() const = 0;
  // The classification labels of `output` (its config's label_filename, read at load: line i
  // names class i); null when it has none.
  virtual std::shared_ptr<const std::vector<std::string>> ClassificationLabels(
      std::string_view output) const {
    (void)output;
    return nullptr;
  }
  // The completed model configuration as Triton's JSON (protobuf JSON mapping, proto names).
  virtual std::string ConfigJson() const = 0;
  // Checks `request` against the model and runs it on a worker thread; `done` is called once,
  // from a worker thread or, for errors found before queueing, from the calling thread.
  // Errors: kInvalidArgument (names, dtypes, shapes, sizes), kUnavailable (shutting down),
  // kResourceExhausted (queue full), kDeadlineExceeded (deadline or queue timeout passed while
  // queued), kCancelled (the request's token fired), kInternal (engine failure).
  // See docs/scheduling.md.
  virtual void Infer(std::unique_ptr<InferenceRequest> request, InferCallback done) = 0;
  // Would Infer() refuse a request from `client_id` for admission control right now (overload
  // protection, the in-flight limit, the rate limits)? Takes no slot and no token: a peek, so
  // that a transport can refuse before reading a large body. OK does not promise admission
  // (Infer() decides again); kResourceExhausted has the message and retry hint Infer() would
  // give. The request's priority is in its body, unknown here; since Infer() exempts urgent
  // requests from overload protection, the overload part is skipped for models with priority
  // levels.
  virtual Status CheckAdmission(std::string_view client_id) const {
    (void)client_id;
    return Status::Ok();
  }
  // Counts an inference request for this version that a transport refused before calling
  // Infer() (a body that does not decode, a refusal by CheckAdmission) in the version's
  // statistics and metrics, as failed with `code`. Infer() counts its own outcomes; do not
  // call this for them. Default: not counted.
  virtual void RecordFailure(StatusCode code, Clock::time_point received_at) {
    (void)code;
    (void)received_at;
  }
  // The version's text generator when the model generates tokens (harrier/generation.h), else
  // null. Valid while the handle lives: hold the handle until the generation has ended.
  virtual GenerativeModel* generative() { return nullptr; }
};

// What a load request may say besides the model's name (Triton's load parameters).
struct ModelLoadOptions {
  // `parameters.config`: the model's config as JSON, used instead of its config.pbtxt for
  // this load.
  std::optional<std::string> config_json;
  // `parameters["file:<version>/<name>"]`: the model's files, loaded instead of its directory
  // in the repository (which it then need not have); needs `config_json`. Empty: none.
  std::vector<ModelFileOverride> files;
};

class ModelManager {
 public:
  virtual ~ModelManager() = default;

  // A ready version: `version` nullopt means the highest ready one.
  // kNotFound: no such model or version. kUnavailable: it exists but is not ready (the
  // message says why).
  virtual StatusOr<std::shared_ptr<ServableModel>> Get(std::string_view name,
                                                       std::optional<int64_t> version) = 0;
  // Metadata across the model's ready versions; same errors as Get (with version nullopt).
  virtual StatusOr<ModelMetadata> Metadata(std::string_view name,
                                           std::optional<int64_t> version) = 0;
  // Every model and version with its state, sorted by name then version.
  virtual std::vector<ModelVersionState> Index() const = 0;
  // Index()'s rows of model `name` alone; none when the index does not hold it. By default
  // Index(), filtered; a manager may answer it without building the whole index.
  virtual std::vector<ModelVersionState> IndexOf(std::string_view name) const {
    std::vector<ModelVersionState> rows;
    for (ModelVersionState& row : Index())
      if (row.name == name) rows.push_back(std::move(row));
    return rows;
  }
  // Statistics for every ready version, or for one model (and version).
  virtual StatusOr<std::vector<ModelVersionStats>> Stats(std::optional<std::string_view> name,
                                                         std::optional<int64_t> version) const = 0;
  // True when every model the repository holds is ready (the server's readiness).
  virtual bool AllReady() const = 0;
  // Counts an inference request that failed before it reached a model version (Get() refused
  // it: unknown model or version, not ready), for the metrics; labelled by `code` only, never
  // by the name the client sent. Default: not counted.
  virtual void RecordUnroutedFailure(StatusCode code) { (void)code; }

  // A request's header fields, names lower-cased (as HttpRequest::headers holds them).
  using RequestHeaders = std::vector<std::pair<std::string, std::string>>;

  // The version that answers a request for `name` (docs/routing.md). A `version` from the URL
  // is always honoured (Get()). Otherwise, with the model's traffic policy, the policy's choice
  // — the `x-harrier-model-version` header overrides the split, the policy's sticky header
  // keeps one client on one version — and, when the policy shadows, a handle that also sends
  // a copy to the shadow version; without a policy, the header's version or the highest ready
  // one. Errors: Get()'s; kInvalidArgument for a header that is not a version number;
  // kUnavailable ("...; retry after N s") when every version's circuit breaker is open.
  virtual StatusOr<std::shared_ptr<ServableModel>> Route(std::string_view name,
                                                         std::optional<int64_t> version,
                                                         const RequestHeaders& headers) {
    (void)headers;
    return Get(name, version);
  }
  // GET /v2/models/{m}/traffic: the policy and its live state as JSON. kNotFound: no model.
  virtual StatusOr<std::string> TrafficJson(std::string_view name) {
    (void)name;
    return Unimplemented("traffic policies are not supported by this server");
  }
  // PUT: parses, checks against the READY versions and installs a policy (kInvalidArgument,
  // nothing changes, for a bad one). DELETE: back to no policy.
  virtual Status SetTrafficPolicy(std::string_view name, std::string_view json) {
    (void)name;
    (void)json;
    return Unimplemented("traffic policies are not supported by this server");
  }
  virtual Status ClearTrafficPolicy(std::string_view name) {
    (void)name;
    return Unimplemented("traffic policies are not supported by this server");
  }

  // Model control (Triton's load and unload, docs/model-lifecycle.md). Loads, or reloads, every
  // version of `name` its version policy selects; `done` is called once, when the versions
  // serve (OK) or the load failed (the versions that served before go on serving), from a
  // background thread or the calling one. Errors: kUnavailable when model control is off
  // (the model control mode is not explicit), kNotFound (no such model directory, and no file
  // overrides), kInvalidArgument (a bad config override or file override: nothing changes),
  // and the load's own failure.
  virtual void LoadModel(std::string_view name, ModelLoadOptions options,
                         std::function<void(Status)> done) {
    (void)name;
    (void)options;
    done(Unimplemented("model load and unload are not supported by this server"));
  }
  // Takes every version of `name` out of rotation; `done` is called once that holds (new
  // requests are refused), while the requests in flight still finish; the versions are then
  // freed in the background. Errors as for LoadModel().
  virtual void UnloadModel(std::string_view name, std::function<void(Status)> done) {
    (void)name;
    done(Unimplemented("model load and unload are not supported by this server"));
  }
};

}  // namespace harrier
