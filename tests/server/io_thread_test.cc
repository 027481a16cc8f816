// IoThread's busy polling (src/server/io_thread.h): after a request from a sole requester that
// kept the thread busy, the thread polls for busy_poll before it sleeps, so work that comes
// meanwhile is run by the poll; with two requesters, or after a poll that found nothing, it
// sleeps at once.
#include "server/io_thread.h"

#include <gtest/gtest.h>

#include <boost/asio/post.hpp>
#include <chrono>
#include <future>
#include <thread>

namespace harrier::server_internal {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

class IoThreadBusyPollTest : public ::testing::Test {
 protected:
  void Start(std::chrono::microseconds busy_poll, int max_spinners) {
    io_ = std::make_shared<IoThread>();
    io_->busy_poll = busy_poll;
    io_->thread = std::thread([this, max_spinners] { io_->Run(max_spinners); });
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
  // A request from `who`, noted on the thread as the connections note theirs.
  void Request(const void* who) {
    RunThere([this, who] { io_->NoteRequest(who, steady_clock::now(), milliseconds(1)); });
  }

  std::shared_ptr<IoThread> io_;
  const int a_ = 0, b_ = 0;
};

TEST_F(IoThreadBusyPollTest, WorkAfterASoleRequestersRequestIsCaughtByThePoll) {
  Start(std::chrono::seconds(5), 1);
  Request(&a_);  // the thread had just gone idle: the spin pays
  std::this_thread::sleep_for(milliseconds(20));
  RunThere([] {});  // comes while the thread polls
  EXPECT_EQ(io_->busy_poll_catches.load(), 1u);
}

TEST_F(IoThreadBusyPollTest, TwoRequestersMeanNoPoll) {
  Start(std::chrono::seconds(5), 1);
  RunThere([this] {
    io_->NoteRequest(&a_, steady_clock::now(), milliseconds(1));
    io_->NoteRequest(&b_, steady_clock::now(), milliseconds(1));
  });
  std::this_thread::sleep_for(milliseconds(20));
  RunThere([] {});
  EXPECT_EQ(io_->busy_poll_catches.load(), 0u);
}

TEST_F(IoThreadBusyPollTest, APollThatFindsNothingEndsTheSpinning) {
  Start(std::chrono::microseconds(1'000), 1);
  Request(&a_);
  std::this_thread::sleep_for(milliseconds(50));  // the 1 ms poll has ended empty
  RunThere([] {});
  RunThere([] {});  // still asleep: no request since said that polling pays
  EXPECT_EQ(io_->busy_poll_catches.load(), 0u);
}

TEST_F(IoThreadBusyPollTest, ARequestAfterALongIdleSpellIsNoReasonToPoll) {
  Start(std::chrono::microseconds(1'000), 1);
  std::this_thread::sleep_for(milliseconds(20));  // idle longer than busy_poll
  // Noted as if it had come in now, the thread idle since before the sleep.
  boost::asio::post(io_->ioc,
                    [this] { io_->NoteRequest(&a_, steady_clock::now(), milliseconds(1)); });
  std::this_thread::sleep_for(milliseconds(20));
  RunThere([] {});
  EXPECT_EQ(io_->busy_poll_catches.load(), 0u);
}

TEST_F(IoThreadBusyPollTest, NoSpinnersAllowedMeansNoPoll) {
  Start(std::chrono::seconds(5), 0);
  Request(&a_);
  std::this_thread::sleep_for(milliseconds(20));
  RunThere([] {});
  EXPECT_EQ(io_->busy_poll_catches.load(), 0u);
}

}  // namespace
}  // namespace harrier::server_internal
