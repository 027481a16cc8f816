#include "repository/config_autocomplete.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "repository/model_config_parser.h"

namespace harrier {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr std::string_view kBackend = "onnxruntime";
constexpr std::string_view kPlatform = "onnxruntime_onnx";

inference::ModelConfig Config(std::string_view text) {
  StatusOr<inference::ModelConfig> config = ParseModelConfig(text, "test.pbtxt");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config.ok() ? *config : inference::ModelConfig();
}

// An image classifier: x FP32 [-1,3,224,224] -> probs FP32 [-1,1000].
ModelSignature Batchable() {
  return {
      {{"x", DataType::kFp32, {-1, 3, 224, 224}}}, {{"probs", DataType::kFp32, {-1, 1000}}}, {}};
}

// The same model exported with a fixed batch of 1.
ModelSignature FixedBatch() {
  return {{{"x", DataType::kFp32, {1, 3, 224, 224}}}, {{"probs", DataType::kFp32, {1, 1000}}}, {}};
}

Status Complete(const ModelSignature& sig, inference::ModelConfig* config,
                const AutoCompleteOptions& options = {}) {
  return AutoCompleteConfig(sig, "m", kBackend, kPlatform, config, options);
}

TEST(AutoCompleteConfigTest, NoConfigBatchableModelGetsBatching) {
  inference::ModelConfig config;
  ASSERT_TRUE(Complete(Batchable(), &config).ok());
  EXPECT_EQ(config.name(), "m");
  EXPECT_EQ(config.backend(), "onnxruntime");
  EXPECT_EQ(config.platform(), "onnxruntime_onnx");
  EXPECT_TRUE(config.has_max_batch_size());
  EXPECT_EQ(config.max_batch_size(), 4);
  EXPECT_TRUE(config.has_dynamic_batching());
  ASSERT_EQ(config.input_size(), 1);
  EXPECT_EQ(config.input(0).name(), "x");
  EXPECT_EQ(config.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_THAT(config.input(0).dims(), ElementsAre(3, 224, 224));
  EXPECT_FALSE(config.input(0).has_reshape());
  ASSERT_EQ(config.output_size(), 1);
  EXPECT_THAT(config.output(0).dims(), ElementsAre(1000));
  ASSERT_EQ(config.instance_group_size(), 1);
  EXPECT_EQ(config.instance_group(0).name(), "m_0");
  EXPECT_EQ(config.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(config.instance_group(0).count(), 1);
}

TEST(AutoCompleteConfigTest, NoConfigFixedBatchModelDoesNotBatch) {
  inference::ModelConfig config;
  ASSERT_TRUE(Complete(FixedBatch(), &config).ok());
  EXPECT_EQ(config.max_batch_size(), 0);
  EXPECT_FALSE(config.has_dynamic_batching());
  EXPECT_THAT(config.input(0).dims(), ElementsAre(1, 3, 224, 224));
  EXPECT_THAT(config.output(0).dims(), ElementsAre(1, 1000));
}

TEST(AutoCompleteConfigTest, OneFixedFirstDimTurnsBatchingOff) {
  ModelSignature sig = Batchable();
  sig.outputs.push_back({"aux", DataType::kInt64, {2}});
  inference::ModelConfig config;
  ASSERT_TRUE(Complete(sig, &config).ok());
  EXPECT_EQ(config.max_batch_size(), 0);
  EXPECT_THAT(config.input(0).dims(), ElementsAre(-1, 3, 224, 224));
}

TEST(AutoCompleteConfigTest, DefaultMaxBatchSizeOption) {
  inference::ModelConfig config;
  AutoCompleteOptions options;
  options.default_max_batch_size = 16;
  ASSERT_TRUE(Complete(Batchable(), &config, options).ok());
  EXPECT_EQ(config.max_batch_size(), 16);

  config.Clear();
  options.default_max_batch_size = 1;  // batching of one: no dynamic batcher to add
  ASSERT_TRUE(Complete(Batchable(), &config, options).ok());
  EXPECT_EQ(config.max_batch_size(), 1);
  EXPECT_FALSE(config.has_dynamic_batching());

  config.Clear();
  options.default_max_batch_size = 0;
  ASSERT_TRUE(Complete(Batchable(), &config, options).ok());
  EXPECT_EQ(config.max_batch_size(), 0);
  EXPECT_THAT(config.input(0).dims(), ElementsAre(-1, 3, 224, 224));
}

TEST(AutoCompleteConfigTest, ExplicitZeroMaxBatchSizeIsKept) {
  inference::ModelConfig config = Config("max_batch_size: 0");
  ASSERT_TRUE(Complete(Batchable(), &config).ok());
  EXPECT_EQ(config.max_batch_size(), 0);
  EXPECT_FALSE(config.has_dynamic_batching());
  EXPECT_THAT(config.input(0).dims(), ElementsAre(-1, 3, 224, 224));
}

TEST(AutoCompleteConfigTest, ExplicitMaxBatchSizeKeepsUserDynamicBatching) {
  inference::ModelConfig config =
      Config("max_batch_size: 8 dynamic_batching { max_queue_delay_microseconds: 50 }");
  ASSERT_TRUE(Complete(Batchable(), &config).ok());
  EXPECT_EQ(config.max_batch_size(), 8);
  EXPECT_EQ(config.dynamic_batching().max_queue_delay_microseconds(), 50u);
}

TEST(AutoCompleteConfigTest, ExplicitMaxBatchSizeWithoutDynamicBatchingAddsNone) {
  inference::ModelConfig config = Config("max_batch_size: 8");
  ASSERT_TRUE(Complete(Batchable(), &config).ok());
  EXPECT_FALSE(config.has_dynamic_batching());
}

TEST(AutoCompleteConfigTest, MaxBatchSizeOnFixedBatchModelIsAnError) {
  inference::ModelConfig config = Config("max_batch_size: 8");
  Status s = Complete(FixedBatch(), &config);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("max_batch_size is 8"), HasSubstr("input 'x'"),
                                 HasSubstr("[1,3,224,224]")));
}

TEST(AutoCompleteConfigTest, FullShapesInConfigMeanNoBatching) {
  // The user wrote the model's full shape: batching is not what they asked for.
  inference::ModelConfig config =
      Config("input [ { name: 'x' data_type: TYPE_FP32 dims: [-1, 3, 224, 224] } ]");
  ASSERT_TRUE(Complete(Batchable(), &config).ok());
  EXPECT_EQ(config.max_batch_size(), 0);
  EXPECT_THAT(config.output(0).dims(), ElementsAre(-1, 1000));
}

TEST(AutoCompleteConfigTest, PartialConfigIsCompleted) {
  inference::ModelConfig config = Config(R"pb(
    output
    [ { name: "probs" label_filename: "labels.txt" }] instance_group
    [ { count: 0 }]
  )pb");
  ASSERT_TRUE(Complete(Batchable(), &config).ok());
  EXPECT_EQ(config.max_batch_size(), 4);
  ASSERT_EQ(config.input_size(), 1);  // appended from the model
  EXPECT_THAT(config.input(0).dims(), ElementsAre(3, 224, 224));
  ASSERT_EQ(config.output_size(), 1);
  EXPECT_EQ(config.output(0).label_filename(), "labels.txt");
  EXPECT_EQ(config.output(0).data_type(), inference::TYPE_FP32);  // filled in
  EXPECT_THAT(config.output(0).dims(), ElementsAre(1000));        // filled in
  EXPECT_EQ(config.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(config.instance_group(0).count(), 1);
}

TEST(AutoCompleteConfigTest, MissingTensorsAreAppendedInModelOrder) {
  ModelSignature sig{
      {{"a", DataType::kInt64, {2}}, {"b", DataType::kInt64, {2}}, {"c", DataType::kBool, {2}}},
      {{"y", DataType::kFp32, {2}}},
      {}};
  inference::ModelConfig config = Config("input [ { name: 'b' } ]");
  ASSERT_TRUE(Complete(sig, &config).ok());
  ASSERT_EQ(config.input_size(), 3);
  EXPECT_EQ(config.input(0).name(), "b");
  EXPECT_EQ(config.input(1).name(), "a");
  EXPECT_EQ(config.input(2).name(), "c");
  EXPECT_EQ(config.input(2).data_type(), inference::TYPE_BOOL);
}

TEST(AutoCompleteConfigTest, CompleteConfigIsLeftAsIs) {
  inference::ModelConfig config = Config(R"pb(
    name: "m"
    backend: "onnxruntime"
    max_batch_size: 2 input
    [ {
      name: "x"
      data_type: TYPE_FP32
      dims: [ 3, 224, 224 ]
    }] output
    [ {
      name: "probs"
      data_type: TYPE_FP32
      dims: [ 1000 ]
    }] instance_group
    [ { name: "cpus" kind: KIND_CPU count: 3 }]
  )pb");
  ASSERT_TRUE(Complete(Batchable(), &config).ok());
  EXPECT_EQ(config.max_batch_size(), 2);
  EXPECT_EQ(config.instance_group(0).name(), "cpus");
  EXPECT_EQ(config.instance_group(0).count(), 3);
  EXPECT_EQ(config.input_size(), 1);
}

TEST(AutoCompleteConfigTest, ConfigDimsMayFixModelVariableDims) {
  ModelSignature sig{
      {{"x", DataType::kFp32, {-1, 3, -1, -1}}}, {{"y", DataType::kFp32, {-1, -1}}}, {}};
  inference::ModelConfig config = Config(R"pb(
    input
    [ {
      name: "x"
      dims: [ 3, 224, -1 ]
    }]
  )pb");
  ASSERT_TRUE(Complete(sig, &config).ok());
  EXPECT_EQ(config.max_batch_size(), 4);
  EXPECT_THAT(config.input(0).dims(), ElementsAre(3, 224, -1));
  EXPECT_THAT(config.output(0).dims(), ElementsAre(-1));
}

TEST(AutoCompleteConfigTest, ScalarPerItemBecomesOneReshapedToScalar) {
  ModelSignature sig{{{"s", DataType::kInt32, {-1}}}, {{"y", DataType::kInt32, {-1}}}, {}};
  inference::ModelConfig config;
  ASSERT_TRUE(Complete(sig, &config).ok());
  EXPECT_EQ(config.max_batch_size(), 4);
  EXPECT_THAT(config.input(0).dims(), ElementsAre(1));
  ASSERT_TRUE(config.input(0).has_reshape());
  EXPECT_TRUE(config.input(0).reshape().shape().empty());

  // A config that says the same thing explicitly is accepted.
  config = Config("max_batch_size: 2 input [ { name: 's' dims: [1] reshape { shape: [] } } ]");
  ASSERT_TRUE(Complete(sig, &config).ok());
}

TEST(AutoCompleteConfigTest, ReshapeIsComparedWithTheModel) {
  ModelSignature sig{{{"img", DataType::kFp32, {-1, 784}}}, {{"y", DataType::kFp32, {-1, 10}}}, {}};
  inference::ModelConfig config =
      Config("input [ { name: 'img' dims: [28, 28] reshape { shape: [784] } } ]");
  Status s = Complete(sig, &config);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(config.max_batch_size(), 4);

  // reshape that does not match the model
  config = Config("input [ { name: 'img' dims: [28, 28] reshape { shape: [28, 28] } } ]");
  s = Complete(sig, &config);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("input 'img'"), HasSubstr("reshape [28,28]"), HasSubstr("[-1,784]")));

  // reshape that matches the model but holds another number of elements than dims
  config = Config("input [ { name: 'img' dims: [28, 27] reshape { shape: [784] } } ]");
  s = Complete(sig, &config);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("input 'img'"), HasSubstr("[28,27]")));
}

struct MismatchCase {
  const char* label;
  const char* config;
  const char* want[3];  // substrings of the message
};

class AutoCompleteMismatchTest : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(AutoCompleteMismatchTest, IsInvalidArgumentNamingTheTensorAndBothValues) {
  const MismatchCase& c = GetParam();
  inference::ModelConfig config = Config(c.config);
  Status s = Complete(Batchable(), &config);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  for (const char* want : c.want) {
    if (want != nullptr) {
      EXPECT_THAT(s.message(), HasSubstr(want));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AutoCompleteMismatchTest,
    ::testing::Values(
        MismatchCase{"dtype",
                     "input [ { name: 'x' data_type: TYPE_INT64 } ]",
                     {"input 'x'", "TYPE_INT64", "TYPE_FP32"}},
        MismatchCase{"output_dtype",
                     "output [ { name: 'probs' data_type: TYPE_FP16 } ]",
                     {"output 'probs'", "TYPE_FP16", "TYPE_FP32"}},
        MismatchCase{"wrong_fixed_dim",
                     "input [ { name: 'x' dims: [3, 224, 225] } ]",
                     {"input 'x'", "[3,224,225]", "[-1,3,224,224]"}},
        MismatchCase{"wrong_rank",
                     "max_batch_size: 4 input [ { name: 'x' dims: [224, 224] } ]",
                     {"input 'x'", "[224,224]", "leaves out the first, batch dimension"}},
        MismatchCase{"batch_dim_included",
                     "max_batch_size: 4 input [ { name: 'x' dims: [-1, 3, 224, 224] } ]",
                     {"input 'x'", "[-1,3,224,224]", "expected [3,224,224]"}},
        MismatchCase{"variable_against_fixed",
                     "input [ { name: 'x' dims: [3, -1, 224] } ]",
                     {"input 'x'", "[3,-1,224]", nullptr}},
        MismatchCase{"full_shape_without_batching",
                     "max_batch_size: 0 input [ { name: 'x' dims: [3, 224, 224] } ]",
                     {"input 'x'", "full shape", nullptr}},
        MismatchCase{"unknown_input",
                     "input [ { name: 'images' data_type: TYPE_FP32 } ]",
                     {"input 'images'", "not in the model", "'x'"}},
        MismatchCase{"unknown_output",
                     "output [ { name: 'logits' } ]",
                     {"output 'logits'", "not in the model", "'probs'"}},
        MismatchCase{"name_mismatch", "name: 'other'", {"'other'", "'m'", "does not match"}},
        MismatchCase{"negative_max_batch_size",
                     "max_batch_size: -2",
                     {"max_batch_size -2", nullptr, nullptr}},
        MismatchCase{"duplicate_input",
                     "input [ { name: 'x' }, { name: 'x' } ]",
                     {"input 'x'", "more than once", nullptr}}),
    [](const ::testing::TestParamInfo<MismatchCase>& info) { return info.param.label; });

// Triton's initializer_as_input: INPUT [5,5] and an initializer INITIALIZER [5,5] that is
// also a graph input (ONNX Runtime: an overridable initializer).
ModelSignature WithDefaultedInput() {
  ModelSignature sig{
      {{"INPUT", DataType::kFp32, {5, 5}}}, {{"OUTPUT", DataType::kFp32, {5, 5}}}, {}};
  sig.defaulted_inputs = {{"INITIALIZER", DataType::kFp32, {5, 5}}};
  return sig;
}

TEST(AutoCompleteConfigTest, AnInputWithAValueInTheModelIsListedOnlyWhenTheConfigListsIt) {
  inference::ModelConfig none = Config("max_batch_size: 0");
  ASSERT_TRUE(Complete(WithDefaultedInput(), &none).ok());
  ASSERT_EQ(none.input_size(), 1);  // never added: older exporters list every weight
  EXPECT_EQ(none.input(0).name(), "INPUT");

  inference::ModelConfig listed =
      Config("max_batch_size: 0 input [{ name: \"INITIALIZER\" optional: true }]");
  ASSERT_TRUE(Complete(WithDefaultedInput(), &listed).ok());
  ASSERT_EQ(listed.input_size(), 2);
  EXPECT_EQ(listed.input(0).name(), "INITIALIZER");
  EXPECT_EQ(listed.input(0).data_type(), inference::TYPE_FP32);  // completed from the model
  EXPECT_THAT(listed.input(0).dims(), ElementsAre(5, 5));
  EXPECT_EQ(listed.input(1).name(), "INPUT");

  inference::ModelConfig wrong =
      Config("max_batch_size: 0 input [{ name: \"INITIALIZER\" data_type: TYPE_FP32 dims: [4] }]");
  Status mismatch = Complete(WithDefaultedInput(), &wrong);
  EXPECT_EQ(mismatch.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(mismatch.message(), HasSubstr("'INITIALIZER': dims [4]"));

  // Its shape has no batch dimension.
  ModelSignature batchable = WithDefaultedInput();
  batchable.inputs[0].dims = {-1, 5};
  batchable.outputs[0].dims = {-1, 5};
  inference::ModelConfig batched =
      Config("max_batch_size: 4 input [{ name: \"INITIALIZER\" optional: true }]");
  Status refused = Complete(batchable, &batched);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("'INITIALIZER' has a value in the model"));
}

// Probe 63: `optional` on an input the model needs loaded, and every request without it failed.
TEST(AutoCompleteConfigTest, OptionalOnAnInputTheModelNeedsIsRefused) {
  inference::ModelConfig config =
      Config("max_batch_size: 0 input [{ name: \"INPUT\" optional: true }]");
  Status refused = Complete(WithDefaultedInput(), &config);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(),
              AllOf(HasSubstr("input 'INPUT' is optional in the config, but the model needs it"),
                    HasSubstr("remove 'optional: true'")));
}

TEST(AutoCompleteConfigTest, OtherBackendOrPlatformIsUnimplemented) {
  inference::ModelConfig config = Config("backend: 'tensorrt'");
  Status s = Complete(Batchable(), &config);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("'tensorrt'"), HasSubstr("'onnxruntime'")));

  config = Config("platform: 'tensorflow_savedmodel'");
  s = Complete(Batchable(), &config);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("'tensorflow_savedmodel'"));

  config = Config("platform: 'onnxruntime_onnx'");
  EXPECT_TRUE(Complete(Batchable(), &config).ok());
  EXPECT_EQ(config.backend(), "onnxruntime");
}

TEST(AutoCompleteConfigTest, GpuInstanceGroupIsUnimplemented) {
  inference::ModelConfig config = Config("instance_group [ { kind: KIND_GPU count: 1 } ]");
  Status s = Complete(Batchable(), &config);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("GPU"));
}

TEST(AutoCompleteConfigTest, InstanceGroupsAreNamedAndCpu) {
  inference::ModelConfig config =
      Config("instance_group [ { count: 2 }, { name: 'b' kind: KIND_MODEL } ]");
  ASSERT_TRUE(Complete(Batchable(), &config).ok());
  ASSERT_EQ(config.instance_group_size(), 2);
  EXPECT_EQ(config.instance_group(0).name(), "m_0");
  EXPECT_EQ(config.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(config.instance_group(0).count(), 2);
  EXPECT_EQ(config.instance_group(1).name(), "b");
  EXPECT_EQ(config.instance_group(1).kind(), inference::ModelInstanceGroup::KIND_MODEL);
  EXPECT_EQ(config.instance_group(1).count(), 1);
}

TEST(AutoCompleteConfigTest, DefaultModelFilenameFromOptions) {
  AutoCompleteOptions options;
  options.default_model_filename = "model.onnx";
  inference::ModelConfig config;
  ASSERT_TRUE(Complete(Batchable(), &config, options).ok());
  EXPECT_EQ(config.default_model_filename(), "model.onnx");

  config = Config("default_model_filename: 'resnet.onnx'");
  ASSERT_TRUE(Complete(Batchable(), &config, options).ok());
  EXPECT_EQ(config.default_model_filename(), "resnet.onnx");
}

TEST(AutoCompleteConfigTest, ValidationRunsOnTheCompletedConfig) {
  // preferred_batch_size above the inferred max_batch_size of 4
  inference::ModelConfig config = Config("dynamic_batching { preferred_batch_size: [8] }");
  Status s = Complete(Batchable(), &config);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("preferred_batch_size 8"));
}

}  // namespace
}  // namespace harrier
