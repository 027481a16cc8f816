#include "lifecycle/warmup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "repository/model_config_parser.h"

namespace harrier {
namespace {

using ::testing::HasSubstr;

inference::ModelConfig Config(const std::string& text) {
  StatusOr<inference::ModelConfig> config = ParseModelConfig(text, "config.pbtxt");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config.ok() ? *config : inference::ModelConfig{};
}

ModelIO Io(int64_t max_batch_size, std::vector<IoSpec> inputs) {
  ModelIO io;
  io.max_batch_size = max_batch_size;
  io.inputs = std::move(inputs);
  return io;
}

// No model_warmup: one zero-filled sample, free dims as 1, the batch dim 1, optional inputs left
// out.
TEST(BuildWarmupTest, TheImplicitWarmupIsOneZeroFilledSample) {
  const ModelIO io = Io(4, {{"x", DataType::kFp32, {-1, 3}, std::nullopt, false},
                            {"text", DataType::kBytes, {2}, std::nullopt, false},
                            {"extra", DataType::kFp32, {3}, std::nullopt, true}});
  StatusOr<Warmup> warmup = BuildWarmup(Config(""), io, "/nonexistent");
  ASSERT_TRUE(warmup.ok()) << warmup.status().ToString();
  EXPECT_TRUE(warmup->implicit);
  EXPECT_EQ(warmup->skipped, "");
  ASSERT_EQ(warmup->samples.size(), 1u);
  const std::vector<Tensor>& inputs = warmup->samples[0].inputs;
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].shape, (Shape{1, 1, 3}));
  EXPECT_EQ(inputs[0].size_bytes, 12u);
  EXPECT_EQ(inputs[1].shape, (Shape{1, 2}));
  EXPECT_EQ(inputs[1].size_bytes, 8u);  // two empty strings: two zero lengths
  for (const Tensor& t : inputs)
    for (size_t i = 0; i < t.size_bytes; ++i) EXPECT_EQ(t.data[i], std::byte{0});
}

// Shapes a config may declare for free dims: past the budget (or past int64) the implicit
// warm-up is not built, and says why.
TEST(BuildWarmupTest, AnImplicitWarmupPastTheBudgetIsSkipped) {
  for (int64_t dim : {int64_t{1} << 29, int64_t{1} << 62}) {
    SCOPED_TRACE(dim);
    const ModelIO io = Io(0, {{"small", DataType::kFp32, {4}, std::nullopt, false},
                              {"x", DataType::kFp32, {1, dim}, std::nullopt, false}});
    StatusOr<Warmup> warmup = BuildWarmup(Config(""), io, "/nonexistent");
    ASSERT_TRUE(warmup.ok()) << warmup.status().ToString();
    EXPECT_TRUE(warmup->implicit);
    EXPECT_TRUE(warmup->samples.empty());
    EXPECT_THAT(warmup->skipped, HasSubstr("input 'x' of shape [1," + std::to_string(dim) + "]"));
    EXPECT_THAT(warmup->skipped, HasSubstr("past the 1073741824 bytes"));
  }
}

// Configured samples are sized together before any is allocated: each of these alone fits.
TEST(BuildWarmupTest, ConfiguredSamplesShareOneBudget) {
  const ModelIO io = Io(0, {{"x", DataType::kFp32, {-1}, std::nullopt, false}});
  const std::string sample =
      " batch_size: 1 inputs { key: \"x\" value: { data_type: TYPE_FP32 dims: [201326592] "
      "zero_data: true } } }";
  StatusOr<Warmup> warmup =
      BuildWarmup(Config("model_warmup [{ name: \"a\"" + sample + ", { name: \"b\"" + sample + "]"),
                  io, "/nonexistent");
  ASSERT_FALSE(warmup.ok());
  EXPECT_EQ(warmup.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(warmup.status().message(),
              HasSubstr("warm-up 'b', input 'x': shape [201326592] takes more than the 268435456 "
                        "bytes left of the 1073741824 a model's warm-up may take in all"));
}

TEST(BuildWarmupTest, ConfiguredSamplesAreBuiltWithTheirCounts) {
  const ModelIO io = Io(8, {{"x", DataType::kInt32, {-1}, std::nullopt, false}});
  StatusOr<Warmup> warmup = BuildWarmup(
      Config("model_warmup [{ name: \"r\" batch_size: 2 count: 3 inputs { key: \"x\" value: { "
             "data_type: TYPE_INT32 dims: [5] random_data: true } } }]"),
      io, "/nonexistent");
  ASSERT_TRUE(warmup.ok()) << warmup.status().ToString();
  EXPECT_FALSE(warmup->implicit);
  ASSERT_EQ(warmup->samples.size(), 1u);
  EXPECT_EQ(warmup->samples[0].name, "r");
  EXPECT_EQ(warmup->samples[0].runs, 3);
  ASSERT_EQ(warmup->samples[0].inputs.size(), 1u);
  EXPECT_EQ(warmup->samples[0].inputs[0].shape, (Shape{2, 5}));
  EXPECT_EQ(warmup->samples[0].inputs[0].size_bytes, 40u);
}

}  // namespace
}  // namespace harrier
