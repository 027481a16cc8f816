#include "protocol/kserve/model_control_parameters.h"

#include <gtest/gtest.h>

namespace harrier::kserve {
namespace {

StatusOr<ModelLoadOptions> Load(const std::string& body) {
  return ParseModelControlParameters(std::make_shared<const std::string>(body),
                                     ModelControlAction::kLoad);
}

TEST(ModelControlParametersTest, AnEmptyBodyAsksForNothing) {
  auto none = ParseModelControlParameters(nullptr, ModelControlAction::kLoad);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->config_json);
  EXPECT_TRUE(none->files.empty());
  EXPECT_TRUE(Load("  \n").ok());
}

TEST(ModelControlParametersTest, FileOverridesAreDecodedFromBase64) {
  auto o = Load(R"({"parameters": {"config": "{\"max_batch_size\": 2}",
                                    "file:1/model.onnx": "AP9vbm54",
                                    "file:2/sub/w.bin": ""}})");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->config_json, R"({"max_batch_size": 2})");
  ASSERT_EQ(o->files.size(), 2u);
  EXPECT_EQ(o->files[0].path, "1/model.onnx");
  EXPECT_EQ(o->files[0].content, std::string("\x00\xffonnx", 6));
  EXPECT_EQ(o->files[1].path, "2/sub/w.bin");
  EXPECT_EQ(o->files[1].content, "");
}

TEST(ModelControlParametersTest, PathsAreLeftToTheModelManager) {
  // The same rules hold for gRPC, so they are checked in one place (ValidateFileOverrides).
  auto o = Load(R"({"parameters": {"file:../x": "eA=="}})");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->files.at(0).path, "../x");
}

TEST(ModelControlParametersTest, RefusesBadBodiesNamingTheProblem) {
  struct Case {
    std::string body;
    std::string words;
  };
  const std::vector<Case> cases = {
      {R"({"parameters": {"file:1/model.onnx": "not base64!"}})", "is not base64"},
      {R"({"parameters": {"file:1/model.onnx": "Zm9"}})", "is not base64"},
      {R"({"parameters": {"file:1/model.onnx": "Zm9v\nYmFy"}})", "is not base64"},
      {R"({"parameters": {"file:1/model.onnx": 12}})", "must be a string"},
      {R"({"parameters": {"config": 1}})", "parameters.config must be a string"},
      {R"({"parameters": {"config": "{}", "config": "{}"}})", "config is given more than once"},
      {R"({"parameters": {}, "parameters": {}})", "'parameters' is given more than once"},
      {R"({"parameters": {"unload_dependents": true}})", "unknown parameter"},
      {R"({"parameters": []})", "'parameters' must be an object"},
      {R"({"other": {}})", "unknown field 'other'"},
      {R"([1])", "must be a JSON object"},
      {R"({"parameters": )", "failed to parse the request JSON buffer"},
  };
  for (const Case& c : cases) {
    auto o = Load(c.body);
    ASSERT_FALSE(o.ok()) << c.body;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_NE(o.status().message().find(c.words), std::string::npos)
        << c.body << ": " << o.status().ToString();
  }
}

TEST(ModelControlParametersTest, UnloadTakesOnlyUnloadDependents) {
  auto unload = [](const std::string& body) {
    return ParseModelControlParameters(std::make_shared<const std::string>(body),
                                       ModelControlAction::kUnload);
  };
  EXPECT_TRUE(unload(R"({"parameters": {"unload_dependents": true}})").ok());
  EXPECT_EQ(unload(R"({"parameters": {"file:1/model.onnx": "eA=="}})").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(unload(R"({"parameters": {"unload_dependents": "yes"}})").status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace harrier::kserve
