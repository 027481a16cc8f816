#include "protocol/openai/stream_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "util/fake_clock.h"

namespace harrier::openai {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

std::vector<uint64_t> Ids(const StreamReader::Batch& batch) {
  std::vector<uint64_t> ids;
  for (const StreamEvent& e : batch.events) ids.push_back(e.id);
  return ids;
}

std::vector<std::string> Data(const StreamReader::Batch& batch) {
  std::vector<std::string> data;
  for (const StreamEvent& e : batch.events) data.push_back(e.data);
  return data;
}

class StreamStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<StreamStore> Make(StreamStoreOptions options = {}) {
    options.clock = &clock_;
    StatusOr<std::unique_ptr<StreamStore>> store = StreamStore::Create(options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return std::move(store).value();
  }

  std::unique_ptr<StreamReader> ResumeOk(StreamStore& store, const std::string& id,
                                         uint64_t last_event_id,
                                         std::function<void()> wake = nullptr) {
    StatusOr<std::unique_ptr<StreamReader>> reader =
        store.Resume(id, "", last_event_id, std::move(wake));
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    return reader.ok() ? std::move(reader).value() : nullptr;
  }

  testing::FakeClock clock_;
};

TEST_F(StreamStoreTest, IdsAreRandom128BitHex) {
  auto store = Make();
  const std::string a = store->Open("");
  const std::string b = store->Open("");
  EXPECT_THAT(a, MatchesRegex("[0-9a-f]{32}"));
  EXPECT_NE(a, b);
}

TEST_F(StreamStoreTest, ACollidingIdIsDrawnAgain) {
  class Repeating : public RandomSource {
   public:
    // 0, 0, 1, 2, ...: the second Open draws the first's id before a fresh one.
    void Fill(std::span<std::byte> out) override {
      const int v = calls_ == 0 ? 0 : calls_ - 1;
      ++calls_;
      for (std::byte& b : out) b = static_cast<std::byte>(v);
    }

   private:
    int calls_ = 0;
  } random;
  StreamStoreOptions options;
  options.random = &random;
  auto store = Make(options);
  EXPECT_EQ(store->Open(""), std::string(32, '0'));
  EXPECT_EQ(store->Open(""), "01010101010101010101010101010101");
}

TEST_F(StreamStoreTest, AppendNumbersEventsAndResumeReadsOnAfterAnId) {
  auto store = Make();
  const std::string id = store->Open("");
  for (int i = 1; i <= 5; ++i) {
    StatusOr<uint64_t> event_id = store->Append(id, "e" + std::to_string(i));
    ASSERT_TRUE(event_id.ok());
    EXPECT_EQ(*event_id, static_cast<uint64_t>(i));
  }
  struct Case {
    uint64_t last_event_id;
    std::vector<uint64_t> ids;
  } cases[] = {{0, {1, 2, 3, 4, 5}}, {2, {3, 4, 5}}, {4, {5}}, {5, {}}};
  for (const Case& c : cases) {
    auto reader = ResumeOk(*store, id, c.last_event_id);
    const StreamReader::Batch batch = reader->Read();
    EXPECT_EQ(Ids(batch), c.ids) << c.last_event_id;
    EXPECT_EQ(batch.state, StreamState::kLive);
    EXPECT_TRUE(batch.drained);
  }
  auto reader = ResumeOk(*store, id, 3);
  EXPECT_EQ(Data(reader->Read()), (std::vector<std::string>{"e4", "e5"}));
  EXPECT_TRUE(reader->Read().events.empty());  // nothing new
}

TEST_F(StreamStoreTest, ReadInBatches) {
  auto store = Make();
  const std::string id = store->Open("");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store->Append(id, "x").ok());
  ASSERT_TRUE(store->Finish(id).ok());
  auto reader = ResumeOk(*store, id, 0);
  StreamReader::Batch batch = reader->Read(2);
  EXPECT_EQ(Ids(batch), (std::vector<uint64_t>{1, 2}));
  EXPECT_FALSE(batch.drained);
  batch = reader->Read(2);
  EXPECT_EQ(Ids(batch), (std::vector<uint64_t>{3, 4}));
  EXPECT_FALSE(batch.drained);
  batch = reader->Read(2);
  EXPECT_EQ(Ids(batch), (std::vector<uint64_t>{5}));
  EXPECT_TRUE(batch.drained);
  EXPECT_EQ(batch.state, StreamState::kFinished);
}

TEST_F(StreamStoreTest, ALiveReaderIsWokenForNewEventsAndTheEnd) {
  auto store = Make();
  const std::string id = store->Open("");
  ASSERT_TRUE(store->Append(id, "a").ok());
  int wakes = 0;
  auto reader = ResumeOk(*store, id, 0, [&] { ++wakes; });
  ASSERT_TRUE(store->Append(id, "b").ok());
  EXPECT_EQ(wakes, 0);  // not waiting yet: it has not read
  EXPECT_EQ(Ids(reader->Read()), (std::vector<uint64_t>{1, 2}));
  ASSERT_TRUE(store->Append(id, "c").ok());
  EXPECT_EQ(wakes, 1);
  ASSERT_TRUE(store->Append(id, "d").ok());
  EXPECT_EQ(wakes, 1);  // once per drained Read, not once per event
  StreamReader::Batch batch = reader->Read();
  EXPECT_EQ(Ids(batch), (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(batch.state, StreamState::kLive);
  ASSERT_TRUE(store->Finish(id).ok());
  EXPECT_EQ(wakes, 2);
  batch = reader->Read();
  EXPECT_TRUE(batch.events.empty());
  EXPECT_EQ(batch.state, StreamState::kFinished);
  ASSERT_TRUE(store->Finish(id).ok());  // twice is fine
  EXPECT_EQ(wakes, 2);
}

TEST_F(StreamStoreTest, ADestroyedReaderIsNotWoken) {
  auto store = Make();
  const std::string id = store->Open("");
  int wakes = 0;
  {
    auto reader = ResumeOk(*store, id, 0, [&] { ++wakes; });
    reader->Read();
  }
  ASSERT_TRUE(store->Append(id, "a").ok());
  EXPECT_EQ(wakes, 0);
}

TEST_F(StreamStoreTest, FinishedStreamsExpireAfterRetention) {
  StreamStoreOptions options;
  options.retention = minutes(5);
  auto store = Make(options);
  const std::string finished = store->Open("");
  const std::string live = store->Open("");
  ASSERT_TRUE(store->Append(finished, "x").ok());
  ASSERT_TRUE(store->Finish(finished).ok());
  clock_.Advance(minutes(5) - seconds(1));
  auto reader = ResumeOk(*store, finished, 0);
  EXPECT_EQ(reader->Read().state, StreamState::kFinished);
  clock_.Advance(seconds(1));
  // Expired: unknown to Resume, and gone for the reader that was reading it.
  StatusOr<std::unique_ptr<StreamReader>> again = store->Resume(finished, "", 0, nullptr);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(again.status().message(), HasSubstr("unknown or expired stream"));
  EXPECT_EQ(reader->Read().state, StreamState::kGone);
  // A live stream never expires by time.
  clock_.Advance(minutes(60));
  EXPECT_TRUE(store->Append(live, "still here").ok());
  EXPECT_EQ(store->stats().streams, 1u);
  EXPECT_EQ(store->stats().live_streams, 1u);
}

TEST_F(StreamStoreTest, RetentionStartsAtFinish) {
  StreamStoreOptions options;
  options.retention = seconds(10);
  auto store = Make(options);
  const std::string id = store->Open("");
  clock_.Advance(minutes(30));  // a long generation
  ASSERT_TRUE(store->Finish(id).ok());
  clock_.Advance(seconds(9));
  EXPECT_TRUE(store->Resume(id, "", 0, nullptr).ok());
  clock_.Advance(seconds(1));
  EXPECT_EQ(store->Resume(id, "", 0, nullptr).status().code(), StatusCode::kNotFound);
}

TEST_F(StreamStoreTest, UnknownStreamsAndBadPositions) {
  auto store = Make();
  const std::string id = store->Open("");
  ASSERT_TRUE(store->Append(id, "a").ok());
  const std::string unknown(32, 'f');
  EXPECT_EQ(store->Resume(unknown, "", 0, nullptr).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Append(unknown, "x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Finish(unknown).code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Resume("", "", 0, nullptr).status().code(), StatusCode::kNotFound);
  StatusOr<std::unique_ptr<StreamReader>> past = store->Resume(id, "", 2, nullptr);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(past.status().message(), HasSubstr("past the stream's last event (1)"));
  ASSERT_TRUE(store->Finish(id).ok());
  EXPECT_EQ(store->Append(id, "late").status().code(), StatusCode::kInvalidArgument);
}

// With API keys, a stream is its key's: another key that has the id is answered as if the stream
// did not exist (a key with the inference scope could read, and keep alive, another's stream).
TEST_F(StreamStoreTest, OnlyTheKeyThatOpenedAStreamResumesIt) {
  auto store = Make();
  const std::string id = store->Open("team-a");
  ASSERT_TRUE(store->Append(id, "a").ok());
  EXPECT_EQ(store->Resume(id, "team-b", 0, nullptr).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Resume(id, "", 0, nullptr).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store->Resume(id, "team-a", 0, nullptr).ok());
  const std::string open = store->Open("");  // no keys: no owner
  EXPECT_EQ(store->Resume(open, "team-a", 0, nullptr).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store->Resume(open, "", 0, nullptr).ok());
}

TEST_F(StreamStoreTest, ByteBoundEvictsFinishedStreamsFirstThenTheOldestLive) {
  StreamStoreOptions options;
  const size_t event = 100;  // bytes of each event, with its overhead
  options.max_total_bytes = 4 * event;
  auto store = Make(options);
  const std::string data(event - kEventOverheadBytes, 'x');
  const std::string live_old = store->Open("");
  const std::string finished = store->Open("");
  const std::string live_new = store->Open("");
  ASSERT_TRUE(store->Append(live_old, data).ok());
  ASSERT_TRUE(store->Append(finished, data).ok());
  ASSERT_TRUE(store->Finish(finished).ok());
  ASSERT_TRUE(store->Append(live_new, data).ok());
  ASSERT_TRUE(store->Append(live_new, data).ok());
  EXPECT_EQ(store->stats().total_bytes, 4 * event);
  int wakes = 0;
  auto old_reader = ResumeOk(*store, live_old, 0, [&] { ++wakes; });
  old_reader->Read();
  // Full: the finished stream goes first, although it is younger than live_old.
  ASSERT_TRUE(store->Append(live_new, data).ok());
  EXPECT_EQ(store->Resume(finished, "", 0, nullptr).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store->Resume(live_old, "", 0, nullptr).ok());
  // Then the oldest live one; its reader is woken and sees it gone.
  ASSERT_TRUE(store->Append(live_new, data).ok());
  EXPECT_EQ(wakes, 1);
  EXPECT_EQ(old_reader->Read().state, StreamState::kGone);
  EXPECT_EQ(store->Append(live_old, data).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->stats().total_bytes, 4 * event);
  EXPECT_EQ(store->stats().streams, 1u);
}

TEST_F(StreamStoreTest, AStreamThatCannotFitAloneIsDroppedAndTheOthersStay) {
  StreamStoreOptions options;
  options.max_total_bytes = 1000;
  auto store = Make(options);
  const std::string small = store->Open("");
  ASSERT_TRUE(store->Append(small, "keep me").ok());
  const std::string big = store->Open("");
  ASSERT_TRUE(store->Append(big, std::string(600, 'b')).ok());
  StatusOr<uint64_t> over = store->Append(big, std::string(400, 'b'));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(store->Append(big, "x").status().code(), StatusCode::kNotFound);
  auto reader = ResumeOk(*store, small, 0);
  EXPECT_EQ(Data(reader->Read()), (std::vector<std::string>{"keep me"}));
  EXPECT_EQ(store->stats().total_bytes, 7 + kEventOverheadBytes);
}

TEST_F(StreamStoreTest, StreamCountBoundEvictsOldestFinishedThenOldestLive) {
  StreamStoreOptions options;
  options.max_streams = 3;
  auto store = Make(options);
  const std::string a = store->Open("");
  const std::string b = store->Open("");
  const std::string c = store->Open("");
  ASSERT_TRUE(store->Finish(c).ok());
  ASSERT_TRUE(store->Finish(b).ok());
  const std::string d = store->Open("");  // evicts c: finished before b
  EXPECT_EQ(store->Resume(c, "", 0, nullptr).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store->Resume(b, "", 0, nullptr).ok());
  const std::string e = store->Open("");  // evicts b, the last finished one
  EXPECT_EQ(store->Resume(b, "", 0, nullptr).status().code(), StatusCode::kNotFound);
  const std::string f = store->Open("");  // all live now: evicts a, the oldest
  EXPECT_EQ(store->Resume(a, "", 0, nullptr).status().code(), StatusCode::kNotFound);
  for (const std::string& id : {d, e, f}) EXPECT_TRUE(store->Resume(id, "", 0, nullptr).ok());
  EXPECT_EQ(store->stats().streams, 3u);
}

// Probe 47: one key's flood of short streams evicted every other key's stream within a second.
// The owner holding the most pays: a key that floods evicts its own oldest streams.
TEST_F(StreamStoreTest, AKeyThatFloodsTheStreamBoundEvictsOnlyItsOwn) {
  StreamStoreOptions options;
  options.max_streams = 4;
  auto store = Make(options);
  const std::string victim = store->Open("alice");
  ASSERT_TRUE(store->Append(victim, "mine").ok());
  ASSERT_TRUE(store->Finish(victim).ok());  // the oldest finished stream of all
  std::vector<std::string> flood;
  for (int i = 0; i < 100; ++i) {
    flood.push_back(store->Open("mallory"));
    ASSERT_TRUE(store->Finish(flood.back()).ok());
  }
  EXPECT_TRUE(store->Resume(victim, "alice", 0, nullptr).ok());
  EXPECT_EQ(store->stats().streams, 4u);
  // Mallory keeps its 3 newest.
  for (size_t i = 0; i < flood.size(); ++i) {
    EXPECT_EQ(store->Resume(flood[i], "mallory", 0, nullptr).ok(), i >= flood.size() - 3) << i;
  }
  // Another key opening a stream takes its share from the largest holder too.
  const std::string bob = store->Open("bob");
  EXPECT_TRUE(store->Resume(victim, "alice", 0, nullptr).ok());
  EXPECT_TRUE(store->Resume(bob, "bob", 0, nullptr).ok());
  EXPECT_EQ(store->Resume(flood[97], "mallory", 0, nullptr).status().code(), StatusCode::kNotFound);
}

TEST_F(StreamStoreTest, AKeyThatFloodsTheByteBoundEvictsOnlyItsOwn) {
  StreamStoreOptions options;
  const size_t event = 100;  // bytes of each event, with its overhead
  options.max_total_bytes = 10 * event;
  auto store = Make(options);
  const std::string data(event - kEventOverheadBytes, 'x');
  const std::string victim = store->Open("alice");
  ASSERT_TRUE(store->Append(victim, data).ok());
  ASSERT_TRUE(store->Append(victim, data).ok());
  ASSERT_TRUE(store->Finish(victim).ok());
  const std::string big = store->Open("mallory");
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(store->Append(big, data).ok());
  ASSERT_TRUE(store->Finish(big).ok());
  const std::string next = store->Open("mallory");
  // Full: Mallory holds 800 bytes, Alice 200: Mallory's finished stream goes.
  ASSERT_TRUE(store->Append(next, data).ok());
  EXPECT_EQ(store->Resume(big, "mallory", 0, nullptr).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store->Resume(victim, "alice", 0, nullptr).ok());
  // Mallory's next streams go before Alice's, down to the one it appends to.
  const std::string third = store->Open("mallory");
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(store->Append(third, data).ok());
  EXPECT_EQ(store->stats().total_bytes, 10 * event);
  ASSERT_TRUE(store->Append(third, data).ok());
  EXPECT_EQ(store->Resume(next, "mallory", 0, nullptr).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store->Resume(victim, "alice", 0, nullptr).ok());
  // A live stream is never evicted for its own event: with nothing else of Mallory's left,
  // the byte bound takes Alice's (a stream is bounded by the whole store only).
  ASSERT_TRUE(store->Append(third, data).ok());
  EXPECT_EQ(store->Resume(victim, "alice", 0, nullptr).status().code(), StatusCode::kNotFound);
}

TEST_F(StreamStoreTest, CreateRefusesZeroBounds) {
  StreamStoreOptions zero_retention;
  zero_retention.retention = seconds(0);
  StreamStoreOptions zero_bytes;
  zero_bytes.max_total_bytes = 0;
  StreamStoreOptions zero_streams;
  zero_streams.max_streams = 0;
  for (const StreamStoreOptions& options : {zero_retention, zero_bytes, zero_streams}) {
    EXPECT_EQ(StreamStore::Create(options).status().code(), StatusCode::kInvalidArgument);
  }
}

// A producer appends while a reader on another thread follows through wake-ups: the reader
// gets every event once, in order, then the end.
TEST_F(StreamStoreTest, ConcurrentProducerAndReader) {
  auto store = Make();
  const std::string id = store->Open("");
  constexpr int kEvents = 2000;
  std::mutex mu;
  std::condition_variable cv;
  bool woken = false;
  auto reader = ResumeOk(*store, id, 0, [&] {
    // Runs under the store's lock: only signal.
    std::lock_guard lock(mu);
    woken = true;
    cv.notify_one();
  });
  std::thread producer([&] {
    for (int i = 1; i <= kEvents; ++i) ASSERT_TRUE(store->Append(id, std::to_string(i)).ok());
    ASSERT_TRUE(store->Finish(id).ok());
  });
  uint64_t expected = 1;
  while (true) {
    const StreamReader::Batch batch = reader->Read(7);
    for (const StreamEvent& e : batch.events) {
      ASSERT_EQ(e.id, expected);
      ASSERT_EQ(e.data, std::to_string(expected));
      ++expected;
    }
    if (!batch.drained) continue;
    if (batch.state != StreamState::kLive) {
      EXPECT_EQ(batch.state, StreamState::kFinished);
      break;
    }
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return woken; });
    woken = false;
  }
  producer.join();
  EXPECT_EQ(expected, static_cast<uint64_t>(kEvents) + 1);
}

}  // namespace
}  // namespace harrier::openai
