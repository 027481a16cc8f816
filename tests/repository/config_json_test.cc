#include "repository/config_json.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "repository/model_config_parser.h"

namespace harrier {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

inference::ModelConfig Config(std::string_view text) {
  StatusOr<inference::ModelConfig> config = ParseModelConfig(text, "test.pbtxt");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config.ok() ? *config : inference::ModelConfig();
}

constexpr std::string_view kFull = R"pb(
  name: "resnet"
  platform: "onnxruntime_onnx"
  backend: "onnxruntime"
  version_policy { specific { versions: [ 1, 3 ] } }
  max_batch_size: 4 input
  [ {
    name: "x"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, -1 ]
    reshape { shape: [ 3, 224, -1 ] }
  }] output
  [ {
    name: "probs"
    data_type: TYPE_STRING
    dims: [ 16 ]
    label_filename: "labels.txt"
  }] instance_group
  [ { name: "m_0" kind: KIND_CPU count: 2 }]
  optimization {
    graph { level: -1 }
    input_pinned_memory { enable: true }
  }
  dynamic_batching {
    preferred_batch_size: [ 2, 4 ]
    max_queue_delay_microseconds: 18446744073709551615
    priority_levels: 10
    default_priority_level: 2
    default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 100 }
    priority_queue_policy {
      key: 10
      value: { max_queue_size: 3 }
    }
    priority_queue_policy {
      key: 2
      value: { allow_timeout_override: true }
    }
  }
  parameters {
    key: "zeta"
    value: { string_value: "1" }
  }
  parameters {
    key: "alpha"
    value: { string_value: "two" }
  } model_warmup
  [ {
    name: "w"
    batch_size: 1
    count: 2
    inputs {
      key: "x"
      value: {
        data_type: TYPE_FP32
        dims: [ 3, 224, 8 ]
        zero_data: true
      }
    }
  }]
  default_model_filename: "model.onnx"
)pb";

TEST(ModelConfigToJsonTest, IntegersAreNumbersAndEnumsAreNames) {
  const std::string json = ModelConfigToJson(Config(kFull));
  EXPECT_THAT(json, HasSubstr(R"("max_batch_size":4)"));
  EXPECT_THAT(json, HasSubstr(R"("dims":[3,224,-1])"));
  EXPECT_THAT(json, HasSubstr(R"("reshape":{"shape":[3,224,-1]})"));
  EXPECT_THAT(json, HasSubstr(R"("versions":[1,3])"));
  EXPECT_THAT(json, HasSubstr(R"("max_queue_delay_microseconds":18446744073709551615)"));
  EXPECT_THAT(json, HasSubstr(R"("priority_levels":10)"));
  EXPECT_THAT(json, HasSubstr(R"("data_type":"TYPE_FP32")"));
  EXPECT_THAT(json, HasSubstr(R"("data_type":"TYPE_STRING")"));
  EXPECT_THAT(json, HasSubstr(R"("format":"FORMAT_NCHW")"));
  EXPECT_THAT(json, HasSubstr(R"("kind":"KIND_CPU")"));
  EXPECT_THAT(json, HasSubstr(R"("timeout_action":"DELAY")"));
  EXPECT_THAT(json, HasSubstr(R"("level":-1)"));
  EXPECT_THAT(json, HasSubstr(R"("zero_data":true)"));
  EXPECT_THAT(json, HasSubstr(R"("string_value":"1")"));  // a string stays a string
  // No other quoted integers (the standard JSON mapping would give "dims":["3",...]).
  std::string rest = json;
  rest.erase(rest.find(R"("string_value":"1")"), 18);
  EXPECT_THAT(rest, Not(::testing::ContainsRegex(R"(:\"-?[0-9]+\")")));
  EXPECT_THAT(rest, Not(::testing::ContainsRegex(R"(\[\"-?[0-9]+\")")));
}

TEST(ModelConfigToJsonTest, ProtoFieldNamesNotCamelCase) {
  const std::string json = ModelConfigToJson(Config(kFull));
  for (const char* name :
       {"\"max_batch_size\"", "\"instance_group\"", "\"dynamic_batching\"",
        "\"preferred_batch_size\"", "\"label_filename\"", "\"default_model_filename\"",
        "\"model_warmup\"", "\"version_policy\""}) {
    EXPECT_THAT(json, HasSubstr(name));
  }
  EXPECT_THAT(json, Not(HasSubstr("maxBatchSize")));
}

TEST(ModelConfigToJsonTest, PrintsDefaultsButNotUnsetMessagesOrOneofs) {
  const std::string json = ModelConfigToJson(inference::ModelConfig());
  EXPECT_EQ(json,
            R"({"name":"","platform":"","backend":"","max_batch_size":0,"input":[],"output":[],)"
            R"("instance_group":[],"default_model_filename":"","parameters":{},)"
            R"("model_warmup":[]})");
}

TEST(ModelConfigToJsonTest, MapsAreSortedObjectsWithStringKeys) {
  const std::string json = ModelConfigToJson(Config(kFull));
  EXPECT_THAT(json, HasSubstr(R"("priority_queue_policy":{"2":{"timeout_action":"REJECT",)"));
  EXPECT_LT(json.find(R"("2":{)"), json.find(R"("10":{)"));  // numeric, not text, order
  EXPECT_THAT(json, HasSubstr(R"("parameters":{"alpha":{"string_value":"two"},)"
                              R"("zeta":{"string_value":"1"}})"));
  EXPECT_THAT(json, HasSubstr(R"("inputs":{"x":{"data_type":"TYPE_FP32","dims":[3,224,8],)"
                              R"("zero_data":true}})"));
}

TEST(ModelConfigToJsonTest, EscapesStrings) {
  inference::ModelConfig config;
  config.set_name("a\"b\\c\nd\x01\xc3\xa9");
  EXPECT_THAT(ModelConfigToJson(config), HasSubstr(R"("name":"a\"b\\c\nd\u0001)"
                                                   "\xc3\xa9\""));
}

TEST(ModelConfigToJsonTest, RoundTripsThroughTheProtobufJsonParser) {
  const inference::ModelConfig original = Config(kFull);
  const std::string json = ModelConfigToJson(original);
  inference::ModelConfig parsed;
  auto status = google::protobuf::util::JsonStringToMessage(json, &parsed);
  ASSERT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(original, parsed))
      << "original:\n"
      << original.DebugString() << "parsed:\n"
      << parsed.DebugString();
}

TEST(ModelConfigToJsonTest, SameFieldsAsTheStandardMappingInTheSameOrder) {
  // The standard printer with Triton's options differs only in quoting 64-bit integers.
  const inference::ModelConfig config = Config(kFull);
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string standard;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(config, &standard, options).ok());
  std::string ours = ModelConfigToJson(config);
  auto keys = [](const std::string& json) {
    std::vector<std::string> out;
    for (size_t pos = json.find("\":"); pos != std::string::npos; pos = json.find("\":", pos + 1)) {
      size_t start = json.rfind('"', pos - 1);
      out.push_back(json.substr(start + 1, pos - start - 1));
    }
    return out;
  };
  std::vector<std::string> standard_keys = keys(standard);
  std::vector<std::string> our_keys = keys(ours);
  // The standard printer orders map entries by its own rules; compare key sets for those.
  std::sort(standard_keys.begin(), standard_keys.end());
  std::sort(our_keys.begin(), our_keys.end());
  EXPECT_EQ(our_keys, standard_keys) << "standard: " << standard << "\nours:     " << ours;
}

// A config override is bounded as config.pbtxt is: a 20 MB one loaded, and GET .../config echoed
// it whole (probe 29).
TEST(ParseModelConfigJsonTest, AConfigOverTheBoundIsRefusedUnparsed) {
  const std::string padded = "{\"name\": \"m\"" + std::string(kMaxModelConfigBytes, ' ') + "}";
  auto parsed = ParseModelConfigJson(padded);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("a model config may have"), std::string::npos);
  EXPECT_TRUE(ParseModelConfigJson("{\"name\": \"m\"}").ok());
}

}  // namespace
}  // namespace harrier
