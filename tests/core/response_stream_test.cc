#include "harrier/response_stream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace harrier {
namespace {

TEST(ResponseStreamTest, PartsWaitUntilTakenInOrderAndCountAsPendingUntilComplete) {
  ResponseStream stream;
  std::vector<std::string> written;
  stream.Write("ab", [&](bool ok) { written.push_back(ok ? "ab ok" : "ab lost"); });
  stream.Write("cde", {});
  EXPECT_EQ(stream.pending_bytes(), 5u);
  auto taken = stream.Take();
  ASSERT_EQ(taken.parts.size(), 2u);
  EXPECT_EQ(taken.parts[0].bytes, "ab");
  EXPECT_EQ(taken.parts[1].bytes, "cde");
  EXPECT_FALSE(taken.finished);
  EXPECT_EQ(stream.pending_bytes(), 5u);  // taken is not sent
  stream.Complete(taken.parts[0], true);
  stream.Complete(taken.parts[1], true);
  EXPECT_EQ(stream.pending_bytes(), 0u);
  EXPECT_EQ(written, std::vector<std::string>{"ab ok"});
}

TEST(ResponseStreamTest, WakesTheTransportOnceAfterAnEmptyTake) {
  ResponseStream stream;
  int wakes = 0;
  stream.Attach([&] { ++wakes; });
  stream.Write("x", {});
  EXPECT_EQ(wakes, 0);  // the transport has not asked yet
  EXPECT_EQ(stream.Take().parts.size(), 1u);
  EXPECT_TRUE(stream.Take().parts.empty());  // now it waits
  stream.Write("y", {});
  stream.Write("z", {});
  EXPECT_EQ(wakes, 1);
  EXPECT_EQ(stream.Take().parts.size(), 2u);
  EXPECT_TRUE(stream.Take().parts.empty());
  stream.Finish({{"grpc-status", "0"}});
  EXPECT_EQ(wakes, 2);
  auto taken = stream.Take();
  EXPECT_TRUE(taken.finished);
  ASSERT_EQ(taken.trailers.size(), 1u);
  EXPECT_FALSE(stream.Take().finished);  // reported once
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
  EXPECT_TRUE(other.Take().parts.empty());
}

}  // namespace
}  // namespace harrier
