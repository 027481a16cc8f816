#include "protocol/openai/openai_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace harrier::openai {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::string_literals;

GenerationParams ParseChatOk(std::string_view body, const RequestLimits& limits = {}) {
  std::string param = "unset";
  StatusOr<GenerationParams> p = ParseChatCompletionRequest(body, limits, &param);
  EXPECT_TRUE(p.ok()) << body << ": " << p.status().ToString();
  EXPECT_EQ(param, "") << body;
  return p.ok() ? *p : GenerationParams();
}

GenerationParams ParseCompletionOk(std::string_view body) {
  StatusOr<GenerationParams> p = ParseCompletionRequest(body);
  EXPECT_TRUE(p.ok()) << body << ": " << p.status().ToString();
  return p.ok() ? *p : GenerationParams();
}

TEST(ChatCompletionRequestTest, MinimalBodyTakesTheDefaults) {
  const GenerationParams p =
      ParseChatOk(R"({"model":"llama","messages":[{"role":"user","content":"Hi"}]})");
  EXPECT_EQ(p.model, "llama");
  EXPECT_TRUE(p.chat);
  ASSERT_EQ(p.messages.size(), 1u);
  EXPECT_EQ(p.messages[0].role, "user");
  EXPECT_EQ(p.messages[0].content, "Hi");
  EXPECT_EQ(p.prompt, "");
  EXPECT_EQ(p.max_tokens, -1);
  EXPECT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_EQ(p.min_p, 0.05f);
  EXPECT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_EQ(p.frequency_penalty, 0.0f);
  EXPECT_EQ(p.presence_penalty, 0.0f);
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_TRUE(p.stop.empty());
  EXPECT_FALSE(p.stream);
  EXPECT_FALSE(p.include_usage);
  EXPECT_EQ(p.n, 1);
  EXPECT_FALSE(p.logprobs);
  EXPECT_EQ(p.top_logprobs, 0);
  EXPECT_EQ(p.user, "");
}

TEST(ChatCompletionRequestTest, ReadsEveryField) {
  const GenerationParams p = ParseChatOk(R"({
    "model": "m", "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "developer", "content": "Really."},
      {"role": "user", "content": [{"type": "text", "text": "Hello, "}, {"type": "text", "text": "world"}]},
      {"role": "assistant", "content": null},
      {"role": "user", "content": [{"type": "text", "text": ""}], "name": "bob"}],
    "max_tokens": 64, "temperature": 0.5, "top_p": 0.9, "top_k": 10, "min_p": 0.1,
    "repetition_penalty": 1.1, "frequency_penalty": -0.5, "presence_penalty": 2,
    "seed": 4294967294, "stop": ["\n\n", "User:"], "stream": true,
    "stream_options": {"include_usage": true}, "n": 3, "logprobs": true, "top_logprobs": 5,
    "user": "u-1", "priority": 2, "tools": [], "logit_bias": {}, "response_format": {"type": "text"},
    "some_future_field": {"x": [1, 2]}, "metadata": null})");
  EXPECT_EQ(p.model, "m");
  ASSERT_EQ(p.messages.size(), 5u);
  EXPECT_EQ(p.messages[0].role, "system");
  EXPECT_EQ(p.messages[1].role, "system");  // developer
  EXPECT_EQ(p.messages[1].content, "Really.");
  EXPECT_EQ(p.messages[2].content, "Hello, world");
  EXPECT_EQ(p.messages[3].role, "assistant");
  EXPECT_EQ(p.messages[3].content, "");
  EXPECT_EQ(p.messages[4].content, "");
  EXPECT_EQ(p.max_tokens, 64);
  EXPECT_EQ(p.temperature, 0.5f);
  EXPECT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, 10);
  EXPECT_EQ(p.min_p, 0.1f);
  EXPECT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_EQ(p.frequency_penalty, -0.5f);
  EXPECT_EQ(p.presence_penalty, 2.0f);
  EXPECT_EQ(p.seed, 4294967294u);
  EXPECT_THAT(p.stop, ElementsAre("\n\n", "User:"));
  EXPECT_TRUE(p.stream);
  EXPECT_TRUE(p.include_usage);
  EXPECT_EQ(p.n, 3);
  EXPECT_TRUE(p.logprobs);
  EXPECT_EQ(p.top_logprobs, 5);
  EXPECT_EQ(p.user, "u-1");
  EXPECT_EQ(p.priority, 2);
}

TEST(ChatCompletionRequestTest, SmallVariants) {
  const std::string messages = R"("messages":[{"role":"user","content":"x"}])";
  auto parse = [&](std::string fields) {
    return ParseChatOk("{\"model\":\"m\"," + messages + "," + fields + "}");
  };
  // max_completion_tokens is max_tokens' newer name, and wins over it.
  EXPECT_EQ(parse(R"("max_completion_tokens":7)").max_tokens, 7);
  EXPECT_EQ(parse(R"("max_tokens":5,"max_completion_tokens":7)").max_tokens, 7);
  EXPECT_EQ(parse(R"("max_completion_tokens":7,"max_tokens":5)").max_tokens, 7);
  // Integers may be written as whole floats; numbers as integers.
  EXPECT_EQ(parse(R"("max_tokens":16.0)").max_tokens, 16);
  EXPECT_EQ(parse(R"("temperature":0)").temperature, 0.0f);
  // stop as one string.
  EXPECT_THAT(parse(R"("stop":"END")").stop, ElementsAre("END"));
  // null is "not sent" for every optional field.
  const GenerationParams nulls = parse(
      R"("max_tokens":null,"temperature":null,"stop":null,"seed":null,"n":null,"stream":null,)"
      R"("stream_options":null,"user":null,"logprobs":null,"tools":null)");
  EXPECT_EQ(nulls.max_tokens, -1);
  EXPECT_EQ(nulls.temperature, 1.0f);
  EXPECT_EQ(nulls.n, 1);
  // seed -1 is llama.cpp's "random".
  EXPECT_FALSE(parse(R"("seed":-1)").seed.has_value());
  // So is 4294967295, LLAMA_DEFAULT_SEED, which llama.cpp replaces with a random seed.
  EXPECT_FALSE(parse(R"("seed":4294967295)").seed.has_value());
  EXPECT_EQ(parse(R"("seed":0)").seed, 0u);
  // Written as a whole double, as the other integers may be (probe 78).
  EXPECT_EQ(parse(R"("seed":16.0)").seed, 16u);
  EXPECT_FALSE(parse(R"("seed":-1.0)").seed.has_value());
  // stream_options without include_usage.
  EXPECT_FALSE(parse(R"("stream":true,"stream_options":{})").include_usage);
  // The last of duplicate keys wins, as in most JSON readers.
  EXPECT_EQ(parse(R"("n":2,"n":4)").n, 4);
  // Asking for no tool call, with no tools, asks for nothing this server cannot do.
  for (const char* choice : {R"("tool_choice":"none")", R"("tool_choice":"auto")",
                             R"("function_call":"none")", R"("tool_choice":null)"}) {
    EXPECT_EQ(parse(choice).messages.size(), 1u) << choice;
  }
  // A participant's name is checked, then not used.
  const GenerationParams named =
      ParseChatOk(R"({"model":"m","messages":[{"role":"user","content":"x","name":"alice"}]})");
  EXPECT_EQ(named.messages[0].content, "x");
}

TEST(ChatCompletionRequestTest, MessageContentIsKeptByteForByte) {
  const GenerationParams p = ParseChatOk(
      R"({"model":"m","messages":[{"role":"user","content":"tab\t \"q\" \u00e9 \ud83d\ude00 \u0000"}]})");
  ASSERT_EQ(p.messages.size(), 1u);
  EXPECT_EQ(p.messages[0].content, "tab\t \"q\" \xC3\xA9 \xF0\x9F\x98\x80 \0"s);
}

struct RejectCase {
  const char* body;
  StatusCode code;
  const char* param;
  const char* fragment;
};

void ExpectRejects(const RejectCase& c,
                   StatusOr<GenerationParams> (*parse)(std::string_view, const RequestLimits&,
                                                       std::string*),
                   const RequestLimits& limits = {}) {
  std::string param = "unset";
  StatusOr<GenerationParams> p = parse(c.body, limits, &param);
  ASSERT_FALSE(p.ok()) << c.body;
  EXPECT_EQ(p.status().code(), c.code) << c.body << ": " << p.status().ToString();
  EXPECT_EQ(param, c.param) << c.body;
  EXPECT_THAT(p.status().message(), HasSubstr(c.fragment)) << c.body;
}

// {"model":"m","messages":[...], <fields>}
std::string Chat(std::string_view fields) {
  return R"({"model":"m","messages":[{"role":"user","content":"x"}])" +
         (fields.empty() ? std::string() : "," + std::string(fields)) + "}";
}

TEST(ChatCompletionRequestTest, Rejects) {
  struct Case {
    std::string body;
    std::string param;
    std::string fragment;
  };
  const Case cases[] = {
      // Not JSON, or not an object.
      {"", "", "not valid JSON"},
      {"{", "", "not valid JSON"},
      {R"({"model":"m",})", "", "not valid JSON"},
      // Valid JSON, with a number past 64 bits or a double's range: the field is named.
      {Chat(R"("max_tokens":1000000000000000000000000000000)"), "max_tokens",
       "'max_tokens' is 1000000000000000000000000000000, a number past what any field"},
      {Chat(R"("temperature":1e999)"), "temperature", "'temperature' is 1e999, a number past"},
      {Chat(R"("seed":18446744073709551616)"), "seed", "'seed' is 18446744073709551616"},
      {Chat(R"("stream_options":{"x":-1e999})"), "stream_options.x", "is -1e999"},
      {Chat(R"("logit_bias":{"1":1e999})"), "logit_bias.1", "'logit_bias.1' is 1e999"},
      // In arrays too, down to four levels of objects and arrays below the body.
      {Chat(R"("stop":[1e999])"), "stop[0]", "'stop[0]' is 1e999, a number past"},
      {Chat(R"("stop":["a",-1e999])"), "stop[1]", "'stop[1]' is -1e999"},
      {R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":1e999}]}]})",
       "messages[0].content[0].text", "'messages[0].content[0].text' is 1e999"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":1e999}]})",
       "messages[1].role", "'messages[1].role' is 1e999"},
      {Chat(R"("x":[[[[1e999]]]])"), "x[0][0][0][0]", "'x[0][0][0][0]' is 1e999"},
      {Chat(R"("x":{"y":{"z":[1e999]}})"), "x.y.z[0]", "'x.y.z[0]' is 1e999"},
      {Chat(R"("x":[[[[[1e999]]]]])"), "", "not valid JSON"},  // five levels: not looked for
      {"[1]", "", "must be a JSON object, got an array"},
      {"\"x\"", "", "must be a JSON object, got a string"},
      // Required fields.
      {R"({"messages":[{"role":"user","content":"x"}]})", "model", "'model' is required"},
      {R"({"model":null,"messages":[{"role":"user","content":"x"}]})", "model", "required"},
      {R"({"model":"","messages":[{"role":"user","content":"x"}]})", "model", "not be empty"},
      {R"({"model":7,"messages":[]})", "model", "'model' must be a string, got an integer"},
      {R"({"model":"m"})", "messages", "'messages' is required"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"priority":-1})", "priority",
       "'priority' must be at least 0"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"priority":1.5})", "priority",
       "must be an integer"},
      {R"({"model":"m","messages":[]})", "messages", "at least one message"},
      {R"({"model":"m","messages":{}})", "messages", "must be an array, got an object"},
      // Messages.
      {R"({"model":"m","messages":["hi"]})", "messages[0]", "must be an object, got a string"},
      {R"({"model":"m","messages":[{"content":"x"}]})", "messages[0].role", "is required"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"robot","content":"x"}]})",
       "messages[1].role", "must be one of system, developer, user, assistant; got 'robot'"},
      {R"({"model":"m","messages":[{"role":1,"content":"x"}]})", "messages[0].role",
       "must be a string"},
      {R"({"model":"m","messages":[{"role":"tool","content":"x","tool_call_id":"a"}]})",
       "messages[0].role", "does not call tools"},
      {R"({"model":"m","messages":[{"role":"user"}]})", "messages[0].content", "is required"},
      {R"({"model":"m","messages":[{"role":"user","content":null}]})", "messages[0].content",
       "is required"},
      {R"({"model":"m","messages":[{"role":"user","content":5}]})", "messages[0].content",
       "a string or an array of content parts, got an integer"},
      {R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})",
       "messages[0].content[0].type", "'image_url'"},
      {R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"text":"b"}]}]})",
       "messages[0].content[1].type", "must be a string"},
      {R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":3}]}]})",
       "messages[0].content[0].text", "must be a string"},
      {R"({"model":"m","messages":[{"role":"user","content":["text"]}]})", "messages[0].content[0]",
       "must be an object"},
      {R"({"model":"m","messages":[{"role":"user","content":[]}]})", "messages[0].content",
       "is an empty array"},
      {R"({"model":"m","messages":[{"role":"assistant","content":"","tool_calls":[{"id":"1"}]}]})",
       "messages[0].tool_calls", "does not call tools"},
      {R"({"model":"m","messages":[{"role":"user","content":"x","name":5}]})", "messages[0].name",
       "must be a string"},
      // Numbers.
      {Chat(R"("max_tokens":"5")"), "max_tokens", "'max_tokens' must be an integer, got a string"},
      {Chat(R"("max_tokens":-5)"), "max_tokens", "'max_tokens' must be at least 1, got -5"},
      {Chat(R"("max_tokens":0)"), "max_tokens", "at least 1, got 0"},
      {Chat(R"("max_tokens":1.5)"), "max_tokens", "must be an integer, got 1.5"},
      {Chat(R"("max_tokens":3000000000)"), "max_tokens", "at most 2147483647"},
      {Chat(R"("max_tokens":18446744073709551615)"), "max_tokens", "at most"},
      {Chat(R"("max_tokens":1e30)"), "max_tokens", "must be from 1 to 2147483647"},
      {Chat(R"("max_completion_tokens":-1)"), "max_completion_tokens", "at least 1"},
      {Chat(R"("temperature":2.5)"), "temperature", "'temperature' must be from 0 to 2, got 2.5"},
      {Chat(R"("temperature":-0.1)"), "temperature", "from 0 to 2"},
      {Chat(R"("temperature":"hot")"), "temperature", "must be a number, got a string"},
      {Chat(R"("top_p":1.5)"), "top_p", "from 0 to 1"},
      {Chat(R"("top_k":-1)"), "top_k", "at least 0"},
      {Chat(R"("min_p":2)"), "min_p", "from 0 to 1"},
      {Chat(R"("repetition_penalty":0)"), "repetition_penalty", "above 0"},
      {Chat(R"("frequency_penalty":3)"), "frequency_penalty", "from -2 to 2"},
      {Chat(R"("presence_penalty":-2.5)"), "presence_penalty", "from -2 to 2"},
      {Chat(R"("seed":-2)"), "seed", "from 0 to 4294967294"},
      {Chat(R"("seed":4294967296)"), "seed", "from 0 to 4294967294"},
      {Chat(R"("seed":1.5)"), "seed", "must be an integer"},
      {Chat(R"("seed":4294967296.0)"), "seed", "from 0 to 4294967294"},
      // Past int64 but within 64 bits: the range, as for the double (probe 80).
      {Chat(R"("seed":18446744073709551615)"), "seed", "from 0 to 4294967294"},
      {Chat(R"("seed":-2.0)"), "seed", "from 0 to 4294967294"},
      {Chat(R"("n":0)"), "n", "'n' must be at least 1, got 0"},
      {Chat(R"("n":9)"), "n", "'n' must be at most 8, got 9"},
      {Chat(R"("n":true)"), "n", "must be an integer, got a boolean"},
      // Stop.
      {Chat(R"("stop":["a","b","c","d","e"])"), "stop", "has 5 sequences; at most 4"},
      {Chat(R"("stop":["a",3])"), "stop[1]", "'stop[1]' must be a string, got an integer"},
      {Chat(R"("stop":"")"), "stop", "must not be empty"},
      {Chat(R"("stop":{"a":1})"), "stop", "a string or an array of strings"},
      // Booleans and objects.
      {Chat(R"("stream":"true")"), "stream", "'stream' must be a boolean, got a string"},
      {Chat(R"("stream":1)"), "stream", "must be a boolean"},
      {Chat(R"("stream_options":{"include_usage":true})"), "stream_options",
       "only allowed when 'stream' is true"},
      {Chat(R"("stream":true,"stream_options":{"include_usage":1})"),
       "stream_options.include_usage", "must be a boolean"},
      {Chat(R"("stream":true,"stream_options":true)"), "stream_options", "must be an object"},
      {Chat(R"("logprobs":1)"), "logprobs", "must be a boolean"},
      {Chat(R"("top_logprobs":3)"), "top_logprobs", "needs 'logprobs' to be true"},
      {Chat(R"("logprobs":true,"top_logprobs":21)"), "top_logprobs", "at most 20"},
      {Chat(R"("user":42)"), "user", "must be a string"},
      {Chat(R"("user":")" + std::string(300, 'u') + "\""), "user", "at most 256 bytes"},
      // Features that would change the answer if ignored.
      {Chat(R"("tools":[{"type":"function","function":{"name":"f"}}])"), "tools",
       "does not call tools"},
      {Chat(R"("functions":[{"name":"f"}])"), "functions", "does not call tools"},
      {Chat(R"("tool_choice":"required")"), "tool_choice", "does not call tools"},
      {Chat(R"("tool_choice":{"type":"function","function":{"name":"f"}})"), "tool_choice",
       "does not call tools"},
      {Chat(R"("function_call":{"name":"f"})"), "function_call", "does not call tools"},
      {Chat(R"("response_format":{"type":"json_object"})"), "response_format", "not supported"},
      {Chat(R"("response_format":"json")"), "response_format", "must be an object"},
      {Chat(R"("logit_bias":{"50256":-100})"), "logit_bias", "not supported"},
  };
  for (const Case& c : cases) {
    ExpectRejects(
        {c.body.c_str(), StatusCode::kInvalidArgument, c.param.c_str(), c.fragment.c_str()},
        ParseChatCompletionRequest);
  }
}

TEST(ChatCompletionRequestTest, LimitsAreBoundedAndConfigurable) {
  RequestLimits limits;
  limits.max_messages = 2;
  limits.max_text_bytes = 10;
  limits.max_stop_sequences = 1;
  limits.max_stop_bytes = 3;
  limits.max_n = 2;
  const RejectCase cases[] = {
      {R"({"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"}]})",
       StatusCode::kPayloadTooLarge, "messages", "holds 3 messages; this server takes at most 2"},
      {R"({"model":"m","messages":[{"role":"user","content":"123456"},{"role":"user","content":"78901"}]})",
       StatusCode::kPayloadTooLarge, "messages[1].content", "over 10 bytes"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"stop":["a","b"]})",
       StatusCode::kInvalidArgument, "stop", "at most 1 are allowed"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"stop":"abcd"})",
       StatusCode::kInvalidArgument, "stop", "is 4 bytes long; a stop sequence may have at most 3"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"n":3})",
       StatusCode::kInvalidArgument, "n", "at most 2"},
  };
  for (const RejectCase& c : cases) ExpectRejects(c, ParseChatCompletionRequest, limits);
  // Exactly at the limits is fine.
  const GenerationParams p = ParseChatOk(
      R"({"model":"m","messages":[{"role":"user","content":"12345"},{"role":"user","content":"67890"}],"stop":"abc","n":2})",
      limits);
  EXPECT_EQ(p.messages.size(), 2u);
}

TEST(CompletionRequestTest, ReadsThePromptAndItsOwnFields) {
  GenerationParams p = ParseCompletionOk(
      R"({"model":"m","prompt":"Once upon","max_tokens":8,"logprobs":3,"echo":false,)"
      R"("suffix":"","best_of":2,"n":2,"stream":true,"stream_options":{"include_usage":true}})");
  EXPECT_FALSE(p.chat);
  EXPECT_EQ(p.prompt, "Once upon");
  EXPECT_TRUE(p.messages.empty());
  EXPECT_EQ(p.max_tokens, 8);
  EXPECT_TRUE(p.logprobs);
  EXPECT_EQ(p.top_logprobs, 3);
  EXPECT_EQ(p.n, 2);
  EXPECT_TRUE(p.include_usage);
  // Harrier's default is "until a stop", not the legacy API's 16.
  EXPECT_EQ(ParseCompletionOk(R"({"model":"m","prompt":""})").max_tokens, -1);
  // logprobs 0: the chosen tokens' logprobs, no alternatives.
  p = ParseCompletionOk(R"({"model":"m","prompt":"x","logprobs":0})");
  EXPECT_TRUE(p.logprobs);
  EXPECT_EQ(p.top_logprobs, 0);
  // One prompt wrapped in an array.
  EXPECT_EQ(ParseCompletionOk(R"({"model":"m","prompt":["only"]})").prompt, "only");
}

TEST(CompletionRequestTest, Rejects) {
  const auto kBad = StatusCode::kInvalidArgument;
  const RejectCase cases[] = {
      {R"({"model":"m"})", kBad, "prompt", "'prompt' is required"},
      {R"({"model":"m","prompt":null})", kBad, "prompt", "'prompt' is required"},
      {R"({"model":"m","prompt":3})", kBad, "prompt", "must be a string, got an integer"},
      {R"({"model":"m","prompt":["a","b"]})", kBad, "prompt", "one prompt per request"},
      {R"({"model":"m","prompt":[]})", kBad, "prompt", "one prompt per request"},
      {R"({"model":"m","prompt":[1,2,3]})", kBad, "prompt", "token-id prompts"},
      {R"({"model":"m","prompt":[7]})", kBad, "prompt", "token-id prompts"},
      {R"({"model":"m","prompt":[[1,2]]})", kBad, "prompt", "token-id prompts"},
      {R"({"model":"m","prompt":[1e999]})", kBad, "prompt[0]", "'prompt[0]' is 1e999, a number"},
      {R"({"prompt":"x"})", kBad, "model", "'model' is required"},
      {R"({"model":"m","prompt":"x","logprobs":6})", kBad, "logprobs", "at most 5"},
      {R"({"model":"m","prompt":"x","logprobs":true})", kBad, "logprobs", "must be an integer"},
      {R"({"model":"m","prompt":"x","echo":true})", kBad, "echo", "not supported"},
      {R"({"model":"m","prompt":"x","suffix":"end"})", kBad, "suffix", "not supported"},
      {R"({"model":"m","prompt":"x","best_of":3})", kBad, "best_of", "must equal 'n'"},
      {R"({"model":"m","prompt":"x","max_tokens":-1})", kBad, "max_tokens", "at least 1"},
      {R"({"model":"m","prompt":"x","stop":["a","b","c","d","e"]})", kBad, "stop", "at most 4"},
  };
  for (const RejectCase& c : cases) ExpectRejects(c, ParseCompletionRequest);
  RequestLimits limits;
  limits.max_text_bytes = 4;
  ExpectRejects(
      {R"({"model":"m","prompt":"12345"})", StatusCode::kPayloadTooLarge, "prompt", "over 4 bytes"},
      ParseCompletionRequest, limits);
}

TEST(CompletionRequestTest, ChatOnlyFieldsAreUnknownHereAndIgnored) {
  // messages, tools and max_completion_tokens belong to chat: a completion body's copy of
  // them is an unknown field like any other.
  const GenerationParams p = ParseCompletionOk(
      R"({"model":"m","prompt":"x","messages":5,"tools":[1],"max_completion_tokens":"z"})");
  EXPECT_EQ(p.prompt, "x");
  EXPECT_EQ(p.max_tokens, -1);
}

}  // namespace
}  // namespace harrier::openai
