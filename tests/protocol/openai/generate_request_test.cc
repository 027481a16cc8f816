#include "protocol/openai/generate_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace harrier::openai {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

GenerationParams ParseOk(std::string_view body,
                         GenerateEndpoint endpoint = GenerateEndpoint::kGenerate) {
  StatusOr<GenerationParams> p = ParseGenerateRequest(body, "llama", endpoint);
  EXPECT_TRUE(p.ok()) << body << ": " << p.status().ToString();
  return p.ok() ? *p : GenerationParams();
}

TEST(GenerateRequestTest, TextInputAndParameters) {
  const GenerationParams p = ParseOk(
      R"({"text_input":"What is ML?","id":"42","parameters":{"max_tokens":20,"temperature":0.2,)"
      R"("top_p":0.5,"top_k":5,"min_p":0,"repetition_penalty":1.2,"seed":7,"stop":["\n"],)"
      R"("frequency_penalty":0.5,"presence_penalty":0.25,"priority":1,"unknown":[1]}})");
  EXPECT_EQ(p.model, "llama");
  EXPECT_FALSE(p.chat);
  EXPECT_EQ(p.prompt, "What is ML?");
  EXPECT_EQ(p.max_tokens, 20);
  EXPECT_EQ(p.temperature, 0.2f);
  EXPECT_EQ(p.top_p, 0.5f);
  EXPECT_EQ(p.top_k, 5);
  EXPECT_EQ(p.min_p, 0.0f);
  EXPECT_EQ(p.repetition_penalty, 1.2f);
  EXPECT_EQ(p.seed, 7u);
  EXPECT_THAT(p.stop, ElementsAre("\n"));
  EXPECT_EQ(p.frequency_penalty, 0.5f);
  EXPECT_EQ(p.presence_penalty, 0.25f);
  EXPECT_EQ(p.priority, 1);
  EXPECT_FALSE(p.stream);
  EXPECT_EQ(p.n, 1);
}

TEST(GenerateRequestTest, DefaultsMatchTheOpenAiParsers) {
  const GenerationParams p = ParseOk(R"({"text_input":""})");
  const GenerationParams defaults;
  EXPECT_EQ(p.prompt, "");
  EXPECT_EQ(p.max_tokens, defaults.max_tokens);
  EXPECT_EQ(p.temperature, defaults.temperature);
  EXPECT_EQ(p.top_k, defaults.top_k);
  EXPECT_EQ(p.min_p, defaults.min_p);
  EXPECT_TRUE(p.stop.empty());
}

TEST(GenerateRequestTest, TopLevelFieldsAsTensorRtLlmSendsThem) {
  GenerationParams p = ParseOk(
      R"({"text_input":"x","max_tokens":30,"bad_words":"","stop_words":["END"],"pad_id":2})");
  EXPECT_EQ(p.max_tokens, 30);
  EXPECT_THAT(p.stop, ElementsAre("END"));
  // "" is TensorRT-LLM's "no stop words".
  EXPECT_TRUE(ParseOk(R"({"text_input":"x","stop_words":""})").stop.empty());
  // `parameters` wins over the top level.
  p = ParseOk(R"({"text_input":"x","max_tokens":30,"parameters":{"max_tokens":10}})");
  EXPECT_EQ(p.max_tokens, 10);
}

TEST(GenerateRequestTest, TheEndpointDecidesStreaming) {
  EXPECT_TRUE(ParseOk(R"({"text_input":"x"})", GenerateEndpoint::kGenerateStream).stream);
  EXPECT_TRUE(
      ParseOk(R"({"text_input":"x","stream":true})", GenerateEndpoint::kGenerateStream).stream);
  EXPECT_TRUE(ParseOk(R"({"text_input":"x","parameters":{"stream":false}})",
                      GenerateEndpoint::kGenerateStream)
                  .stream);
  EXPECT_FALSE(ParseOk(R"({"text_input":"x","stream":false})").stream);
  // The later `parameters` value is what counts.
  EXPECT_FALSE(ParseOk(R"({"text_input":"x","stream":true,"parameters":{"stream":false}})").stream);
}

TEST(GenerateRequestTest, Rejects) {
  struct Case {
    const char* body;
    StatusCode code;
    const char* param;
    const char* fragment;
  } cases[] = {
      {"", StatusCode::kInvalidArgument, "", "not valid JSON"},
      {R"({"text_input":"x","parameters":{"seed":1e400}})", StatusCode::kInvalidArgument,
       "parameters.seed", "'parameters.seed' is 1e400, a number past"},
      {R"({"text_input":"x","parameters":{"stop":["a",1e400]}})", StatusCode::kInvalidArgument,
       "parameters.stop[1]", "'parameters.stop[1]' is 1e400, a number past"},
      {"[]", StatusCode::kInvalidArgument, "", "must be a JSON object"},
      {R"({})", StatusCode::kInvalidArgument, "text_input", "'text_input' is required"},
      {R"({"text_input":null})", StatusCode::kInvalidArgument, "text_input", "is required"},
      {R"({"text_input":["a"]})", StatusCode::kInvalidArgument, "text_input",
       "must be a string, got an array"},
      {R"({"text_input":"x","parameters":[]})", StatusCode::kInvalidArgument, "parameters",
       "must be an object"},
      {R"({"text_input":"x","parameters":{"max_tokens":-3}})", StatusCode::kInvalidArgument,
       "parameters.max_tokens", "'parameters.max_tokens' must be at least 1, got -3"},
      {R"({"text_input":"x","max_tokens":"3"})", StatusCode::kInvalidArgument, "max_tokens",
       "must be an integer, got a string"},
      // `parameters` wins, but an invalid value in the other place is still refused.
      {R"({"text_input":"x","parameters":{"max_tokens":1},"max_tokens":-5})",
       StatusCode::kInvalidArgument, "max_tokens", "'max_tokens' must be at least 1, got -5"},
      {R"({"text_input":"x","priority":-2})", StatusCode::kInvalidArgument, "priority",
       "'priority' must be at least 0, got -2"},
      {R"({"text_input":"x","parameters":{"temperature":9}})", StatusCode::kInvalidArgument,
       "parameters.temperature", "from 0 to 2"},
      {R"({"text_input":"x","parameters":{"stop":["a","b","c","d","e"]}})",
       StatusCode::kInvalidArgument, "parameters.stop", "at most 4"},
      {R"({"text_input":"x","stop_words":[1]})", StatusCode::kInvalidArgument, "stop_words[0]",
       "must be a string"},
      {R"({"text_input":"x","parameters":{"stream":"yes"}})", StatusCode::kInvalidArgument,
       "parameters.stream", "must be a boolean"},
      {R"({"text_input":"x","stream":true})", StatusCode::kInvalidArgument, "stream",
       "generate_stream endpoint"},
  };
  for (const Case& c : cases) {
    std::string param = "unset";
    StatusOr<GenerationParams> p =
        ParseGenerateRequest(c.body, "m", GenerateEndpoint::kGenerate, {}, &param);
    ASSERT_FALSE(p.ok()) << c.body;
    EXPECT_EQ(p.status().code(), c.code) << c.body;
    EXPECT_EQ(param, c.param) << c.body;
    EXPECT_THAT(p.status().message(), HasSubstr(c.fragment)) << c.body;
  }
  RequestLimits limits;
  limits.max_text_bytes = 3;
  StatusOr<GenerationParams> p =
      ParseGenerateRequest(R"({"text_input":"four"})", "m", GenerateEndpoint::kGenerate, limits);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kPayloadTooLarge);
}

}  // namespace
}  // namespace harrier::openai
