#include "backends/llamacpp/llamacpp_backend.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

namespace harrier {
namespace {

const std::string kModel =
    std::string(HARRIER_SOURCE_DIR) + "/../shared/models/llama-2-tiny-random.gguf";

TEST(LlamaCppBackendTest, LoadsWithTheConfigsParameters) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "no " << kModel;
  LlamaCppBackend backend;
  EXPECT_EQ(backend.name(), "llama.cpp");
  EXPECT_EQ(backend.default_model_filename(), "model.gguf");
  auto model = backend.Load(kModel, {{"context_size", "256"}, {"parallel_sequences", "2"}}, 1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->context_size(), 256);
  (*model)->Shutdown(Unavailable("the test is done"));
}

TEST(LlamaCppBackendTest, RefusesBadParametersByName) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "no " << kModel;
  LlamaCppBackend backend;
  auto bad = backend.Load(kModel, {{"context_size", "lots"}}, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("context_size"), std::string::npos);
  auto refused = backend.Load(kModel, {{"parallel_sequences", "0"}}, 1);
  EXPECT_FALSE(refused.ok());
  auto missing = backend.Load("/nonexistent/model.gguf", {}, 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

// batch_size below the default ubatch_size (512) alone loads: an unset ubatch_size follows it
// (probe 29: "ubatch_size must be in 1..batch_size" for a parameter never set). One that is
// set above batch_size is still refused, naming both values.
TEST(LlamaCppBackendTest, ASmallerBatchSizeAloneTakesTheMicroBatchDownWithIt) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "no " << kModel;
  LlamaCppBackend backend;
  auto model = backend.Load(kModel, {{"context_size", "256"}, {"batch_size", "256"}}, 1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  (*model)->Shutdown(Unavailable("the test is done"));
  auto refused = backend.Load(
      kModel, {{"context_size", "256"}, {"batch_size", "256"}, {"ubatch_size", "512"}}, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "ubatch_size (512) must be in 1..batch_size (256)");
}

}  // namespace
}  // namespace harrier
