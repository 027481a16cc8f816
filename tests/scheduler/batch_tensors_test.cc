#include "scheduler/batch_tensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "util/bytes_tensor.h"
#include "util/scheduled_request_builder.h"

namespace harrier {
namespace {

using ::harrier::testing::Strings;

using testing::BatchItem;
using testing::Floats;

// A BYTES tensor of `items` x 1 elements holding `strings` (one per item), serialized.
std::unique_ptr<ScheduledRequest> BytesItem(const std::vector<std::string>& strings) {
  auto s = std::make_unique<ScheduledRequest>();
  s->request = std::make_unique<InferenceRequest>();
  auto body = std::make_shared<std::string>();
  for (const std::string& str : strings) {
    uint32_t len = static_cast<uint32_t>(str.size());
    body->append(reinterpret_cast<const char*>(&len), 4);
    body->append(str);
  }
  Tensor t;
  t.name = "TEXT";
  t.dtype = DataType::kBytes;
  t.shape = {static_cast<int64_t>(strings.size()), 1};
  t.data = reinterpret_cast<const std::byte*>(body->data());
  t.size_bytes = body->size();
  s->request->inputs.push_back(t);
  s->request->body = body;
  s->output_names = {"TEXT_OUT"};
  return s;
}

// What an identity model returns for `inputs`: a copy of each, owned by the output.
std::vector<Tensor> Identity(const std::vector<Tensor>& inputs, const std::string& name) {
  std::vector<Tensor> out;
  for (const Tensor& in : inputs) {
    auto copy = AllocateTensorBuffer(in.size_bytes);
    std::memcpy(copy.get(), in.data, in.size_bytes);
    Tensor t = in;
    t.name = name;
    t.data = copy.get();
    t.owner = std::move(copy);
    out.push_back(std::move(t));
  }
  return out;
}

TEST(BatchTensorsTest, CompatibilityIgnoresOnlyTheBatchDim) {
  EXPECT_TRUE(BatchCompatible(*BatchItem(1, 1, 4), *BatchItem(2, 3, 4)));
  EXPECT_FALSE(BatchCompatible(*BatchItem(1, 1, 4), *BatchItem(2, 1, 5)));
  auto renamed = BatchItem(1);
  renamed->request->inputs[0].name = "OTHER";
  EXPECT_FALSE(BatchCompatible(*BatchItem(1), *renamed));
}

TEST(BatchTensorsTest, GatherThenSplitGivesEachRequestItsOwnRowsWithoutCopies) {
  auto a = BatchItem(1.0f, 1);
  auto b = BatchItem(2.0f, 2);
  auto c = BatchItem(3.0f, 1);
  std::vector<ScheduledRequest*> requests{a.get(), b.get(), c.get()};
  BatchInputBuffers buffers;
  std::vector<Tensor> batched;
  ASSERT_TRUE(GatherInputs(requests, &buffers, &batched).ok());
  ASSERT_EQ(batched.size(), 1u);
  EXPECT_EQ(batched[0].shape, (Shape{4, 4}));
  EXPECT_EQ(batched[0].size_bytes, 16 * sizeof(float));
  const std::byte* first_buffer = batched[0].data;

  std::vector<Tensor> outputs = Identity(batched, "OUTPUT0");
  std::vector<std::vector<Tensor>> parts;
  const std::vector<int64_t> counts{1, 2, 1};
  ASSERT_TRUE(SplitOutputs(outputs, counts, &parts).ok());
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0][0].shape, (Shape{1, 4}));
  EXPECT_EQ(parts[1][0].shape, (Shape{2, 4}));
  EXPECT_EQ(Floats(parts[0][0]), std::vector<float>(4, 1.0f));
  EXPECT_EQ(Floats(parts[1][0]), std::vector<float>(8, 2.0f));
  EXPECT_EQ(Floats(parts[2][0]), std::vector<float>(4, 3.0f));
  // The parts point into the batch output and keep it alive.
  EXPECT_EQ(parts[1][0].data, outputs[0].data + 4 * sizeof(float));
  EXPECT_EQ(parts[2][0].owner, outputs[0].owner);

  // The next, smaller batch reuses the same input buffer.
  std::vector<ScheduledRequest*> two{a.get(), c.get()};
  ASSERT_TRUE(GatherInputs(two, &buffers, &batched).ok());
  EXPECT_EQ(batched[0].data, first_buffer);
  EXPECT_EQ(Floats(batched[0]), (std::vector<float>{1, 1, 1, 1, 3, 3, 3, 3}));
}

TEST(BatchTensorsTest, BytesTensorsConcatenateAndSplitByElement) {
  auto a = BytesItem({"hello"});
  auto b = BytesItem({"", "harrier"});
  std::vector<ScheduledRequest*> requests{a.get(), b.get()};
  BatchInputBuffers buffers;
  std::vector<Tensor> batched;
  ASSERT_TRUE(GatherInputs(requests, &buffers, &batched).ok());
  EXPECT_EQ(batched[0].shape, (Shape{3, 1}));
  EXPECT_EQ(Strings(batched[0]), (std::vector<std::string>{"hello", "", "harrier"}));
  std::vector<std::vector<Tensor>> parts;
  const std::vector<int64_t> counts{1, 2};
  ASSERT_TRUE(SplitOutputs(Identity(batched, "TEXT_OUT"), counts, &parts).ok());
  EXPECT_EQ(Strings(parts[0][0]), std::vector<std::string>{"hello"});
  EXPECT_EQ(Strings(parts[1][0]), (std::vector<std::string>{"", "harrier"}));
}

// A burst of large batches does not hold its memory for good: after a period in which every
// call fitted in a quarter of the buffer, it shrinks to the period's largest (probe 30).
TEST(BatchTensorsTest, InputBuffersGrowForABurstThenShrinkToWhatThePeriodNeeded) {
  constexpr int kPeriod = BatchInputBuffers::kShrinkPeriod;
  BatchInputBuffers buffers;
  buffers.Get(0, 1000);
  EXPECT_EQ(buffers.held_bytes(), 1024u);
  buffers.Get(0, 1 << 20);  // the burst, in the first period
  EXPECT_EQ(buffers.held_bytes(), size_t{1} << 20);
  for (int i = 2; i < kPeriod; ++i) buffers.Get(0, 1000);
  EXPECT_EQ(buffers.held_bytes(), size_t{1} << 20);  // the period that held the burst keeps it
  // A period of small calls, one of 3000 bytes: kept until the period's last call, then the
  // size its largest needed.
  for (int i = 1; i < kPeriod; ++i) {
    buffers.Get(0, i == 7 ? 3000 : 1000);
    ASSERT_EQ(buffers.held_bytes(), size_t{1} << 20) << i;
  }
  buffers.Get(0, 1000);
  EXPECT_EQ(buffers.held_bytes(), 4096u);
  // Within four times its period's largest, a buffer stays.
  for (int i = 0; i < kPeriod; ++i) buffers.Get(0, 1500);
  EXPECT_EQ(buffers.held_bytes(), 4096u);
  // Each input has its own buffer; Release frees them all.
  buffers.Get(1, 100);
  EXPECT_EQ(buffers.held_bytes(), 4096u + 128u);
  buffers.Release();
  EXPECT_EQ(buffers.held_bytes(), 0u);
  EXPECT_NE(buffers.Get(1, 100), nullptr);
  EXPECT_EQ(buffers.held_bytes(), 128u);
}

TEST(BatchTensorsTest, OutputWithTheWrongBatchDimIsAnInternalError) {
  auto a = BatchItem(1.0f, 2);
  std::vector<Tensor> outputs = Identity(a->request->inputs, "OUTPUT0");  // batch dim 2
  std::vector<std::vector<Tensor>> parts;
  const std::vector<int64_t> counts{1, 2};
  EXPECT_EQ(SplitOutputs(outputs, counts, &parts).code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace harrier
