#include "repository/model_config_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace harrier {
namespace {

using ::testing::HasSubstr;

TEST(ParseModelConfigTest, ParsesTritonStyleConfig) {
  constexpr std::string_view kText = R"pb(
    # A config as users write them for Triton.
    name: "resnet"
    backend: "onnxruntime"
    max_batch_size: 8
    version_policy: { specific: { versions: [ 1, 3 ] } } input
    [ {
      name: "input"
      data_type: TYPE_FP32
      format: FORMAT_NCHW
      dims: [ 3, 224, 224 ]
    }] output
    [ {
      name: "probs"
      data_type: TYPE_FP32
      dims: [ 1000 ]
      label_filename: "labels.txt"
      reshape: { shape: [ 1, 1000 ] }
    }] instance_group
    [ { count: 2, kind: KIND_CPU }]
    dynamic_batching {
      preferred_batch_size: [ 4, 8 ]
      max_queue_delay_microseconds: 100
      priority_levels: 2
      default_priority_level: 1
      default_queue_policy { timeout_action: DELAY, default_timeout_microseconds: 5000 }
      priority_queue_policy {
        key: 2
        value: { max_queue_size: 16 }
      }
    }
    optimization { graph { level: 1 } }
    parameters {
      key: "intra_op_thread_count"
      value: { string_value: "2" }
    } model_warmup
    [ {
      name: "zeros"
      batch_size: 1
      inputs {
        key: "input"
        value: {
          data_type: TYPE_FP32,
          dims: [ 3, 224, 224 ],
          zero_data: true
        }
      }
    }]
    default_model_filename: "resnet.onnx"
  )pb";
  StatusOr<inference::ModelConfig> config = ParseModelConfig(kText, "config.pbtxt");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->name(), "resnet");
  EXPECT_EQ(config->backend(), "onnxruntime");
  ASSERT_TRUE(config->has_max_batch_size());
  EXPECT_EQ(config->max_batch_size(), 8);
  EXPECT_THAT(config->version_policy().specific().versions(), ::testing::ElementsAre(1, 3));
  ASSERT_EQ(config->input_size(), 1);
  EXPECT_EQ(config->input(0).data_type(), inference::TYPE_FP32);
  EXPECT_EQ(config->input(0).format(), inference::ModelInput::FORMAT_NCHW);
  EXPECT_THAT(config->input(0).dims(), ::testing::ElementsAre(3, 224, 224));
  ASSERT_EQ(config->output_size(), 1);
  EXPECT_EQ(config->output(0).label_filename(), "labels.txt");
  EXPECT_THAT(config->output(0).reshape().shape(), ::testing::ElementsAre(1, 1000));
  ASSERT_EQ(config->instance_group_size(), 1);
  EXPECT_EQ(config->instance_group(0).count(), 2);
  EXPECT_EQ(config->instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  ASSERT_TRUE(config->has_dynamic_batching());
  const auto& batching = config->dynamic_batching();
  EXPECT_THAT(batching.preferred_batch_size(), ::testing::ElementsAre(4, 8));
  EXPECT_EQ(batching.max_queue_delay_microseconds(), 100u);
  EXPECT_EQ(batching.default_queue_policy().timeout_action(), inference::ModelQueuePolicy::DELAY);
  EXPECT_EQ(batching.default_queue_policy().default_timeout_microseconds(), 5000u);
  ASSERT_EQ(batching.priority_queue_policy().count(2), 1u);
  EXPECT_EQ(batching.priority_queue_policy().at(2).max_queue_size(), 16u);
  EXPECT_EQ(config->optimization().graph().level(), 1);
  EXPECT_EQ(config->parameters().at("intra_op_thread_count").string_value(), "2");
  ASSERT_EQ(config->model_warmup_size(), 1);
  EXPECT_TRUE(config->model_warmup(0).inputs().at("input").zero_data());
  EXPECT_EQ(config->default_model_filename(), "resnet.onnx");
}

TEST(ParseModelConfigTest, EmptyTextIsEmptyConfig) {
  for (std::string_view text : {"", "   \n\t", "# only a comment\n"}) {
    StatusOr<inference::ModelConfig> config = ParseModelConfig(text, "config.pbtxt");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_EQ(config->ByteSizeLong(), 0u) << "text: '" << text << "'";
    EXPECT_FALSE(config->has_max_batch_size());
  }
}

// A config's strings go into JSON and metric labels: one that is not UTF-8 is refused, naming
// the field (probe 29: it made the config endpoint's JSON unreadable).
TEST(ParseModelConfigTest, AStringThatIsNotUtf8IsRefusedByItsField) {
  auto bad = ParseModelConfig(
      "name: \"m\"\nparameters { key: \"k\" value { string_value: \"a\\377b\" } }\n",
      "m/config.pbtxt");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("m/config.pbtxt"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("'parameters[0].value.string_value' is not UTF-8"),
            std::string::npos)
      << bad.status().message();
  auto fine = ParseModelConfig("name: \"caf\303\251\"\n", "m/config.pbtxt");
  EXPECT_TRUE(fine.ok()) << fine.status().ToString();
}

TEST(ParseModelConfigTest, ExplicitZeroMaxBatchSizeIsPresent) {
  StatusOr<inference::ModelConfig> config = ParseModelConfig("max_batch_size: 0", "c.pbtxt");
  ASSERT_TRUE(config.ok());
  EXPECT_TRUE(config->has_max_batch_size());
  EXPECT_EQ(config->max_batch_size(), 0);
}

struct ParseErrorCase {
  const char* label;
  const char* text;
  const char* position;  // "path:line:col:" expected in the message
  const char* problem;   // a substring naming the problem
};

class ParseModelConfigErrorTest : public ::testing::TestWithParam<ParseErrorCase> {};

TEST_P(ParseModelConfigErrorTest, ReportsFileLineColumnAndProblem) {
  const ParseErrorCase& c = GetParam();
  StatusOr<inference::ModelConfig> config = ParseModelConfig(c.text, "models/m/config.pbtxt");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr(c.position));
  EXPECT_THAT(config.status().message(), HasSubstr(c.problem));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ParseModelConfigErrorTest,
    ::testing::Values(
        ParseErrorCase{"unknown_field", "name: \"m\"\nsequence_batching { }\n",
                       "models/m/config.pbtxt:2:1:", "no field named \"sequence_batching\""},
        ParseErrorCase{"unknown_nested_field",
                       "name: \"m\"\ninput [ { name: \"x\"\n  colour: 3 } ]",
                       "models/m/config.pbtxt:3:3:", "no field named \"colour\""},
        ParseErrorCase{"missing_brace", "name: \"m\"\ninput [ { name: \"x\" ]\n",
                       "models/m/config.pbtxt:2:", "Expected"},
        ParseErrorCase{"string_for_int", "max_batch_size: \"eight\"\n",
                       "models/m/config.pbtxt:1:17:", "integer"},
        ParseErrorCase{"int_for_string", "\n\nname: 12\n", "models/m/config.pbtxt:3:7:", "string"},
        ParseErrorCase{"unknown_enum_name", "input [ { name: \"x\" data_type: TYPE_FLOAT32 } ]",
                       "models/m/config.pbtxt:1:", "TYPE_FLOAT32"},
        ParseErrorCase{"int32_overflow", "max_batch_size: 99999999999\n",
                       "models/m/config.pbtxt:1:", "99999999999"},
        ParseErrorCase{"negative_unsigned", "version_policy { latest { num_versions: -1 } }",
                       "models/m/config.pbtxt:1:41:", "Expected integer"},
        ParseErrorCase{"singular_field_twice", "name: \"a\"\nname: \"b\"\n",
                       "models/m/config.pbtxt:2:", "specified multiple times"},
        ParseErrorCase{"two_oneof_members", "version_policy { latest { } all { } }",
                       "models/m/config.pbtxt:1:", "oneof"}),
    [](const ::testing::TestParamInfo<ParseErrorCase>& info) { return info.param.label; });

class ReadModelConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("harrier_parser_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
};

TEST_F(ReadModelConfigFileTest, MissingFileIsEmptyConfig) {
  StatusOr<inference::ModelConfig> config = ReadModelConfigFile((dir_ / "config.pbtxt").string());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->ByteSizeLong(), 0u);
}

TEST_F(ReadModelConfigFileTest, ReadsAndNamesTheFileInErrors) {
  const std::string path = (dir_ / "config.pbtxt").string();
  std::ofstream(path) << "name: \"m\"\nmax_batch_size: 4\n";
  StatusOr<inference::ModelConfig> config = ReadModelConfigFile(path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->max_batch_size(), 4);

  std::ofstream(path) << "name: \"m\"\nbogus: 1\n";
  config = ReadModelConfigFile(path);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr(path + ":2:1:"));
}

TEST_F(ReadModelConfigFileTest, AFileOverTheLimitIsRefusedUnread) {
  const std::string path = (dir_ / "config.pbtxt").string();
  std::ofstream(path) << "max_batch_size: 4\n" << std::string(kMaxModelConfigBytes, ' ');
  StatusOr<inference::ModelConfig> config = ReadModelConfigFile(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("a model config may have"));
}

TEST_F(ReadModelConfigFileTest, DirectoryIsAnError) {
  std::filesystem::create_directories(dir_ / "config.pbtxt");
  StatusOr<inference::ModelConfig> config = ReadModelConfigFile((dir_ / "config.pbtxt").string());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace harrier
