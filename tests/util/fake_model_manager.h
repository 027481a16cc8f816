// In-memory ModelManager and ServableModel for protocol handler tests: no repository, no
// backend, no threads. A FakeServableModel answers Infer() on the calling thread with whatever
// its `infer` function returns (by default: every input echoed back as an output of the same
// name), and remembers the last request it saw.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "harrier/model_manager.h"

namespace harrier::testing {

class FakeServableModel : public ServableModel {
 public:
  using InferFn = std::function<StatusOr<InferenceResponse>(const InferenceRequest&)>;

  FakeServableModel(std::string name, int64_t version, int64_t max_batch_size = 0)
      : name_(std::move(name)), version_(version), max_batch_size_(max_batch_size) {}

  const std::string& name() const override { return name_; }
  int64_t version() const override { return version_; }
  int64_t max_batch_size() const override { return max_batch_size_; }
  std::string ConfigJson() const override { return config_json; }

  void Infer(std::unique_ptr<InferenceRequest> request, InferCallback done) override {
    StatusOr<InferenceResponse> response = infer ? infer(*request) : Echo(*request);
    last_request = std::move(request);
    ++infer_calls;
    done(std::move(response));
  }

  // Answers `admission` and remembers what it was asked.
  Status CheckAdmission(std::string_view client_id) const override {
    ++admission_checks;
    admission_client = std::string(client_id);
    return admission;
  }
  void RecordFailure(StatusCode code, Clock::time_point) override {
    recorded_failures.push_back(code);
  }
  GenerativeModel* generative() override { return generator; }

  // Every input back as an output with the same name, sharing the input's memory.
  StatusOr<InferenceResponse> Echo(const InferenceRequest& request) const {
    InferenceResponse r;
    r.model_name = name_;
    r.model_version = version_;
    r.id = request.id;
    for (const Tensor& in : request.inputs) {
      Tensor out = in;
      if (!out.owner) out.owner = request.body;  // binary inputs borrow from the body
      r.outputs.push_back(std::move(out));
    }
    return r;
  }

  std::string config_json = "{}";
  InferFn infer;  // null: Echo
  GenerativeModel* generator = nullptr;  // not owned; what generative() answers
  Status admission;  // what CheckAdmission answers
  mutable int admission_checks = 0;
  mutable std::string admission_client;
  std::vector<StatusCode> recorded_failures;  // by RecordFailure
  std::unique_ptr<InferenceRequest> last_request;
  int infer_calls = 0;

 private:
  const std::string name_;
  const int64_t version_;
  const int64_t max_batch_size_;
};

class FakeModelManager : public ModelManager {
 public:
  // Adds a READY version.
  std::shared_ptr<FakeServableModel> AddReady(const std::string& name, int64_t version,
                                              int64_t max_batch_size = 0) {
    auto model = std::make_shared<FakeServableModel>(name, version, max_batch_size);
    entries_.push_back({name, version, ModelState::kReady, "", model});
    return model;
  }
  // Adds a version in another state (LOADING, UNAVAILABLE with a reason...).
  void AddState(const std::string& name, int64_t version, ModelState state,
                std::string reason = "") {
    entries_.push_back({name, version, state, std::move(reason), nullptr});
  }

  StatusOr<std::shared_ptr<ServableModel>> Get(std::string_view name,
                                               std::optional<int64_t> version) override {
    const Entry* best = nullptr;
    bool exists = false;
    std::string reason;
    for (const Entry& e : entries_) {
      if (e.name != name || (version && e.version != *version)) continue;
      exists = true;
      if (e.state != ModelState::kReady) {
        reason = e.reason;
        continue;
      }
      if (!best || e.version > best->version) best = &e;
    }
    if (best) return std::shared_ptr<ServableModel>(best->model);
    if (!exists) {
      return NotFound("unknown model '" + std::string(name) + "'" +
                      (version ? " version " + std::to_string(*version) : ""));
    }
    return Unavailable("model '" + std::string(name) + "' is not ready" +
                       (reason.empty() ? "" : ": " + reason));
  }

  void RecordUnroutedFailure(StatusCode code) override { unrouted_failures.push_back(code); }
  std::vector<StatusCode> unrouted_failures;  // by RecordUnroutedFailure

  // Model control: off (the interface's default, kUnimplemented) unless `model_control`; then
  // every load and unload is recorded and answered `control_status`.
  void LoadModel(std::string_view name, ModelLoadOptions options,
                 std::function<void(Status)> done) override {
    if (!model_control) return ModelManager::LoadModel(name, std::move(options), std::move(done));
    loads.emplace_back(std::string(name), options.config_json);
    load_files.push_back(std::move(options.files));
    done(control_status);
  }
  void UnloadModel(std::string_view name, std::function<void(Status)> done) override {
    if (!model_control) return ModelManager::UnloadModel(name, std::move(done));
    unloads.emplace_back(name);
    done(control_status);
  }
  bool model_control = false;
  Status control_status;
  std::vector<std::pair<std::string, std::optional<std::string>>> loads;  // name, config override
  std::vector<std::vector<ModelFileOverride>> load_files;                 // each load's files
  std::vector<std::string> unloads;

  StatusOr<ModelMetadata> Metadata(std::string_view name, std::optional<int64_t> version) override {
    ASSIGN_OR_RETURN(auto model, Get(name, version));
    auto it = metadata.find(std::string(name));
    ModelMetadata md = it != metadata.end() ? it->second : ModelMetadata{};
    md.name = std::string(name);
    if (md.versions.empty()) md.versions.push_back(std::to_string(model->version()));
    return md;
  }

  // Route: the error set for the model in route_errors (a circuit breaker's, a forced version's),
  // else Get()'s answer.
  StatusOr<std::shared_ptr<ServableModel>> Route(std::string_view name,
                                                 std::optional<int64_t> version,
                                                 const RequestHeaders& headers) override {
    if (auto it = route_errors.find(std::string(name)); it != route_errors.end()) return it->second;
    return ModelManager::Route(name, version, headers);
  }
  std::map<std::string, Status> route_errors;

  std::vector<ModelVersionState> Index() const override {
    std::vector<ModelVersionState> out;
    for (const Entry& e : entries_) out.push_back({e.name, e.version, e.state, e.reason});
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
      return std::tie(a.name, a.version) < std::tie(b.name, b.version);
    });
    return out;
  }

  StatusOr<std::vector<ModelVersionStats>> Stats(std::optional<std::string_view> name,
                                                 std::optional<int64_t> version) const override {
    std::vector<ModelVersionStats> out;
    bool known = !name;
    for (const Entry& e : entries_) {
      if (name && e.name == *name) known = true;
      if (name && e.name != *name) continue;
      if (version && e.version != *version) continue;
      if (e.state != ModelState::kReady) continue;
      auto it = stats.find({e.name, e.version});
      ModelVersionStats s = it != stats.end() ? it->second : ModelVersionStats{};
      s.name = e.name;
      s.version = e.version;
      out.push_back(s);
    }
    if (!known) return NotFound("unknown model '" + std::string(*name) + "'");
    if (name && version && out.empty()) {
      return NotFound("unknown model '" + std::string(*name) + "' version " +
                      std::to_string(*version));
    }
    return out;
  }

  bool AllReady() const override { return all_ready; }

  bool all_ready = true;
  std::map<std::string, ModelMetadata> metadata;                       // by model name
  std::map<std::pair<std::string, int64_t>, ModelVersionStats> stats;  // by name, version

 private:
  struct Entry {
    std::string name;
    int64_t version;
    ModelState state;
    std::string reason;
    std::shared_ptr<FakeServableModel> model;
  };
  std::vector<Entry> entries_;
};

}  // namespace harrier::testing
