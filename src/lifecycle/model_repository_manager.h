// ModelRepositoryManager: the ModelManager over a Triton-style model repository on disk.
//
// Create() scans the repository, then LoadAll() loads every model: for each model directory it
// parses config.pbtxt (if any), auto-completes it from the model file, picks versions by the
// version policy, builds instance_group.count instances per version through the Backend, warms
// them up, and marks the version READY. A model that fails is UNAVAILABLE with a reason naming
// the file and the problem; the others still serve.
//
// Loads, unloads and polls run on Options::load_thread_count lifecycle threads (nice +10),
// several models at once, each model's operations one at a time in the order they were asked.
//
// Thread safety: every method may be called from any thread once LoadAll() has returned.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harrier/backend.h"
#include "harrier/model_manager.h"
#include "lifecycle/backend_registry.h"
#include "observability/dashboard_summary.h"
#include "harrier/status.h"
#include "observability/text_exposition.h"
#include "scheduler/admission_controller.h"

namespace harrier {

// Triton's --model-control-mode.
enum class ModelControlMode {
  kNone,      // every model loads at start; the repository is not watched; no load/unload API
  kPoll,      // as kNone, then the repository is polled and changes applied; no load/unload API
  kExplicit,  // only Options::startup_models load at start; the load/unload API changes the rest
};

class ModelRepositoryManager : public ModelManager {
 public:
  struct Options {
    std::string repository_path;  // required
    // The engines this build has (tensor backends, text generators; backend_registry.h), chosen
    // per model version: required, with at least one tensor backend; not owned, must outlive
    // the manager.
    const BackendRegistry* backends = nullptr;
    // Cores the server may use (cgroup quota aware); 0 = detect. Instances x intra-op threads
    // are sized not to exceed it unless a model's config says otherwise.
    int usable_cores = 0;
    // Admission control (built from the flags in main.cc); not owned, must outlive the
    // manager. Null: no admission control.
    AdmissionController* admission = nullptr;
    // --cpu-affinity: pin each instance's worker thread to one CPU of the process's affinity
    // mask, round robin across every instance of every model in load order. Off by default.
    bool pin_instance_workers = false;
    // --inline-execution-max-us: a request may run on the thread that submits it when its
    // model's recent one-request executions took at most this long (docs/scheduling.md).
    // 0 = never.
    uint64_t inline_execution_max_us = 0;
    // Model control (docs/model-lifecycle.md).
    ModelControlMode control_mode = ModelControlMode::kNone;
    // kExplicit: the models LoadAll() loads (--load-model; "*" = every one). The others are
    // listed as UNAVAILABLE "unloaded".
    std::vector<std::string> startup_models;
    // kPoll: how often the repository is scanned (--repository-poll-secs).
    std::chrono::milliseconds poll_interval{15'000};
    // --model-load-thread-count: how many models load (reload, unload, retire) at once, at start
    // and after; one model's operations still run one at a time, in the order asked
    // (docs/model-lifecycle.md, "Threads"). 1: one at a time, as a single thread would. At least
    // 1. The default, 2, is the development machine's core count: a load is CPU-bound (reading,
    // session creation, warm-up), so more at once than there are cores only slices them finer.
    int load_thread_count = 2;
    // How long retiring a version waits for the requests holding its handle before shutting
    // it down anyway (those that then reach it are refused kUnavailable).
    std::chrono::milliseconds unload_timeout{30'000};
    // The free heap a load or a reload's retire may leave resident for the next load, in
    // bytes; past it the memory goes back to the system (malloc_trim), as it always does after
    // an unload (lifecycle/freed_memory.h, docs/model-lifecycle.md "Memory"). 0: after every
    // load. Faulting a model's pages in again was most of a reload's time.
    uint64_t load_retain_bytes = uint64_t{512} << 20;
    // Where a load request's file overrides are written (each load in a private directory of
    // its own, removed when its versions retire or at Shutdown(); docs/model-lifecycle.md).
    // Empty: $TMPDIR, else /tmp.
    std::string override_parent_directory;
  };

  // kInvalidArgument / kNotFound when the repository path is missing or not a directory:
  // the only failures that stop the server.
  static StatusOr<std::unique_ptr<ModelRepositoryManager>> Create(const Options& options);

  // Loads every model in the repository (in explicit mode, those of startup_models),
  // load_thread_count at once on the calling thread and threads it starts, at its priority;
  // returns when each is READY or UNAVAILABLE. Then starts the lifecycle threads that run
  // loads, unloads and (in poll mode) the repository polls.
  virtual void LoadAll() = 0;

  // Poll mode: scans the repository now, on a lifecycle thread (returns at once).
  virtual void PollNow() = 0;

  // The stop's first step, at once (before the front ends stop, so that clients still hear):
  // refuses new loads and unloads, answers the queued ones 503 "the server is shutting down",
  // drops queued polls, and has a configured warm-up in progress stop between runs. The load or
  // unload in progress goes on. Called during LoadAll() (a signal while the server starts), it
  // also skips the start's loads not begun yet. Idempotent; from any thread.
  virtual void BeginShutdown() = 0;

  // Every loaded version's generations, running and waiting, end with `why`
  // (LoadedModel::EndGenerations); tensor requests go on. After BeginShutdown(): for the
  // server's stop, so that a stream still running when the exit timeout nears ends with an
  // error event and its proper end rather than cut mid-body. From any thread.
  virtual void EndGenerations(const Status& why) = 0;

  // BeginShutdown(), then waits for the load or unload in progress, stops accepting new
  // requests (kUnavailable), finishes the ones queued or running, joins the worker threads,
  // and removes the directories of file overrides. Idempotent.
  virtual void Shutdown() = 0;

  // Adds every model version's metrics to `out` (docs/metrics.md): the per-version families of
  // the ready versions, the state and load time of every version in the index, and the
  // failures of requests that never reached a version. For the metrics endpoint's scrape.
  virtual void CollectMetrics(TextExposition* out) const = 0;

  // Every version the repository index lists, with the figures of the loaded ones read from
  // the same objects as CollectMetrics(): for the status page's summary (docs/dashboard.md).
  virtual std::vector<DashboardVersion> DashboardVersions() const = 0;
};

}  // namespace harrier
