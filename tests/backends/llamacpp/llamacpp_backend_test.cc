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

}  // namespace
}  // namespace harrier
