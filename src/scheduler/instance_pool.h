// InstancePool: runs jobs one at a time on the next free model instance.
//
// Each instance is owned by one worker thread, so an instance never runs two jobs at once and
// I/O threads never run model compute. Jobs wait in one FIFO queue (all of its locking lives
// in this file's implementation). This is the scheduler for models without dynamic batching;
// the dynamic batcher, priorities, deadlines and admission control build on the same seam.
//
// Thread safety: Submit() and Shutdown() may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "harrier/backend.h"
#include "harrier/status.h"

namespace harrier {

class InstancePool {
 public:
  // Runs on a worker thread with that worker's instance. Must not throw.
  using Job = std::function<void(ModelInstance& instance)>;

  struct Options {
    std::string name;  // for thread names and logs, e.g. "simple:1"
  };

  // kInvalidArgument when `instances` is empty. Starts one worker thread per instance.
  static StatusOr<std::unique_ptr<InstancePool>> Create(
      std::vector<std::unique_ptr<ModelInstance>> instances, const Options& options);

  ~InstancePool();  // Shutdown()
  InstancePool(const InstancePool&) = delete;
  InstancePool& operator=(const InstancePool&) = delete;

  // Queues `job`. kUnavailable once Shutdown() has begun (the job is not run).
  Status Submit(Job job);

  // Runs `job` on every instance, one after another on each worker, and waits for all of
  // them (used for warm-up before the model is reported ready). Returns the first error.
  Status RunOnEachInstance(const std::function<Status(ModelInstance&)>& job);

  // Stops accepting jobs, runs every job already queued, joins the workers. Idempotent.
  void Shutdown();

  size_t instance_count() const { return instances_.size(); }
  // Jobs waiting (not running); for statistics.
  size_t queue_depth() const;

 private:
  InstancePool(std::vector<std::unique_ptr<ModelInstance>> instances, Options options);
  void WorkerLoop(size_t index);

  // Constant after construction.
  const Options options_;
  const std::vector<std::unique_ptr<ModelInstance>> instances_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;  // guarded by mu_
  bool stopping_ = false;  // guarded by mu_

  std::vector<std::thread> workers_;
};

}  // namespace harrier
