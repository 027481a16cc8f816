#include "observability/spdlog_log_control.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <optional>

namespace harrier {
namespace {

LogSettings Switches(bool info, bool warning, bool error, int verbose) {
  LogSettings s;
  s.log_info = info;
  s.log_warning = warning;
  s.log_error = error;
  s.log_verbose_level = verbose;
  return s;
}

TEST(LogThresholdTest, Table) {
  using spdlog::level::level_enum;
  struct Case {
    LogSettings settings;
    std::optional<level_enum> threshold;  // nullopt: refused
  } cases[] = {
      {Switches(true, true, true, 0), spdlog::level::info},
      {Switches(true, true, true, 1), spdlog::level::debug},
      {Switches(true, true, true, 2), spdlog::level::trace},
      {Switches(true, true, true, 7), spdlog::level::trace},
      {Switches(false, true, true, 0), spdlog::level::warn},
      {Switches(false, false, true, 0), spdlog::level::err},
      {Switches(false, false, false, 0), spdlog::level::off},
      {Switches(true, false, true, 0), std::nullopt},
      {Switches(false, true, false, 0), std::nullopt},
      {Switches(false, true, true, 1), std::nullopt},
      {Switches(true, true, true, -1), std::nullopt},
  };
  for (const Case& c : cases) {
    StatusOr<level_enum> got = LogThresholdFor(c.settings);
    if (!c.threshold) {
      EXPECT_FALSE(got.ok()) << c.settings.log_info << c.settings.log_warning
                             << c.settings.log_error << c.settings.log_verbose_level;
      continue;
    }
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, *c.threshold);
    // And back: the settings a threshold reports map to the same threshold.
    EXPECT_EQ(LogThresholdFor(LogSettingsFor(*got)).value(), *got);
  }
}

TEST(SpdlogLogControlTest, SetChangesTheDefaultLoggersLevelAndGetReportsIt) {
  const auto saved = spdlog::default_logger()->level();
  SpdlogLogControl control("text", "");
  spdlog::default_logger()->set_level(spdlog::level::info);
  LogSettings s = control.Get();
  EXPECT_EQ(s.log_verbose_level, 0);
  EXPECT_EQ(s.log_format, "text");
  s.log_verbose_level = 1;
  ASSERT_TRUE(control.Set(s).ok());
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::debug);
  EXPECT_EQ(control.Get().log_verbose_level, 1);
  s.log_format = "json";
  EXPECT_EQ(control.Set(s).code(), StatusCode::kInvalidArgument);
  spdlog::default_logger()->set_level(saved);
}

}  // namespace
}  // namespace harrier
