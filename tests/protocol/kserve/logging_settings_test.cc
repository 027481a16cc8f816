#include "protocol/kserve/logging_settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace harrier::kserve {
namespace {

using ::testing::HasSubstr;

TEST(LoggingSettingsTest, Json) {
  LogSettings s;
  s.log_verbose_level = 1;
  s.log_format = "json";
  EXPECT_EQ(LogSettingsJson(s),
            R"({"log_file":"","log_info":true,"log_warning":true,"log_error":true,)"
            R"("log_verbose_level":1,"log_format":"json"})");
}

TEST(LoggingSettingsTest, AppliesTheGivenFieldsOnly) {
  LogSettings current;
  current.log_format = "text";
  StatusOr<LogSettings> s = ApplyLogSettingsJson(R"({"log_verbose_level":2})", current);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->log_verbose_level, 2);
  EXPECT_TRUE(s->log_info);
  EXPECT_EQ(s->log_format, "text");
  s = ApplyLogSettingsJson(R"({"log_info":false,"log_warning":false,"log_file":""})", current);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->log_info);
  EXPECT_FALSE(s->log_warning);
  EXPECT_TRUE(s->log_error);
  s = ApplyLogSettingsJson("{}", current);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->log_verbose_level, 0);
}

TEST(LoggingSettingsTest, Rejects) {
  const LogSettings current;
  struct Case {
    const char* body;
    const char* fragment;
  } cases[] = {
      {"", "failed to parse the request JSON buffer"},
      {"{", "failed to parse the request JSON buffer"},
      {"[1]", "must be a JSON object"},
      {R"({"log_level":1})", "unknown field 'log_level'"},
      {R"({"log_info":1})", "'log_info' must be a bool"},
      {R"({"log_verbose_level":-1})", "log_verbose_level"},
      {R"({"log_verbose_level":"1"})", "log_verbose_level"},
      {R"({"log_verbose_level":1.5})", "log_verbose_level"},
      {R"({"log_file":3})", "'log_file' must be a string"},
  };
  for (const Case& c : cases) {
    StatusOr<LogSettings> s = ApplyLogSettingsJson(c.body, current);
    ASSERT_FALSE(s.ok()) << c.body;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_THAT(s.status().message(), HasSubstr(c.fragment)) << c.body;
  }
}

}  // namespace
}  // namespace harrier::kserve
