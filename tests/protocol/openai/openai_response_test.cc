#include "protocol/openai/openai_response.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <limits>
#include <span>

namespace harrier::openai {
namespace {

using ::testing::MatchesRegex;

// Parses `json` strictly (simdjson also checks UTF-8); fails the test when it is not JSON.
simdjson::dom::element ParseJson(simdjson::dom::parser& parser, const std::string& json) {
  simdjson::dom::element root;
  const auto err = parser.parse(simdjson::padded_string(json)).get(root);
  EXPECT_EQ(err, simdjson::SUCCESS) << json;
  return root;
}

ResponseMeta Meta(bool include_usage = false) {
  ResponseMeta meta;
  meta.id = "chatcmpl-1";
  meta.created = 1700000000;
  meta.model = "llama";
  meta.include_usage = include_usage;
  return meta;
}

TEST(OpenAiResponseTest, ChatCompletion) {
  Choice choice;
  choice.text = "Hello!";
  choice.finish_reason = FinishReason::kLength;
  EXPECT_EQ(ChatCompletionJson(Meta(), std::span(&choice, 1), Usage{5, 2, 3}),
            R"({"id":"chatcmpl-1","object":"chat.completion","created":1700000000,)"
            R"("model":"llama","choices":[{"index":0,"message":{"role":"assistant",)"
            R"("content":"Hello!"},"logprobs":null,"finish_reason":"length"}],)"
            R"("usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7,)"
            R"("prompt_tokens_details":{"cached_tokens":3}}})");
}

TEST(OpenAiResponseTest, ChatCompletionWithSeveralChoicesAndLogprobs) {
  std::vector<Choice> choices(2);
  choices[0].text = "a";
  choices[1].index = 1;
  choices[1].text = "b";
  choices[1].logprobs = std::vector<TokenLogprob>{
      {"b", -0.5f, {{"b", -0.5f}, {"c", -std::numeric_limits<float>::infinity()}}}};
  EXPECT_EQ(ChatCompletionJson(Meta(), choices, Usage{1, 2}),
            R"({"id":"chatcmpl-1","object":"chat.completion","created":1700000000,)"
            R"("model":"llama","choices":[)"
            R"({"index":0,"message":{"role":"assistant","content":"a"},"logprobs":null,)"
            R"("finish_reason":"stop"},)"
            R"({"index":1,"message":{"role":"assistant","content":"b"},"logprobs":{"content":[)"
            R"({"token":"b","logprob":-0.5,"bytes":[98],"top_logprobs":[)"
            R"({"token":"b","logprob":-0.5,"bytes":[98]},)"
            R"({"token":"c","logprob":-9999.0,"bytes":[99]}]}],"refusal":null},)"
            R"("finish_reason":"stop"}],)"
            R"("usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,)"
            R"("prompt_tokens_details":{"cached_tokens":0}}})");
}

TEST(OpenAiResponseTest, Completion) {
  Choice choice;
  choice.text = " there";
  choice.logprobs =
      std::vector<TokenLogprob>{{" the", -0.25f, {{" the", -0.25f}, {" a", -2}}}, {"re", -1, {}}};
  EXPECT_EQ(CompletionJson(Meta(), std::span(&choice, 1), Usage{3, 2}),
            R"({"id":"chatcmpl-1","object":"text_completion","created":1700000000,)"
            R"("model":"llama","choices":[{"text":" there","index":0,"logprobs":{)"
            R"("tokens":[" the","re"],"token_logprobs":[-0.25,-1],)"
            R"("top_logprobs":[{" the":-0.25," a":-2},null],"text_offset":[0,4]},)"
            R"("finish_reason":"stop"}],)"
            R"("usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,)"
            R"("prompt_tokens_details":{"cached_tokens":0}}})");
}

TEST(OpenAiResponseTest, ChatStreamChunks) {
  const ResponseMeta meta = Meta();
  const std::string head =
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,)"
      R"("model":"llama",)";
  EXPECT_EQ(ChatRoleChunkJson(meta, 0),
            head + R"("choices":[{"index":0,"delta":{"role":"assistant","content":""},)"
                   R"("logprobs":null,"finish_reason":null}]})");
  EXPECT_EQ(ChatContentChunkJson(meta, 2, "Hi"),
            head + R"("choices":[{"index":2,"delta":{"content":"Hi"},"logprobs":null,)"
                   R"("finish_reason":null}]})");
  const std::vector<TokenLogprob> logprobs = {{"Hi", -0.125f, {}}};
  EXPECT_EQ(
      ChatContentChunkJson(meta, 0, "Hi", &logprobs),
      head +
          R"("choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":{"content":[)"
          R"({"token":"Hi","logprob":-0.125,"bytes":[72,105],"top_logprobs":[]}],"refusal":null},)"
          R"("finish_reason":null}]})");
  EXPECT_EQ(ChatFinishChunkJson(meta, 0, FinishReason::kStop),
            head + R"("choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]})");
  EXPECT_EQ(ChatUsageChunkJson(meta, Usage{4, 6}),
            head + R"("choices":[],"usage":{"prompt_tokens":4,"completion_tokens":6,)"
                   R"("total_tokens":10,"prompt_tokens_details":{"cached_tokens":0}}})");
}

TEST(OpenAiResponseTest, ChunksCarryNullUsageWhenTheClientAskedForTheUsageChunk) {
  const ResponseMeta meta = Meta(/*include_usage=*/true);
  for (const std::string& chunk :
       {ChatRoleChunkJson(meta, 0), ChatContentChunkJson(meta, 0, "x"),
        ChatFinishChunkJson(meta, 0, FinishReason::kLength), CompletionChunkJson(meta, 0, "x"),
        CompletionFinishChunkJson(meta, 0, FinishReason::kStop)}) {
    EXPECT_THAT(chunk, MatchesRegex(R"(.*\],"usage":null\}$)")) << chunk;
  }
  // The usage chunk has its figures, whatever the flag.
  EXPECT_THAT(ChatUsageChunkJson(meta, Usage{1, 1}), MatchesRegex(R"(.*"total_tokens":2,.*\}\}\}$)"));
}

TEST(OpenAiResponseTest, CompletionStreamChunks) {
  ResponseMeta meta = Meta();
  meta.id = "cmpl-1";
  const std::string head =
      R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"llama",)";
  EXPECT_EQ(CompletionChunkJson(meta, 0, "Once"),
            head + R"("choices":[{"text":"Once","index":0,"logprobs":null,)"
                   R"("finish_reason":null}]})");
  const std::vector<TokenLogprob> logprobs = {{" upon", -1, {}}};
  EXPECT_EQ(CompletionChunkJson(meta, 1, " upon", &logprobs, 4),
            head + R"("choices":[{"text":" upon","index":1,"logprobs":{"tokens":[" upon"],)"
                   R"("token_logprobs":[-1],"top_logprobs":[null],"text_offset":[4]},)"
                   R"("finish_reason":null}]})");
  EXPECT_EQ(CompletionFinishChunkJson(meta, 0, FinishReason::kLength),
            head + R"("choices":[{"text":"","index":0,"logprobs":null,)"
                   R"("finish_reason":"length"}]})");
  EXPECT_EQ(CompletionUsageChunkJson(meta, Usage{2, 3}),
            head + R"("choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3,)"
                   R"("total_tokens":5,"prompt_tokens_details":{"cached_tokens":0}}})");
}

TEST(OpenAiResponseTest, TextIsEscaped) {
  struct Case {
    std::string text;
    std::string json;  // as AppendJsonString writes it
  } cases[] = {
      {"say \"hi\"", R"("say \"hi\"")"},
      {"back\\slash", R"("back\\slash")"},
      {"line\nnext\r\ttab", R"("line\nnext\r\ttab")"},
      {std::string("nul\0bell\x07", 9) + "\x1f", R"("nul\u0000bell\u0007\u001f")"},
      {"\xC3\xA9\xF0\x9F\x98\x80", "\"\xC3\xA9\xF0\x9F\x98\x80\""},  // valid UTF-8 as is
      {"</script>", R"("</script>")"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ChatContentChunkJson(Meta(), 0, c.text),
              R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,)"
              R"("model":"llama","choices":[{"index":0,"delta":{"content":)" +
                  c.json + R"(},"logprobs":null,"finish_reason":null}]})")
        << c.text;
  }
}

TEST(OpenAiResponseTest, InvalidUtf8NeverMakesInvalidJson) {
  const std::string bad[] = {
      "\xFF",               // never valid
      "caf\xC3",            // a character cut short
      "\xED\xA0\x80",       // a surrogate
      "\xC0\xAF",           // overlong '/'
      "ok \xF0\x9F\x98",    // an emoji missing its last byte
      "\x80\x80\x80 tail",  // stray continuation bytes
  };
  simdjson::dom::parser parser;
  for (const std::string& text : bad) {
    ResponseMeta meta = Meta();
    meta.model = text;  // names too: a client's model name is echoed back
    Choice choice;
    choice.text = text;
    choice.logprobs = std::vector<TokenLogprob>{{text, -1, {{text, -1}}}};
    for (const std::string& json :
         {ChatCompletionJson(meta, std::span(&choice, 1), Usage{}),
          CompletionJson(meta, std::span(&choice, 1), Usage{}), ChatContentChunkJson(meta, 0, text),
          CompletionChunkJson(meta, 0, text), ModelJson(ModelEntry{text, 0})}) {
      ParseJson(parser, json);
      EXPECT_NE(json.find("\xEF\xBF\xBD"), std::string::npos) << json;  // U+FFFD
    }
  }
  // Chat logprobs keep the exact bytes beside the repaired text.
  Choice choice;
  choice.logprobs = std::vector<TokenLogprob>{{"\xE4\xBD", -1, {}}};
  const std::string json = ChatCompletionJson(Meta(), std::span(&choice, 1), Usage{});
  EXPECT_NE(json.find("\"token\":\"\xEF\xBF\xBD\",\"logprob\":-1,\"bytes\":[228,189]"),
            std::string::npos)
      << json;
}

TEST(OpenAiResponseTest, FinishReasonNames) {
  EXPECT_EQ(FinishReasonName(FinishReason::kStop), "stop");
  EXPECT_EQ(FinishReasonName(FinishReason::kLength), "length");
}

class CountingRandom : public RandomSource {
 public:
  void Fill(std::span<std::byte> out) override {
    for (std::byte& b : out) b = static_cast<std::byte>(next_++);
  }

 private:
  unsigned next_ = 0;
};

TEST(OpenAiResponseTest, ResponseIds) {
  CountingRandom random;
  EXPECT_EQ(NewChatCompletionId(random), "chatcmpl-000102030405060708090a0b0c0d0e0f");
  EXPECT_EQ(NewCompletionId(random), "cmpl-101112131415161718191a1b1c1d1e1f");
  EXPECT_THAT(NewChatCompletionId(SystemRandom()), MatchesRegex("chatcmpl-[0-9a-f]{32}"));
}

TEST(OpenAiResponseTest, ModelList) {
  const ModelEntry models[] = {{"llama", 1700000000}, {"qwen \"2\"", 5}};
  EXPECT_EQ(ModelListJson(models),
            R"({"object":"list","data":[)"
            R"({"id":"llama","object":"model","created":1700000000,"owned_by":"harrier"},)"
            R"({"id":"qwen \"2\"","object":"model","created":5,"owned_by":"harrier"}]})");
  EXPECT_EQ(ModelListJson({}), R"({"object":"list","data":[]})");
  EXPECT_EQ(ModelJson(models[0]),
            R"({"id":"llama","object":"model","created":1700000000,"owned_by":"harrier"})");
}

}  // namespace
}  // namespace harrier::openai
