#include "scheduler/instance_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <set>

namespace harrier {
namespace {

// An instance that records which thread ran it and whether two runs ever overlapped.
class RecordingInstance : public ModelInstance {
 public:
  Status Run(std::span<const Tensor>, std::span<const std::string>, std::vector<Tensor>*,
             const RunContext&) override {
    if (busy_.exchange(true)) overlapped_ = true;
    busy_ = false;
    return Status::Ok();
  }
  std::atomic<bool> busy_{false};
  std::atomic<bool> overlapped_{false};
};

std::vector<std::unique_ptr<ModelInstance>> MakeInstances(int n) {
  std::vector<std::unique_ptr<ModelInstance>> v;
  for (int i = 0; i < n; ++i) v.push_back(std::make_unique<RecordingInstance>());
  return v;
}

TEST(InstancePoolTest, RejectsEmpty) {
  EXPECT_EQ(InstancePool::Create({}, {"m"}).status().code(), StatusCode::kInvalidArgument);
}

TEST(InstancePoolTest, RunsEveryJobOnAnInstanceNeverConcurrently) {
  auto pool = InstancePool::Create(MakeInstances(2), {"m"});
  ASSERT_TRUE(pool.ok());
  constexpr int kJobs = 2000;
  std::atomic<int> done{0};
  std::mutex mu;
  std::set<ModelInstance*> used;
  for (int i = 0; i < kJobs; ++i) {
    ASSERT_TRUE((*pool)->Submit([&](ModelInstance& inst) {
      EXPECT_TRUE(inst.Run({}, {}, nullptr, {}).ok());
      {
        std::lock_guard l(mu);
        used.insert(&inst);
      }
      done++;
    }).ok());
  }
  (*pool)->Shutdown();  // drains the queue
  EXPECT_EQ(done.load(), kJobs);
  for (ModelInstance* inst : used) EXPECT_FALSE(static_cast<RecordingInstance*>(inst)->overlapped_);
}

TEST(InstancePoolTest, ShutdownFinishesQueuedWorkAndRejectsNew) {
  auto pool = InstancePool::Create(MakeInstances(1), {"m"});
  ASSERT_TRUE(pool.ok());
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> ran{0};
  ASSERT_TRUE((*pool)->Submit([&](ModelInstance&) { gate.wait(); ran++; }).ok());
  ASSERT_TRUE((*pool)->Submit([&](ModelInstance&) { ran++; }).ok());
  std::thread stopper([&] { (*pool)->Shutdown(); });
  // Shutdown has begun or will: new work is refused once it has; release the first job.
  while ((*pool)->Submit([&](ModelInstance&) { ran++; }).ok()) {
    std::this_thread::yield();
  }
  release.set_value();
  stopper.join();
  EXPECT_GE(ran.load(), 2);  // both queued jobs ran (plus any accepted before shutdown began)
  EXPECT_EQ((*pool)->Submit([](ModelInstance&) {}).code(), StatusCode::kUnavailable);
}

TEST(InstancePoolTest, RunOnEachInstanceVisitsAll) {
  auto pool = InstancePool::Create(MakeInstances(3), {"m"});
  ASSERT_TRUE(pool.ok());
  std::set<ModelInstance*> seen;
  EXPECT_TRUE((*pool)->RunOnEachInstance([&](ModelInstance& i) {
    seen.insert(&i);
    return Status::Ok();
  }).ok());
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ((*pool)->RunOnEachInstance([](ModelInstance&) { return Internal("boom"); }).code(),
            StatusCode::kInternal);
}

}  // namespace
}  // namespace harrier
