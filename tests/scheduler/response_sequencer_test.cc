#include "scheduler/response_sequencer.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace harrier {
namespace {

TEST(ResponseSequencerTest, DeliversInOrderWhateverOrderAnswersArriveIn) {
  ResponseSequencer s;
  std::vector<int> delivered;
  s.Deliver(3, [&] { delivered.push_back(3); });
  s.Deliver(2, [&] { delivered.push_back(2); });
  EXPECT_TRUE(delivered.empty());  // 1 has not been answered
  s.Deliver(1, [&] { delivered.push_back(1); });
  EXPECT_EQ(delivered, (std::vector<int>{1, 2, 3}));
  s.Deliver(4, [&] { delivered.push_back(4); });
  EXPECT_EQ(delivered, (std::vector<int>{1, 2, 3, 4}));
}

TEST(ResponseSequencerTest, ConcurrentAnswersStayInOrder) {
  ResponseSequencer s;
  std::vector<int> delivered;  // only touched by deliveries, which never overlap
  constexpr int kThreads = 4, kPerThread = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int order = 1 + i * kThreads + t;
        s.Deliver(order, [&delivered, order] { delivered.push_back(order); });
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(delivered.size(), static_cast<size_t>(kThreads * kPerThread));
  for (size_t i = 0; i < delivered.size(); ++i) EXPECT_EQ(delivered[i], static_cast<int>(i) + 1);
}

}  // namespace
}  // namespace harrier
