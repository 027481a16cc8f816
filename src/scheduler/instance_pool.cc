#include "scheduler/instance_pool.h"

#include <pthread.h>

#include <future>

namespace harrier {

StatusOr<std::unique_ptr<InstancePool>> InstancePool::Create(
    std::vector<std::unique_ptr<ModelInstance>> instances, const Options& options) {
  if (instances.empty()) return InvalidArgument("an instance pool needs at least one instance");
  std::unique_ptr<InstancePool> pool(new InstancePool(std::move(instances), options));
  for (size_t i = 0; i < pool->instances_.size(); ++i) {
    pool->workers_.emplace_back([p = pool.get(), i] { p->WorkerLoop(i); });
    // Linux limits thread names to 15 characters.
    std::string thread_name = ("w" + std::to_string(i) + ":" + options.name).substr(0, 15);
    pthread_setname_np(pool->workers_.back().native_handle(), thread_name.c_str());
  }
  return pool;
}

InstancePool::InstancePool(std::vector<std::unique_ptr<ModelInstance>> instances, Options options)
    : options_(std::move(options)), instances_(std::move(instances)) {}

InstancePool::~InstancePool() { Shutdown(); }

Status InstancePool::Submit(Job job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Unavailable("model '" + options_.name + "' is shutting down");
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return Status::Ok();
}

Status InstancePool::RunOnEachInstance(const std::function<Status(ModelInstance&)>& job) {
  // Every worker takes one job at a time, so a job pinned to instance i is simplest run here on
  // the caller's thread before workers compete for the queue: this is only used before the
  // model serves (warm-up), when no other job can be queued.
  for (const auto& instance : instances_) RETURN_IF_ERROR(job(*instance));
  return Status::Ok();
}

void InstancePool::Shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_)
    if (w.joinable()) w.join();
  std::lock_guard lock(mu_);
  workers_.clear();
}

size_t InstancePool::queue_depth() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

void InstancePool::WorkerLoop(size_t index) {
  ModelInstance& instance = *instances_[index];
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job(instance);
  }
}

}  // namespace harrier
