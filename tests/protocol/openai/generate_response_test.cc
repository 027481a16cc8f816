#include "protocol/openai/generate_response.h"

#include <gtest/gtest.h>

namespace harrier::openai {
namespace {

TEST(GenerateResponseTest, Shape) {
  EXPECT_EQ(GenerateResponseJson("llama", "1", "Machine learning is"),
            R"({"model_name":"llama","model_version":"1","text_output":"Machine learning is"})");
  EXPECT_EQ(GenerateResponseJson("m", "", ""),
            R"({"model_name":"m","model_version":"","text_output":""})");
}

TEST(GenerateResponseTest, TextIsEscapedAndRepaired) {
  EXPECT_EQ(GenerateResponseJson("m", "2", "a\"b\\c\n\x01\xE2\x82"),
            "{\"model_name\":\"m\",\"model_version\":\"2\","
            "\"text_output\":\"a\\\"b\\\\c\\n\\u0001\xEF\xBF\xBD\"}");
}

TEST(GenerateResponseTest, Error) {
  EXPECT_EQ(GenerateErrorJson("'text_input' is required"),
            R"({"error":"'text_input' is required"})");
}

}  // namespace
}  // namespace harrier::openai
