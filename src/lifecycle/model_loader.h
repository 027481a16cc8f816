// ModelLoader: one model version from its repository directory to a warmed-up LoadedModel —
// the completed config (auto-complete from the model file), the instances built through the
// Backend the registry chooses for it, the scheduler's batching policy, admission, and the warm-up runs on every instance.
// The model repository manager decides what to load and when; this is how.
//
// Thread safety: LoadVersion() may be called from several threads at once (the CPU
// round-robin for pinned workers is atomic); a load takes as long as the model's set-up and
// warm-up, so it belongs on a background thread, never on an I/O or model worker thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harrier/backend.h"
#include "harrier/status.h"
#include "lifecycle/backend_registry.h"
#include "lifecycle/loaded_model.h"
#include "repository/model_config.pb.h"
#include "repository/repository_scan.h"
#include "scheduler/admission_controller.h"

namespace harrier {

class ModelLoader {
 public:
  struct Options {
    // The engines this build has, chosen from per version (backend_registry.h): required, with
    // at least one tensor backend; not owned. A text generator whose engine the build lacks
    // fails to load, saying so.
    const BackendRegistry* backends = nullptr;
    // Instances x intra-op threads are sized not to exceed it unless a config says otherwise.
    int usable_cores = 1;
    AdmissionController* admission = nullptr;  // not owned; null: no admission control
    // Pin each instance's worker to one CPU of the process's affinity mask, round robin across
    // every instance loaded.
    bool pin_instance_workers = false;
    uint64_t inline_execution_max_us = 0;  // docs/scheduling.md; 0 = never
    // Set when the server stops (not owned; may be null): a configured warm-up stops between
    // runs and the load fails, so that a warm-up of thousands of runs cannot hold the stop.
    const std::atomic<bool>* stopping = nullptr;
  };

  // A version that loaded: READY, though its implicit warm-up may have failed (why, or empty).
  struct LoadedVersion {
    std::shared_ptr<LoadedModel> model;
    std::string warmup_failure;
  };

  explicit ModelLoader(const Options& options);

  // Loads version `version` of the model in `dir` with `config` (config.pbtxt as parsed, or an
  // override; auto-completed here). Errors name the file and the problem: the model file does
  // not load, the config does not fit it, a configured warm-up fails.
  // `traffic`: the model's traffic controller, which the version reports its requests to
  // (may be null). `unload` (may be null): set when an unload of the model is asked for; a
  // configured warm-up then stops between runs and the load fails. `stats` (may be null): the
  // statistics of the serving version this load replaces, to count on into
  // (LoadedModel::Options::stats); the warm-up is never counted in them.
  StatusOr<LoadedVersion> LoadVersion(const ModelDirectory& dir,
                                      const inference::ModelConfig& config, int64_t version,
                                      std::shared_ptr<TrafficController> traffic = nullptr,
                                      const std::atomic<bool>* unload = nullptr,
                                      std::shared_ptr<ModelStats> stats = nullptr);

  // Whether version `version` of `dir` with `config` is a text generator's
  // (BackendRegistry::Choose: the config names a generator, or names no backend or platform
  // while the version directory holds a generator's model file and no tensor backend's).
  bool IsGenerative(const ModelDirectory& dir, const inference::ModelConfig& config,
                    int64_t version) const;
  // The platform the model's index entry and metadata report (before any version loaded).
  std::string_view PlatformFor(const ModelDirectory& dir,
                               const inference::ModelConfig& config) const;

 private:
  BackendRegistry::Choice Choose(const ModelDirectory& dir, const inference::ModelConfig& config,
                                 int64_t version) const;
  StatusOr<LoadedVersion> LoadGenerativeVersion(const ModelDirectory& dir,
                                                inference::ModelConfig config, int64_t version,
                                                const BackendRegistry::Choice& choice,
                                                std::shared_ptr<TrafficController> traffic,
                                                std::shared_ptr<ModelStats> stats);

  const Options options_;
  const std::vector<int> allowed_cpus_;  // empty unless pinning
  std::atomic<size_t> next_cpu_{0};      // round-robin position for pinned instance workers
};

}  // namespace harrier
