#include "core/compute_cores.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace harrier {
namespace {

using std::chrono::milliseconds;

TEST(ComputeCoresTest, TakersThatFitTogetherRunAtOnce) {
  ComputeCores cores(4);
  ComputeCores::Lease a = cores.Take(2);
  ComputeCores::Lease b = cores.Take(2);  // fits beside a: no wait
  EXPECT_EQ(cores.free_cores(), 0);
  EXPECT_EQ(a.cores() + b.cores(), 4);
}

TEST(ComputeCoresTest, ATakerThatDoesNotFitWaitsForTheCoresToComeBack) {
  ComputeCores cores(2);
  std::optional<ComputeCores::Lease> first(cores.Take(2));
  std::atomic<bool> ran{false};
  auto second = std::async(std::launch::async, [&] {
    ComputeCores::Lease lease = cores.Take(2);
    ran = true;
  });
  EXPECT_EQ(second.wait_for(milliseconds(100)), std::future_status::timeout);
  EXPECT_FALSE(ran);
  first.reset();  // gives them back
  ASSERT_EQ(second.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(ran);
  EXPECT_EQ(cores.free_cores(), 2);
}

TEST(ComputeCoresTest, MoreThreadsThanCoresTakeTheWholeBudget) {
  ComputeCores cores(2);
  {
    ComputeCores::Lease lease = cores.Take(16);
    EXPECT_EQ(lease.cores(), 2);
    EXPECT_EQ(cores.free_cores(), 0);
  }
  EXPECT_EQ(cores.free_cores(), 2);
  EXPECT_EQ(cores.Take(0).cores(), 1);  // at least one
}

// First come, first served: a large taker in line is not passed by small ones that came later
// (each would fit in what is free, and a steady stream of them would starve it).
TEST(ComputeCoresTest, TurnsAreTakenInArrivalOrder) {
  ComputeCores cores(2);
  std::optional<ComputeCores::Lease> one(cores.Take(1));
  std::mutex mu;
  std::vector<int> order;
  auto big = std::async(std::launch::async, [&] {
    ComputeCores::Lease lease = cores.Take(2);
    std::lock_guard lock(mu);
    order.push_back(2);
  });
  // Until the big one is in line (it waits: one core is free, it needs two).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (cores.waiting() < 1 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(milliseconds(1));
  ASSERT_EQ(cores.waiting(), 1);
  auto small = std::async(std::launch::async, [&] {
    ComputeCores::Lease lease = cores.Take(1);
    std::lock_guard lock(mu);
    order.push_back(1);
  });
  while (cores.waiting() < 2 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(milliseconds(1));
  ASSERT_EQ(cores.waiting(), 2);  // behind big, though one core is free
  EXPECT_EQ(small.wait_for(milliseconds(50)), std::future_status::timeout);
  one.reset();
  ASSERT_EQ(big.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  ASSERT_EQ(small.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(order, (std::vector<int>{2, 1}));
  EXPECT_EQ(cores.free_cores(), 2);
}

}  // namespace
}  // namespace harrier
