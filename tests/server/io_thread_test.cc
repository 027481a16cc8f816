// IoThread's busy polling (src/server/io_thread.h): after a request from a sole requester that
// came soon after the thread went idle, the thread polls until busy_poll after its last work;
// a request from another connection, or one after a longer pause, ends it; at most
// max_pollers threads poll at once.
#include "server/io_thread.h"

#include <gtest/gtest.h>

#include <boost/asio/post.hpp>
#include <chrono>
#include <atomic>
#include <future>
#include <stdexcept>
#include <string>
#include <vector>
#include <thread>

namespace harrier::server_internal {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

class IoThreadBusyPollTest : public ::testing::Test {
 protected:
  void Start(std::chrono::microseconds busy_poll, int max_pollers) {
    io_ = std::make_shared<IoThread>();
    io_->busy_poll = busy_poll;
    io_->max_pollers = max_pollers;
    io_->thread = std::thread([this] { io_->ioc.run(); });
  }
  void TearDown() override {
    io_->work.reset();
    io_->ioc.stop();
    io_->thread.join();
  }
  // Runs `fn` on the thread and waits until it has run.
  void RunThere(std::function<void()> fn) {
    std::promise<void> done;
    boost::asio::post(io_->ioc, [&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  }
  // A request from `who`, noted on the thread as the connections note theirs; returns once
  // the thread has run what the request posted (a request's own handlers take longer than
  // that in a server, so the next request never overtakes them there).
  void Request(const void* who) {
    RunThere([this, who] { io_->NoteRequest(who, steady_clock::now(), milliseconds(1)); });
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  // Requests from `who` until the thread polls (the first that comes soon enough after it went
  // idle starts the poll; on a loaded machine, under a sanitizer, a request can come too late);
  // false if none did in 50 tries.
  bool RequestUntilPolling(const void* who) {
    for (int i = 0; i < 50; ++i) {
      Request(who);
      for (int j = 0; j < 20 && !io_->polling.load(); ++j)
        std::this_thread::sleep_for(milliseconds(1));
      if (io_->polling.load()) return true;
    }
    return false;
  }

  std::shared_ptr<IoThread> io_;
  const int a_ = 0, b_ = 0;
};

TEST_F(IoThreadBusyPollTest, ASoleRequestersNextRequestFindsTheThreadPolling) {
  Start(std::chrono::seconds(5), 1);
  Request(&a_);  // the thread's first: when it went idle before is not known yet
  EXPECT_FALSE(io_->polling.load());
  Request(&a_);  // soon after the thread went idle: polling pays
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_TRUE(io_->polling.load());
  Request(&a_);
  EXPECT_EQ(io_->busy_poll_catches.load(), 1u);
  EXPECT_TRUE(io_->polling.load());
}

TEST_F(IoThreadBusyPollTest, ARequestFromAnotherConnectionStopsThePoll) {
  Start(std::chrono::seconds(5), 1);
  Request(&a_);
  ASSERT_TRUE(RequestUntilPolling(&a_));
  // Two requesters within the sole-requester window (noted in one handler, so that no delay
  // of this thread can stretch the gap between them past the window).
  RunThere([this] {
    io_->NoteRequest(&a_, steady_clock::now(), milliseconds(1));
    io_->NoteRequest(&b_, steady_clock::now(), milliseconds(1));
  });
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(io_->polling.load());
}

TEST_F(IoThreadBusyPollTest, APollEndsBusyPollAfterTheLastWorkAndDoesNotComeBackAfterAPause) {
  Start(std::chrono::microseconds(2'000), 1);
  Request(&a_);
  Request(&a_);
  std::this_thread::sleep_for(milliseconds(50));  // the 2 ms poll has ended empty
  EXPECT_FALSE(io_->polling.load());
  Request(&a_);  // 50 ms idle: a 2 ms poll would not have caught it, so none after it
  std::this_thread::sleep_for(std::chrono::microseconds(500));
  EXPECT_FALSE(io_->polling.load());
  EXPECT_EQ(io_->busy_poll_catches.load(), 0u);
}

TEST_F(IoThreadBusyPollTest, NoPollerAllowedMeansNoPoll) {
  Start(std::chrono::seconds(5), 0);
  Request(&a_);
  Request(&a_);
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(io_->polling.load());
}

TEST_F(IoThreadBusyPollTest, AtMostMaxPollersThreadsPollAtOnce) {
  Start(std::chrono::seconds(5), 1);
  Request(&a_);
  ASSERT_TRUE(RequestUntilPolling(&a_));
  auto other = std::make_shared<IoThread>();
  other->busy_poll = std::chrono::seconds(5);
  other->max_pollers = 1;
  std::thread t([&] { other->ioc.run(); });
  for (int i = 0; i < 2; ++i) {
    std::promise<void> done;
    boost::asio::post(other->ioc, [&] {
      other->NoteRequest(&a_, steady_clock::now(), milliseconds(1));
      done.set_value();
    });
    done.get_future().wait();
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(other->polling.load());
  EXPECT_TRUE(io_->polling.load());
  other->work.reset();
  other->ioc.stop();
  t.join();
}

}  // namespace
}  // namespace harrier::server_internal

namespace harrier::server_internal {
namespace {

// IoThread::PostCoalesced: functions from other threads run on the I/O thread, in the order
// they came, many after one wake-up; a function that throws leaves the rest to run; functions
// never run are destroyed with the thread.
class IoThreadPostCoalescedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    io_ = std::make_shared<IoThread>();
    io_->thread = std::thread([this] {
      for (;;) {
        try {
          io_->ioc.run();
          return;
        } catch (const std::runtime_error&) {
          caught_.fetch_add(1);  // as the server's I/O threads do: log it and run on
        }
      }
    });
  }
  void Stop() {
    if (io_ == nullptr || !io_->thread.joinable()) return;
    io_->work.reset();
    io_->ioc.stop();
    io_->thread.join();
  }
  void TearDown() override { Stop(); }

  std::shared_ptr<IoThread> io_;
  std::atomic<int> caught_{0};
};

TEST_F(IoThreadPostCoalescedTest, RunsOnTheThreadInTheOrderPosted) {
  constexpr int kPosts = 2000;
  std::vector<int> order;
  std::atomic<int> elsewhere{0};
  std::promise<void> done;
  for (int i = 0; i < kPosts; ++i) {
    io_->PostCoalesced([&, i] {
      if (std::this_thread::get_id() != io_->thread.get_id()) elsewhere.fetch_add(1);
      order.push_back(i);
      if (i == kPosts - 1) done.set_value();
    });
  }
  ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(elsewhere.load(), 0);
  ASSERT_EQ(order.size(), static_cast<size_t>(kPosts));
  for (int i = 0; i < kPosts; ++i) ASSERT_EQ(order[i], i);
}

TEST_F(IoThreadPostCoalescedTest, AFunctionThatThrowsLeavesTheRestToRun) {
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  std::vector<std::string> ran;
  std::promise<void> done;
  // Held on the thread until all three are queued, so that they run from one wake-up.
  io_->PostCoalesced([open] { open.wait(); });
  io_->PostCoalesced([&] {
    ran.push_back("a");
    throw std::runtime_error("a handler failed");
  });
  io_->PostCoalesced([&] { ran.push_back("b"); });
  io_->PostCoalesced([&] {
    ran.push_back("c");
    done.set_value();
  });
  gate.set_value();
  ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(ran, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(caught_.load(), 1);
}

TEST_F(IoThreadPostCoalescedTest, FunctionsNeverRunAreDestroyedWithTheThread) {
  Stop();  // the context no longer runs: what is posted now stays queued
  auto held = std::make_shared<int>(7);
  for (int i = 0; i < 3; ++i) io_->PostCoalesced([held] {});
  EXPECT_EQ(held.use_count(), 4);
  io_.reset();
  EXPECT_EQ(held.use_count(), 1);
}

}  // namespace
}  // namespace harrier::server_internal
