#include "auth/api_key_file.h"

#include <gtest/gtest.h>

#include <string>

namespace harrier::auth {
namespace {

std::string Hex(std::string_view key) {
  return Sha256Hex(Sha256(key));
}

std::string OneKey(std::string fields) {
  return R"({"keys": [{)" + fields + "}]}";
}

std::string Message(const std::string& text) {
  auto parsed = ParseApiKeyFile(text);
  EXPECT_FALSE(parsed.ok()) << text;
  return parsed.ok() ? std::string() : parsed.status().message();
}

TEST(ApiKeyFileTest, ParsesKeysInFileOrder) {
  const std::string text = R"({"keys": [
      {"id": "ci", "sha256": ")" +
                           Hex("k1") + R"(", "scopes": ["inference", "metadata"],
       "rate_limit": "50:100"},
      {"id": "ops.admin-1", "sha256": ")" +
                           Hex("k2") + R"(", "scopes": ["admin", "metrics"]}]})";
  auto keys = ParseApiKeyFile(text);
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  ASSERT_EQ(keys->size(), 2u);
  const ApiKeyEntry& ci = (*keys)[0];
  EXPECT_EQ(ci.id, "ci");
  EXPECT_EQ(ci.sha256, Sha256("k1"));
  EXPECT_EQ(ci.scopes, ScopeBit(Scope::kInference) | ScopeBit(Scope::kMetadata));
  EXPECT_DOUBLE_EQ(ci.rate_limit.per_second, 50);
  EXPECT_EQ(ci.rate_limit.burst, 100);
  const ApiKeyEntry& ops = (*keys)[1];
  EXPECT_EQ(ops.id, "ops.admin-1");
  EXPECT_EQ(ops.scopes, ScopeBit(Scope::kAdmin) | ScopeBit(Scope::kMetrics));
  EXPECT_FALSE(ops.rate_limit.enabled());
}

TEST(ApiKeyFileTest, AnEmptyListIsValid) {
  auto keys = ParseApiKeyFile(R"({"keys": []})");
  ASSERT_TRUE(keys.ok());
  EXPECT_TRUE(keys->empty());
}

TEST(ApiKeyFileTest, RateLimitOffMeansNone) {
  auto keys = ParseApiKeyFile(OneKey(R"("id": "a", "sha256": ")" + Hex("k") +
                                     R"(", "scopes": ["inference"], "rate_limit": "off")"));
  ASSERT_TRUE(keys.ok());
  EXPECT_FALSE((*keys)[0].rate_limit.enabled());
}

// Each bad file, and a piece of the message that must say what is wrong.
TEST(ApiKeyFileTest, BadFilesAreRefusedWithAReason) {
  const std::string h = Hex("k");
  const struct {
    std::string text;
    std::string says;
  } cases[] = {
      {"", "not JSON"},
      {"{\"keys\": [", "not JSON"},
      {"[]", "not a JSON object"},
      {"{}", "no \"keys\""},
      {R"({"keys": {}})", "not an array"},
      {R"({"keys": [], "extra": 1})", "unknown field \"extra\""},
      {R"({"keys": [1]})", "keys[0]: is not an object"},
      {OneKey(R"("sha256": ")" + h + R"(", "scopes": ["inference"])"), "has no \"id\""},
      {OneKey(R"("id": "", "sha256": ")" + h + R"(", "scopes": ["inference"])"), "\"id\" must be"},
      {OneKey(R"("id": "a b", "sha256": ")" + h + R"(", "scopes": ["inference"])"),
       "\"id\" must be"},
      {OneKey(R"("id": ")" + std::string(65, 'x') + R"(", "sha256": ")" + h +
              R"(", "scopes": ["inference"])"),
       "\"id\" must be"},
      {OneKey(R"("id": "a", "scopes": ["inference"])"), "(id 'a'): has no \"sha256\""},
      {OneKey(R"("id": "a", "sha256": "abc", "scopes": ["inference"])"), "64 hex digits"},
      {OneKey(R"("id": "a", "sha256": ")" + h.substr(0, 63) + R"(z", "scopes": ["inference"])"),
       "64 hex digits"},
      {OneKey(R"("id": "a", "sha256": 5, "scopes": ["inference"])"), "64 hex digits"},
      {OneKey(R"("id": "a", "sha256": ")" + h + R"(")"), "has no \"scopes\""},
      {OneKey(R"("id": "a", "sha256": ")" + h + R"(", "scopes": [])"), "\"scopes\" is empty"},
      {OneKey(R"("id": "a", "sha256": ")" + h + R"(", "scopes": ["root"])"),
       "unknown scope 'root'"},
      {OneKey(R"("id": "a", "sha256": ")" + h + R"(", "scopes": ["Admin"])"),
       "unknown scope 'Admin'"},
      {OneKey(R"("id": "a", "sha256": ")" + h + R"(", "scopes": "admin")"), "must be an array"},
      {OneKey(R"("id": "a", "sha256": ")" + h + R"(", "scopes": ["admin", "admin"])"),
       "scope 'admin' twice"},
      {OneKey(R"("id": "a", "sha256": ")" + h + R"(", "scopes": ["admin"], "rate_limit": "-1")"),
       "\"rate_limit\""},
      {OneKey(R"("id": "a", "sha256": ")" + h + R"(", "scopes": ["admin"], "rate_limit": 5)"),
       "\"rate_limit\" must be a string"},
      {OneKey(R"("id": "a", "sha256": ")" + h + R"(", "scope": ["admin"])"),
       "unknown field \"scope\""},
      {OneKey(R"("id": "a", "id": "b", "sha256": ")" + h + R"(", "scopes": ["admin"])"), "twice"},
  };
  for (const auto& c : cases) {
    EXPECT_NE(Message(c.text).find(c.says), std::string::npos)
        << c.text << "\n -> " << Message(c.text) << "\n expected: " << c.says;
  }
}

TEST(ApiKeyFileTest, DuplicateIdsAndDuplicateKeysAreRefused) {
  const std::string dup_id = R"({"keys": [
      {"id": "a", "sha256": ")" +
                             Hex("k1") + R"(", "scopes": ["inference"]},
      {"id": "a", "sha256": ")" +
                             Hex("k2") + R"(", "scopes": ["metadata"]}]})";
  EXPECT_NE(Message(dup_id).find("keys[1] (id 'a'): the id is used twice"), std::string::npos)
      << Message(dup_id);
  const std::string dup_key = R"({"keys": [
      {"id": "a", "sha256": ")" +
                              Hex("k1") + R"(", "scopes": ["inference"]},
      {"id": "b", "sha256": ")" +
                              Hex("k1") + R"(", "scopes": ["metadata"]}]})";
  EXPECT_NE(Message(dup_key).find("the same key (sha256) as 'a'"), std::string::npos)
      << Message(dup_key);
}

// Probe 47: a byte order mark (Windows editors) made the file "not JSON" with a message about
// commas. It is skipped; one elsewhere is still not JSON.
TEST(ApiKeyFileTest, ALeadingByteOrderMarkIsSkipped) {
  const std::string body =
      OneKey(R"("id": "a", "sha256": ")" + Hex("k") + R"(", "scopes": ["inference"])");
  auto keys = ParseApiKeyFile("\xEF\xBB\xBF" + body);
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ((*keys)[0].id, "a");
  EXPECT_NE(Message(body + "\xEF\xBB\xBF").find("not JSON"), std::string::npos);
}

// Many keys: each id and digest checked against the earlier ones by lookup, so a duplicate is
// found at any distance.
TEST(ApiKeyFileTest, ADuplicateFarDownALongFileIsFound) {
  std::string text = R"({"keys": [)";
  for (int i = 0; i < 5000; ++i) {
    text += std::string(i ? "," : "") + R"({"id": "k)" + std::to_string(i) + R"(", "sha256": ")" +
            Hex("key-" + std::to_string(i)) + R"(", "scopes": ["inference"]})";
  }
  auto keys = ParseApiKeyFile(text + "]}");
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ(keys->size(), 5000u);
  const std::string dup =
      text + R"(, {"id": "last", "sha256": ")" + Hex("key-17") + R"(", "scopes": ["inference"]}]})";
  EXPECT_NE(Message(dup).find("keys[5000] (id 'last'): the same key (sha256) as 'k17'"),
            std::string::npos)
      << Message(dup).substr(0, 200);
}

}  // namespace
}  // namespace harrier::auth
