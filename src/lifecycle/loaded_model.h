// LoadedModel: one ready model version — its I/O, completed config, instances and statistics.
// The ServableModel the handlers get from ModelRepositoryManager::Get().
//
// Thread safety: Infer() from any thread; requests run on the pool's worker threads.
#pragma once

#include <memory>
#include <string>

#include "harrier/model_manager.h"
#include "lifecycle/model_io.h"
#include "lifecycle/model_stats.h"
#include "scheduler/instance_pool.h"

namespace harrier {

class LoadedModel : public ServableModel {
 public:
  struct Options {
    std::string name;
    int64_t version = 0;
    ModelIO io;
    std::string config_json;  // the completed config, as GET .../config returns it
  };

  LoadedModel(Options options, std::unique_ptr<InstancePool> pool);
  ~LoadedModel() override;

  const std::string& name() const override { return options_.name; }
  int64_t version() const override { return options_.version; }
  int64_t max_batch_size() const override { return options_.io.max_batch_size; }
  std::string ConfigJson() const override { return options_.config_json; }
  void Infer(std::unique_ptr<InferenceRequest> request, InferCallback done) override;

  const ModelIO& io() const { return options_.io; }
  InstancePool& pool() { return *pool_; }
  void SnapshotStats(ModelVersionStats* out) const;

  // Stops accepting requests, finishes queued and running ones. Idempotent.
  void Shutdown() { pool_->Shutdown(); }

 private:
  // Constant after construction.
  const Options options_;
  const std::unique_ptr<InstancePool> pool_;

  ModelStats stats_;
};

}  // namespace harrier
