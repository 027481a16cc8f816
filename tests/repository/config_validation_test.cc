#include "repository/config_validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "repository/model_config_parser.h"

namespace harrier {
namespace {

using ::testing::HasSubstr;

// A complete, valid config; each case below appends to it (later singular fields replace
// earlier ones via MergeFrom semantics of a second parse).
constexpr std::string_view kValid = R"pb(
  name: "m"
  max_batch_size: 8 input
  [ {
    name: "x"
    data_type: TYPE_FP32
    dims: [ 3, -1 ]
  }] output
  [ {
    name: "y"
    data_type: TYPE_FP32
    dims: [ 10 ]
  }] instance_group
  [ { kind: KIND_CPU count: 1 }]
  version_policy { latest { num_versions: 2 } }
  dynamic_batching {
    preferred_batch_size: [ 4, 8 ]
    priority_levels: 2
    default_priority_level: 2
    priority_queue_policy {
      key: 1
      value: { max_queue_size: 4 }
    }
  } model_warmup
  [ {
    name: "w"
    batch_size: 8
    inputs {
      key: "x"
      value: {
        data_type: TYPE_FP32
        dims: [ 3, 5 ]
        random_data: true
      }
    }
  }]
)pb";

inference::ModelConfig ValidWith(std::string_view change) {
  StatusOr<inference::ModelConfig> base = ParseModelConfig(kValid, "base");
  StatusOr<inference::ModelConfig> delta = ParseModelConfig(change, "change");
  EXPECT_TRUE(base.ok() && delta.ok()) << change;
  if (!base.ok() || !delta.ok()) return {};
  inference::ModelConfig config = *base;
  const auto* d = delta.operator->();
  // Replace the parts the change mentions, so a case can rewrite one section.
  if (!d->name().empty() || change.find("name:") == 0) config.set_name(d->name());
  if (d->has_max_batch_size()) config.set_max_batch_size(d->max_batch_size());
  if (d->input_size() > 0) *config.mutable_input() = d->input();
  if (d->output_size() > 0) *config.mutable_output() = d->output();
  if (d->instance_group_size() > 0) *config.mutable_instance_group() = d->instance_group();
  if (d->has_version_policy()) *config.mutable_version_policy() = d->version_policy();
  if (d->has_dynamic_batching()) *config.mutable_dynamic_batching() = d->dynamic_batching();
  if (d->model_warmup_size() > 0) *config.mutable_model_warmup() = d->model_warmup();
  if (d->has_model_transaction_policy())
    *config.mutable_model_transaction_policy() = d->model_transaction_policy();
  if (d->has_response_cache()) *config.mutable_response_cache() = d->response_cache();
  if (d->has_optimization()) *config.mutable_optimization() = d->optimization();
  return config;
}

TEST(ValidateModelConfigTest, ValidConfigPasses) {
  Status s = ValidateModelConfig(ValidWith(""));
  EXPECT_TRUE(s.ok()) << s.ToString();
}

// Harrier's own parameters are known by name; a misspelt one is refused, not ignored (probe 74:
// harrier.rate_limit.rsp loaded, and the model ran without a rate limit). Other keys are the
// backend's, as in Triton.
TEST(ValidateModelConfigTest, AnUnknownHarrierParameterIsRefusedByName) {
  inference::ModelConfig config = ValidWith("");
  (*config.mutable_parameters())["harrier.rate_limit.rps"].set_string_value("5");
  (*config.mutable_parameters())["session.intra_op.allow_spinning"].set_string_value("0");
  (*config.mutable_parameters())["my_backend_key"].set_string_value("x");
  EXPECT_TRUE(ValidateModelConfig(config).ok());
  (*config.mutable_parameters())["harrier.rate_limit.rsp"].set_string_value("5");
  Status s = ValidateModelConfig(config);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("parameter 'harrier.rate_limit.rsp' is not one of Harrier's: "
                              "harrier.batching.target_p99_us, ",
                              0),
            0u)
      << s.message();
  inference::ModelConfig cased = ValidWith("");
  (*cased.mutable_parameters())["Harrier.rate_limit.rps"].set_string_value("1");
  EXPECT_EQ(ValidateModelConfig(cased).code(), StatusCode::kInvalidArgument);  // probe 77
  inference::ModelConfig generative;
  generative.set_name("llama");
  (*generative.mutable_parameters())["harrier.overload.protectoin"].set_string_value("on");
  EXPECT_EQ(ValidateGenerativeConfig(generative, "llama.cpp").code(), StatusCode::kInvalidArgument);
}

// Triton's ONNX graph levels, 2 (optimisations off) included (probe 63: it failed the load).
TEST(ValidateModelConfigTest, EveryTritonGraphLevelPasses) {
  for (int level : {-1, 0, 1, 2}) {
    Status s = ValidateModelConfig(
        ValidWith("optimization { graph { level: " + std::to_string(level) + " } }"));
    EXPECT_TRUE(s.ok()) << level << ": " << s.ToString();
  }
}

TEST(ValidateModelConfigTest, TheLargestCountsPass) {
  Status s = ValidateModelConfig(
      ValidWith("max_batch_size: 1048576 instance_group [ { count: 100 }, { count: 28 } ] "
                "dynamic_batching { "
                "priority_levels: 1000 default_priority_level: 1000 }"));
  EXPECT_TRUE(s.ok()) << s.ToString();
}

// Triton's config endpoint writes these sections out with their defaults; a config saved from
// it loads here unchanged.
TEST(ValidateModelConfigTest, TritonsDefaultTransactionPolicyAndResponseCachePass) {
  for (const char* change :
       {"model_transaction_policy { decoupled: false }", "response_cache { enable: false }",
        "model_transaction_policy { } response_cache { }"}) {
    Status s = ValidateModelConfig(ValidWith(change));
    EXPECT_TRUE(s.ok()) << change << ": " << s.ToString();
  }
}

TEST(ValidateModelConfigTest, LabelFilesInsideTheModelDirectoryPass) {
  for (const char* file : {"labels.txt", "labels/imagenet.txt", "..labels", "a/..b"}) {
    Status s = ValidateModelConfig(ValidWith(
        std::string("output [ { name: 'y' data_type: TYPE_FP32 dims: [4] label_filename: '") +
        file + "' } ]"));
    EXPECT_TRUE(s.ok()) << file << ": " << s.ToString();
  }
}

TEST(ValidateModelConfigTest, WarmupFilesInsideTheWarmupDirectoryPass) {
  for (const char* file : {"x.bin", "samples/x.bin", "..x.bin"}) {
    Status s = ValidateModelConfig(
        ValidWith(std::string("model_warmup [ { name: 'w' batch_size: 1 inputs { key: 'x' value: { "
                              "data_type: TYPE_FP32 dims: [3, 1] input_data_file: '") +
                  file + "' } } } ]"));
    EXPECT_TRUE(s.ok()) << file << ": " << s.ToString();
  }
}

struct ValidationCase {
  const char* label;
  const char* change;
  StatusCode code;
  const char* want;
};

class ValidateModelConfigErrorTest : public ::testing::TestWithParam<ValidationCase> {};

TEST_P(ValidateModelConfigErrorTest, Rejects) {
  const ValidationCase& c = GetParam();
  Status s = ValidateModelConfig(ValidWith(c.change));
  ASSERT_FALSE(s.ok()) << c.change;
  EXPECT_EQ(s.code(), c.code) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(c.want));
}

constexpr StatusCode kInvalid = StatusCode::kInvalidArgument;

INSTANTIATE_TEST_SUITE_P(
    Cases, ValidateModelConfigErrorTest,
    ::testing::Values(
        ValidationCase{"no_name", "name: ''", kInvalid, "name is not set"},
        ValidationCase{"negative_max_batch_size", "max_batch_size: -1", kInvalid,
                       "max_batch_size -1"},
        ValidationCase{"minus_two_dim", "output [ { name: 'y' data_type: TYPE_FP32 dims: [-2] } ]",
                       kInvalid, "output 'y': dims [-2] has -2"},
        ValidationCase{"invalid_type", "input [ { name: 'x' dims: [3] } ]", kInvalid,
                       "input 'x': data_type is not set"},
        ValidationCase{"unnamed_input", "input [ { data_type: TYPE_FP32 dims: [3] } ]", kInvalid,
                       "an input has no name"},
        ValidationCase{"duplicate_output",
                       "output [ { name: 'y' data_type: TYPE_FP32 dims: [1] },"
                       "         { name: 'y' data_type: TYPE_FP32 dims: [1] } ]",
                       kInvalid, "output 'y' is listed more than once"},
        ValidationCase{"reshape_count",
                       "input [ { name: 'x' data_type: TYPE_FP32 dims: [4, 4] reshape { shape: "
                       "[15] } } ]",
                       kInvalid, "reshape [15] does not hold the same number of elements"},
        ValidationCase{"reshape_variable_count",
                       "input [ { name: 'x' data_type: TYPE_FP32 dims: [-1, 4] reshape { shape: "
                       "[4] } } ]",
                       kInvalid, "reshape [4]"},
        ValidationCase{"format_rank",
                       "input [ { name: 'x' data_type: TYPE_FP32 format: FORMAT_NCHW dims: [3, "
                       "224] } ]",
                       kInvalid, "FORMAT_NCHW needs 3 dims"},
        ValidationCase{"shape_tensor",
                       "input [ { name: 'x' data_type: TYPE_INT64 dims: [2] is_shape_tensor: true "
                       "} ]",
                       StatusCode::kUnimplemented, "is_shape_tensor"},
        ValidationCase{"graph_level_unknown", "optimization { graph { level: 7 } }", kInvalid,
                       "graph level 7 is not one of -1 (basic), 0 (all), 1 (basic and extended) "
                       "and 2 (none)"},
        ValidationCase{"label_file_outside",
                       "output [ { name: 'y' data_type: TYPE_FP32 dims: [4] label_filename: "
                       "'../secrets.txt' } ]",
                       kInvalid, "label_filename '../secrets.txt' must name a file inside"},
        ValidationCase{"label_file_absolute",
                       "output [ { name: 'y' data_type: TYPE_FP32 dims: [4] label_filename: "
                       "'/etc/passwd' } ]",
                       kInvalid, "label_filename '/etc/passwd' must name a file inside"},
        ValidationCase{"label_file_dotdot_inside",
                       "output [ { name: 'y' data_type: TYPE_FP32 dims: [4] label_filename: "
                       "'a/../../b' } ]",
                       kInvalid, "must name a file inside"},
        ValidationCase{"specific_empty", "version_policy { specific { } }", kInvalid,
                       "lists no version"},
        ValidationCase{"specific_zero", "version_policy { specific { versions: [0] } }", kInvalid,
                       "specific.versions has 0"},
        ValidationCase{"negative_count", "instance_group [ { count: -1 } ]", kInvalid,
                       "count -1 is negative"},
        ValidationCase{"too_many_instances", "instance_group [ { count: 2147483647 } ]", kInvalid,
                       "count 2147483647 takes the model past 128 instances in all"},
        ValidationCase{"too_many_instances_in_all",
                       "instance_group [ { count: 100 }, { name: 'more' count: 29 } ]", kInvalid,
                       "instance_group 'more': count 29 takes the model past 128"},
        ValidationCase{"response_cache_on", "response_cache { enable: true }",
                       StatusCode::kUnimplemented,
                       "response_cache: enable is true; this server has no response cache"},
        ValidationCase{"decoupled_tensor_model", "model_transaction_policy { decoupled: true }",
                       StatusCode::kUnimplemented,
                       "model_transaction_policy: decoupled is true; a tensor model answers each "
                       "request with one response"},
        ValidationCase{"gpu_kind", "instance_group [ { kind: KIND_GPU } ]",
                       StatusCode::kUnimplemented, "no GPU support"},
        ValidationCase{"gpus_listed", "instance_group [ { kind: KIND_CPU gpus: [0] } ]",
                       StatusCode::kUnimplemented, "no GPU support"},
        ValidationCase{"preferred_too_big", "dynamic_batching { preferred_batch_size: [16] }",
                       kInvalid, "preferred_batch_size 16"},
        ValidationCase{"preferred_zero", "dynamic_batching { preferred_batch_size: [0] }", kInvalid,
                       "preferred_batch_size 0"},
        ValidationCase{"preferred_without_batching",
                       "max_batch_size: 0 dynamic_batching { preferred_batch_size: [1] } "
                       "model_warmup [ { name: 'w' batch_size: 1 } ]",
                       kInvalid, "needs max_batch_size > 0"},
        ValidationCase{"default_level_without_levels",
                       "dynamic_batching { default_priority_level: 1 }", kInvalid,
                       "priority_levels is 0"},
        ValidationCase{"huge_batch", "max_batch_size: 2147483647", kInvalid,
                       "max_batch_size 2147483647 is over 1048576"},
        ValidationCase{"too_many_levels",
                       "dynamic_batching { priority_levels: 1000000000000 "
                       "default_priority_level: 1 }",
                       kInvalid, "priority_levels 1000000000000 is over 1000"},
        ValidationCase{"default_level_out_of_range",
                       "dynamic_batching { priority_levels: 2 default_priority_level: 3 }",
                       kInvalid, "default_priority_level 3"},
        ValidationCase{"queue_policy_level_out_of_range",
                       "dynamic_batching { priority_levels: 2 default_priority_level: 1 "
                       "priority_queue_policy { key: 3 value: { } } }",
                       kInvalid, "priority_queue_policy for level 3"},
        ValidationCase{"timeout_action_unnamed",
                       "dynamic_batching { default_queue_policy { timeout_action: 7 } }", kInvalid,
                       "default_queue_policy: timeout_action 7 is not one of REJECT (0) or DELAY"},
        ValidationCase{"level_timeout_action_unnamed",
                       "dynamic_batching { priority_levels: 2 default_priority_level: 1 "
                       "priority_queue_policy { key: 2 value: { timeout_action: -1 } } }",
                       kInvalid, "priority_queue_policy for level 2: timeout_action -1"},
        ValidationCase{"warmup_unknown_input",
                       "model_warmup [ { name: 'w' batch_size: 1 inputs { key: 'z' value: { "
                       "data_type: TYPE_FP32 dims: [1] zero_data: true } } } ]",
                       kInvalid, "input 'z': the model has no such input"},
        ValidationCase{"warmup_batch_too_big", "model_warmup [ { name: 'w' batch_size: 9 } ]",
                       kInvalid, "batch_size 9"},
        ValidationCase{"warmup_count_too_big",
                       "model_warmup [ { name: 'w' batch_size: 1 count: 4294967295 } ]", kInvalid,
                       "model_warmup 'w': count 4294967295 is over 10000"},
        ValidationCase{"warmup_batch_zero", "model_warmup [ { name: 'w' } ]", kInvalid,
                       "batch_size 0"},
        ValidationCase{"warmup_no_data",
                       "model_warmup [ { name: 'w' batch_size: 1 inputs { key: 'x' value: { "
                       "data_type: TYPE_FP32 dims: [3, 1] } } } ]",
                       kInvalid, "set one of zero_data"},
        // Before: "shape [1,-1] takes more than the 1073741824 bytes ..." (probe 29).
        ValidationCase{"warmup_variable_dims",
                       "model_warmup [ { name: 'w' batch_size: 1 inputs { key: 'x' value: { "
                       "data_type: TYPE_FP32 dims: [-1] zero_data: true } } } ]",
                       kInvalid, "dims must be sizes, not -1"},
        ValidationCase{"warmup_no_name", "model_warmup [ { batch_size: 1 } ]", kInvalid,
                       "has no name"},
        ValidationCase{"warmup_file_outside",
                       "model_warmup [ { name: 'w' batch_size: 1 inputs { key: 'x' value: { "
                       "data_type: TYPE_FP32 dims: [3, 1] input_data_file: '../../x/model.onnx' "
                       "} } } ]",
                       kInvalid,
                       "input_data_file '../../x/model.onnx' must name a file inside the model's "
                       "warmup directory"},
        ValidationCase{"warmup_file_absolute",
                       "model_warmup [ { name: 'w' batch_size: 1 inputs { key: 'x' value: { "
                       "data_type: TYPE_FP32 dims: [3, 1] input_data_file: '/etc/shadow' } } } ]",
                       kInvalid, "input_data_file '/etc/shadow' must name a file inside"},
        ValidationCase{"warmup_file_empty",
                       "model_warmup [ { name: 'w' batch_size: 1 inputs { key: 'x' value: { "
                       "data_type: TYPE_FP32 dims: [3, 1] input_data_file: '' } } } ]",
                       kInvalid, "input_data_file '' must name a file inside"}),
    [](const ::testing::TestParamInfo<ValidationCase>& info) { return info.param.label; });

// ONNX allows empty tensors: a 0 dimension is a valid (empty) size, in dims and in reshape.
TEST(ValidateModelConfigTest, ZeroSizeDimensionsAreValid) {
  Status s = ValidateModelConfig(ValidWith(
      "input [ { name: 'x' data_type: TYPE_FP32 dims: [3, 0] } ]"
      "output [ { name: 'y' data_type: TYPE_FP32 dims: [0, 2] reshape { shape: [0] } } ]"));
  EXPECT_TRUE(s.ok()) << s.ToString();
  s = ValidateModelConfig(ValidWith(
      "output [ { name: 'y' data_type: TYPE_FP32 dims: [0, 2] reshape { shape: [2] } } ]"));
  EXPECT_THAT(s.message(), HasSubstr("reshape [2] does not hold the same number of elements"));
}

TEST(ValidateModelConfigTest, WarmupBatchOfOneWithoutBatching) {
  inference::ModelConfig config =
      ValidWith("max_batch_size: 0 model_warmup [ { name: 'w' batch_size: 1 } ]");
  config.clear_dynamic_batching();
  Status s = ValidateModelConfig(config);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

// A text generator's config: what it may say (Triton's vLLM-style sections included) and what
// it may not, each refused by name.
TEST(ValidateGenerativeConfigTest, AcceptsWhatAGeneratorCanHonour) {
  for (const char* text :
       {"", "backend: 'llama.cpp' parameters { key: 'context_size' value { string_value: '512' } }",
        "model_transaction_policy { decoupled: true } response_cache { enable: false }",
        "instance_group [ { count: 1 kind: KIND_MODEL } ]", "instance_group [ { kind: KIND_CPU } ]",
        "dynamic_batching { priority_levels: 2 default_priority_level: 1 }",
        // What Triton's config endpoint writes for an empty section: every field at its default.
        "dynamic_batching { max_queue_delay_microseconds: 0 preserve_ordering: false "
        "default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 0 } "
        "priority_queue_policy { key: 1 value { } } priority_levels: 1 default_priority_level: 1 "
        "}"}) {
    StatusOr<inference::ModelConfig> config = ParseModelConfig(text, "config.pbtxt");
    ASSERT_TRUE(config.ok()) << text;
    Status s = ValidateGenerativeConfig(*config, "llama.cpp");
    EXPECT_TRUE(s.ok()) << text << ": " << s.ToString();
  }
}

TEST(ValidateGenerativeConfigTest, RefusesWhatItCannotHonourByName) {
  struct Case {
    const char* text;
    StatusCode code;
    const char* want;
  };
  for (const Case& c : {
           Case{"input [ { name: 'x' data_type: TYPE_FP32 dims: [1] } ]", kInvalid,
                "a llama.cpp model takes text, not tensors"},
           Case{"max_batch_size: 4", kInvalid, "takes text, not tensors"},
           Case{"model_warmup [ { name: 'w' batch_size: 1 } ]", kInvalid,
                "warms up with one generated token: model_warmup's tensor samples do not apply"},
           Case{"response_cache { enable: true }", StatusCode::kUnimplemented,
                "this server has no response cache"},
           Case{"model_transaction_policy { decoupled: false }", kInvalid,
                "decoupled is false, but a llama.cpp model answers a request with many responses"},
           Case{"instance_group [ { kind: KIND_GPU } ]", StatusCode::kUnimplemented,
                "no GPU support"},
           Case{"dynamic_batching { preferred_batch_size: [ 4 ] }", kInvalid,
                "dynamic_batching: preferred_batch_size does not apply: a llama.cpp model batches "
                "every decode step itself"},
           Case{"dynamic_batching { max_queue_delay_microseconds: 100 }", kInvalid,
                "max_queue_delay_microseconds does not apply"},
           Case{"dynamic_batching { preserve_ordering: true }", kInvalid,
                "preserve_ordering does not apply"},
           Case{"dynamic_batching { default_queue_policy { max_queue_size: 8 } }", kInvalid,
                "queue policies do not apply to a llama.cpp model: its waiting room is bounded by "
                "the parameter max_waiting_requests"},
           Case{"dynamic_batching { priority_levels: 2 default_priority_level: 1 "
                "priority_queue_policy { key: 1 value { default_timeout_microseconds: 5 } } }",
                kInvalid, "queue policies do not apply"},
           Case{"dynamic_batching { priority_levels: 2 default_priority_level: 3 }", kInvalid,
                "default_priority_level 3 is outside [1, priority_levels 2]"},
           Case{"instance_group [ { count: 2 } ]", kInvalid,
                "instance_group: 2 instances; a llama.cpp model is one engine, whose concurrency "
                "is the parameter parallel_sequences"},
       }) {
    StatusOr<inference::ModelConfig> config = ParseModelConfig(c.text, "config.pbtxt");
    ASSERT_TRUE(config.ok()) << c.text;
    Status s = ValidateGenerativeConfig(*config, "llama.cpp");
    EXPECT_EQ(s.code(), c.code) << c.text << ": " << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(c.want)) << c.text;
  }
}

}  // namespace
}  // namespace harrier
