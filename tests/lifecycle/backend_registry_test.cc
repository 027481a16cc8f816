// BackendRegistry: which engine each model version gets, from its config and its files — a
// table over configs and directories, with a fake file system.
#include "lifecycle/backend_registry.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "repository/model_config.pb.h"
#include "util/fake_backend.h"
#include "util/fake_generative_model.h"

namespace harrier {
namespace {

// A file system that holds exactly `files`.
class Files final : public FileSystem {
 public:
  explicit Files(std::set<std::string> files) : files_(std::move(files)) {}
  StatusOr<FileType> GetFileType(const std::string& path) const override {
    return files_.count(path) ? FileType::kRegular : FileType::kNotFound;
  }
  StatusOr<std::vector<DirectoryEntry>> ListDirectory(const std::string&) const override {
    return std::vector<DirectoryEntry>{};
  }
  StatusOr<std::string> ReadFile(const std::string&) const override { return std::string(); }

 private:
  std::set<std::string> files_;
};

// A second tensor engine, to see the choice made per model.
class OtherTensorBackend final : public testing::FakeBackend {
 public:
  std::string_view name() const override { return "other"; }
  std::string_view platform() const override { return "other_platform"; }
  std::string_view default_model_filename() const override { return "model.other"; }
};

inference::ModelConfig Config(std::string backend, std::string platform,
                              std::string filename = "") {
  inference::ModelConfig c;
  c.set_backend(backend);
  c.set_platform(platform);
  c.set_default_model_filename(filename);
  return c;
}

enum class Want { kOnnx, kOther, kGenerator, kMissing };

struct Row {
  const char* what;
  inference::ModelConfig config;
  std::set<std::string> files;  // in the version directory
  bool with_generator;
  bool with_other;
  Want want;
};

TEST(BackendRegistryTest, ChoosesPerModel) {
  const std::vector<Row> rows = {
      {"nothing named, an onnx file", Config("", ""), {"model.onnx"}, true, false, Want::kOnnx},
      {"nothing named, no file at all", Config("", ""), {}, true, false, Want::kOnnx},
      {"nothing named, a gguf file", Config("", ""), {"model.gguf"}, true, false, Want::kGenerator},
      {"a gguf beside an onnx file is the tensor model's",
       Config("", ""),
       {"model.gguf", "model.onnx"},
       true,
       false,
       Want::kOnnx},
      {"the config's file name for the generator",
       Config("", "", "tiny.gguf"),
       {"tiny.gguf"},
       true,
       false,
       Want::kGenerator},
      {"backend llama.cpp", Config("llama.cpp", ""), {"model.onnx"}, true, false, Want::kGenerator},
      {"platform llama.cpp", Config("", "llama.cpp"), {}, true, false, Want::kGenerator},
      {"another backend named is a tensor model's",
       Config("onnxruntime", ""),
       {"model.gguf"},
       true,
       false,
       Want::kOnnx},
      {"an unknown platform goes to the default, and is named as unknown",
       Config("", "tensorflow_savedmodel"),
       {"model.gguf"},
       true,
       false,
       Want::kOnnx},
      // A build without llama.cpp: the model is still a generator's, which cannot load.
      {"no generator: backend llama.cpp",
       Config("llama.cpp", ""),
       {},
       false,
       false,
       Want::kMissing},
      {"no generator: a gguf file", Config("", ""), {"model.gguf"}, false, false, Want::kMissing},
      {"no generator: platform llama.cpp is not recognised",
       Config("", "llama.cpp"),
       {},
       false,
       false,
       Want::kOnnx},
      {"no generator: the config's file name is not looked for",
       Config("", "", "tiny.gguf"),
       {"tiny.gguf"},
       false,
       false,
       Want::kOnnx},
      // Two tensor engines: by name, by platform, by file; the first added is the default.
      {"two engines: by backend", Config("other", ""), {"model.onnx"}, true, true, Want::kOther},
      {"two engines: by platform", Config("", "other_platform"), {}, true, true, Want::kOther},
      {"two engines: by file", Config("", ""), {"model.other"}, true, true, Want::kOther},
      {"two engines: the default", Config("", ""), {}, true, true, Want::kOnnx},
      {"two engines: a gguf beside the other engine's file",
       Config("", ""),
       {"model.gguf", "model.other"},
       true,
       true,
       Want::kOther},
  };
  testing::FakeBackend onnx;
  OtherTensorBackend other;
  testing::FakeGenerativeBackend llama;
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    BackendRegistry registry;
    registry.AddTensorBackend(&onnx);
    if (row.with_other) registry.AddTensorBackend(&other);
    if (row.with_generator) registry.AddGenerativeBackend(&llama);
    std::set<std::string> paths;
    for (const std::string& f : row.files) paths.insert("/repo/m/1/" + f);
    const Files files(paths);
    const BackendRegistry::Choice c = registry.Choose(row.config, "/repo/m/1/", files);
    switch (row.want) {
      case Want::kOnnx:
        EXPECT_FALSE(c.generative);
        EXPECT_EQ(c.tensor, &onnx);
        break;
      case Want::kOther:
        EXPECT_FALSE(c.generative);
        EXPECT_EQ(c.tensor, &other);
        break;
      case Want::kGenerator:
        EXPECT_TRUE(c.generative);
        EXPECT_EQ(c.generator, &llama);
        break;
      case Want::kMissing:
        EXPECT_TRUE(c.generative);
        EXPECT_EQ(c.generator, nullptr);
        EXPECT_EQ(c.missing, "llama.cpp");
        break;
    }
  }
}

// A `backend` that is no engine's name ("llamacpp", the name users guess) is reported as such,
// naming the engines there are; before, the default backend looked for model.onnx (probe 29).
TEST(BackendRegistryTest, ABackendNameNoEngineHasIsUnknown) {
  testing::FakeBackend onnx;
  testing::FakeGenerativeBackend llama;
  BackendRegistry registry;
  registry.AddTensorBackend(&onnx);
  registry.AddGenerativeBackend(&llama);
  const Files files({"/repo/m/1/model.gguf"});
  EXPECT_EQ(registry.Choose(Config("llamacpp", ""), "/repo/m/1/", files).unknown, "llamacpp");
  EXPECT_EQ(registry.Choose(Config(std::string(onnx.name()), ""), "/repo/m/1/", files).unknown, "");
  EXPECT_EQ(registry.Choose(Config("", "tensorflow_savedmodel"), "/repo/m/1/", files).unknown,
            "");  // a platform, not a backend:
  // named before any file is opened (probe 63: the load spoke of a missing model.onnx).
  EXPECT_EQ(
      registry.Choose(Config("", "tensorrt_plan"), "/repo/m/1/", Files({"/repo/m/1/model.plan"}))
          .unknown_platform,
      "tensorrt_plan");
  EXPECT_EQ(registry.Choose(Config("", std::string(onnx.platform())), "/repo/m/1/", files)
                .unknown_platform,
            "");
  EXPECT_EQ(registry.Choose(Config(std::string(onnx.name()), "tensorrt_plan"), "/repo/m/1/", files)
                .unknown_platform,
            "");  // the backend named decides; auto-complete refuses the platform
  EXPECT_EQ(registry.Names(),
            "'" + std::string(onnx.name()) + "', '" + std::string(llama.name()) + "'");
}

TEST(BackendRegistryTest, TheFirstTensorBackendIsTheDefault) {
  BackendRegistry registry;
  EXPECT_EQ(registry.default_tensor_backend(), nullptr);
  testing::FakeBackend onnx;
  OtherTensorBackend other;
  registry.AddTensorBackend(&onnx);
  registry.AddTensorBackend(&other);
  EXPECT_EQ(registry.default_tensor_backend(), &onnx);
}

}  // namespace
}  // namespace harrier
