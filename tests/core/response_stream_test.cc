#include "harrier/response_stream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace harrier {
namespace {

ResponseStream::Taken TakeFrom(ResponseStream& stream) {
  ResponseStream::Taken taken;
  stream.Take(&taken);
  return taken;
}

TEST(ResponseStreamTest, PartsWaitUntilTakenInOrderAndCountAsPendingUntilComplete) {
  ResponseStream stream;
  std::vector<std::string> written;
  stream.Write("ab", [&](bool ok) { written.push_back(ok ? "ab ok" : "ab lost"); });
  stream.Write("cde", {});
  EXPECT_EQ(stream.pending_bytes(), 5u);
  auto taken = TakeFrom(stream);
  EXPECT_EQ(taken.bytes, "abcde");  // one run of bytes, in the order written
  EXPECT_EQ(taken.on_written.size(), 1u);
  EXPECT_FALSE(taken.finished);
  EXPECT_EQ(stream.pending_bytes(), 5u);  // taken is not sent
  EXPECT_TRUE(written.empty());
  stream.Complete(taken, true);
  EXPECT_EQ(stream.pending_bytes(), 0u);
  EXPECT_EQ(written, std::vector<std::string>{"ab ok"});
  EXPECT_TRUE(taken.empty());  // ready for the next Take
}

TEST(ResponseStreamTest, TheTransportsBufferBecomesTheStreamsNextOne) {
  ResponseStream stream;
  ResponseStream::Taken taken;
  stream.Write(std::string(1000, 'a'), {});
  stream.Take(&taken);
  const char* first = taken.bytes.data();
  stream.Complete(taken, true);
  stream.Write("b", {});  // into the buffer the stream got back at the first Take (none yet)
  stream.Take(&taken);    // swaps: the stream now holds the 1000-byte buffer
  EXPECT_EQ(taken.bytes, "b");
  stream.Complete(taken, true);
  stream.Write("c", {});
  stream.Take(&taken);
  EXPECT_EQ(taken.bytes, "c");
  EXPECT_EQ(taken.bytes.data(), first);  // the first buffer came back: nothing was allocated
  EXPECT_GE(taken.bytes.capacity(), 1000u);
}

TEST(ResponseStreamTest, WakesTheTransportOnceAfterAnEmptyTake) {
  ResponseStream stream;
  int wakes = 0;
  stream.Attach([&] { ++wakes; });
  stream.Write("x", {});
  EXPECT_EQ(wakes, 0);  // the transport has not asked yet
  EXPECT_EQ(TakeFrom(stream).bytes, "x");
  EXPECT_TRUE(TakeFrom(stream).empty());  // now it waits
  stream.Write("y", {});
  stream.Write("z", {});
  EXPECT_EQ(wakes, 1);
  EXPECT_EQ(TakeFrom(stream).bytes, "yz");
  EXPECT_TRUE(TakeFrom(stream).empty());
  stream.Write("", {});  // nothing to send, nothing to report: no wake-up
  EXPECT_EQ(wakes, 1);
  stream.Finish({{"grpc-status", "0"}});
  EXPECT_EQ(wakes, 2);
  auto taken = TakeFrom(stream);
  EXPECT_TRUE(taken.finished);
  ASSERT_EQ(taken.trailers.size(), 1u);
  EXPECT_FALSE(TakeFrom(stream).finished);  // reported once
}

TEST(ResponseStreamTest, AnEmptyPartWithAReportIsTakenAndReported) {
  ResponseStream stream;
  int wakes = 0;
  stream.Attach([&] { ++wakes; });
  EXPECT_TRUE(TakeFrom(stream).empty());
  bool reported = false;
  stream.Write("", [&](bool ok) { reported = ok; });
  EXPECT_EQ(wakes, 1);
  auto taken = TakeFrom(stream);
  EXPECT_FALSE(taken.empty());
  stream.Complete(taken, true);
  EXPECT_TRUE(reported);
}

TEST(ResponseStreamTest, WritesAfterFinishOrAbandonAreDroppedAndSaySo) {
  ResponseStream stream;
  stream.Finish();
  bool after_finish = true;
  stream.Write("x", [&](bool ok) { after_finish = ok; });
  EXPECT_FALSE(after_finish);

  ResponseStream other;
  std::vector<bool> results;
  other.Write("queued", [&](bool ok) { results.push_back(ok); });
  other.Abandon();
  EXPECT_TRUE(other.abandoned());
  other.Write("late", [&](bool ok) { results.push_back(ok); });
  EXPECT_EQ(results, (std::vector<bool>{false, false}));
  EXPECT_EQ(other.pending_bytes(), 0u);
  EXPECT_TRUE(TakeFrom(other).empty());
}

}  // namespace
}  // namespace harrier
