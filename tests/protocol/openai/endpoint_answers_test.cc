#include "protocol/openai/endpoint_answers.h"

#include <gtest/gtest.h>

#include <string>

namespace harrier::openai {
namespace {

std::string Header(const HttpResponse& r, std::string_view name) {
  for (const auto& [field, value] : r.headers)
    if (field == name) return std::string(value);
  return "";
}

TEST(EndpointAnswers, ErrorsTakeTheShapeOfTheEndpointsApi) {
  const Status bad = InvalidArgument("'temperature' must be at most 2");
  HttpResponse openai = ErrorResponse(kChat, bad, "temperature");
  EXPECT_EQ(openai.status, 400);
  EXPECT_EQ(Header(openai, "Content-Type"), "application/json");
  EXPECT_NE(openai.body.find(R"("param":"temperature")"), std::string::npos) << openai.body;
  EXPECT_NE(openai.body.find(R"("type":"invalid_request_error")"), std::string::npos)
      << openai.body;
  for (int kind : {kGenerate, kGenerateStream}) {
    HttpResponse triton = ErrorResponse(kind, bad);
    EXPECT_EQ(triton.status, 400);
    EXPECT_EQ(triton.body, R"({"error":"'temperature' must be at most 2"})");
  }
}

TEST(EndpointAnswers, ABusyRefusalCarriesRetryAfter) {
  HttpResponse r = ErrorResponse(kCompletion, ResourceExhausted("queue full; retry after 3 s"));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(Header(r, "Retry-After"), "3");
  EXPECT_EQ(Header(ErrorResponse(kCompletion, NotFound("no")), "Retry-After"), "");
}

TEST(EndpointAnswers, APromptOverTheContextNamesItsFieldAndOpenAisCode) {
  const Status long_prompt =
      InvalidArgument("the prompt is 5000 tokens, more than the model's context of 4096");
  HttpResponse chat = RefusalResponse(kChat, long_prompt);
  EXPECT_EQ(chat.status, 400);
  EXPECT_NE(chat.body.find(R"("param":"messages")"), std::string::npos) << chat.body;
  EXPECT_NE(chat.body.find(R"("code":"context_length_exceeded")"), std::string::npos);
  HttpResponse completion = RefusalResponse(kCompletion, long_prompt);
  EXPECT_NE(completion.body.find(R"("param":"prompt")"), std::string::npos) << completion.body;
  // Any other refusal is a plain error.
  HttpResponse other = RefusalResponse(kChat, InvalidArgument("the prompt is empty"));
  EXPECT_EQ(other.body.find("context_length_exceeded"), std::string::npos);
}

TEST(EndpointAnswers, OnlyTheLengthLimitReadsAsLength) {
  EXPECT_EQ(WireReason(harrier::FinishReason::kLength), openai::FinishReason::kLength);
  EXPECT_EQ(WireReason(harrier::FinishReason::kStop), openai::FinishReason::kStop);
}

}  // namespace
}  // namespace harrier::openai
