#include "repository/version_policy.h"

#include <gtest/gtest.h>

#include "repository/model_config_parser.h"

namespace harrier {
namespace {

struct VersionPolicyCase {
  const char* policy;  // text of a ModelConfig's version_policy, "" for none
  std::vector<int64_t> available;
  std::vector<int64_t> selected;
  std::vector<int64_t> missing;
};

TEST(SelectVersionsTest, Table) {
  const VersionPolicyCase cases[] = {
      // Default: the single highest version.
      {"", {1, 2, 3}, {3}, {}},
      {"", {3, 1, 2}, {3}, {}},
      {"", {}, {}, {}},
      {"", {7}, {7}, {}},
      // latest
      {"latest { num_versions: 1 }", {1, 2, 3}, {3}, {}},
      {"latest { num_versions: 2 }", {5, 1, 3}, {3, 5}, {}},
      {"latest { num_versions: 10 }", {2, 1}, {1, 2}, {}},
      {"latest { num_versions: 2 }", {}, {}, {}},
      {"latest { num_versions: 2 }", {4, 4, 2, 2}, {2, 4}, {}},  // duplicates collapse
      {"latest { }", {1, 2}, {2}, {}},  // num_versions 0 is "not set": 1
      // all
      {"all { }", {3, 1, 2}, {1, 2, 3}, {}},
      {"all { }", {}, {}, {}},
      // specific
      {"specific { versions: [1, 3] }", {1, 2, 3}, {1, 3}, {}},
      {"specific { versions: [3, 1, 3] }", {1, 2, 3}, {1, 3}, {}},
      {"specific { versions: [2, 9] }", {1, 2, 3}, {2}, {9}},
      {"specific { versions: [8, 9] }", {1}, {}, {8, 9}},
      {"specific { versions: [1] }", {}, {}, {1}},
  };
  for (const VersionPolicyCase& c : cases) {
    std::string text = c.policy[0] ? std::string("version_policy { ") + c.policy + " }" : "";
    StatusOr<inference::ModelConfig> config = ParseModelConfig(text, "test");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    VersionSelection got = SelectVersions(config->version_policy(), c.available);
    std::string label =
        std::string("policy '") + c.policy + "' over " + ::testing::PrintToString(c.available);
    EXPECT_EQ(got.selected, c.selected) << label;
    EXPECT_EQ(got.missing, c.missing) << label;
  }
}

}  // namespace
}  // namespace harrier
