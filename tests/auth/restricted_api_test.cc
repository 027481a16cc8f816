#include "auth/restricted_api.h"

#include <gtest/gtest.h>

namespace harrier::auth {
namespace {

size_t Bit(ApiGroup g) {
  return static_cast<size_t>(g);
}

TEST(RestrictedApiTest, ParsesTritonsFormat) {
  auto r = ParseApiRestrictions({"model-repository,logging:Admin-Key=s3cr=et", "inference:x=y"},
                                "--http-restricted-api");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_TRUE((*r)[0].groups.test(Bit(ApiGroup::kModelRepository)));
  EXPECT_TRUE((*r)[0].groups.test(Bit(ApiGroup::kLogging)));
  EXPECT_EQ((*r)[0].groups.count(), 2u);
  EXPECT_EQ((*r)[0].header, "admin-key");  // names are matched lower-cased
  EXPECT_EQ((*r)[0].value, "s3cr=et");     // the value as given, past the first '='
  EXPECT_TRUE((*r)[1].groups.test(Bit(ApiGroup::kInference)));
}

TEST(RestrictedApiTest, EveryTritonGroupNameIsKnown) {
  for (const char* name : {"health", "metadata", "inference", "shared-memory", "model-config",
                           "model-repository", "statistics", "trace", "logging"}) {
    auto r = ParseApiRestrictions({std::string(name) + ":h=v"}, "--flag");
    EXPECT_TRUE(r.ok()) << name;
  }
}

TEST(RestrictedApiTest, BadValuesNameTheFlagAndTheProblem) {
  const struct {
    std::vector<std::string> values;
    std::string says;
  } cases[] = {
      {{"inference"}, "no ':'"},
      {{"inference:header"}, "no '='"},
      {{":h=v"}, "no API group"},
      {{"inference:=v"}, "empty header name"},
      {{"inference:h="}, "empty header value"},
      {{"metrics:h=v"}, "unknown restricted protocol 'metrics'"},
      {{"inference,,metadata:h=v"}, "unknown restricted protocol ''"},
      {{"model-reposit,health:k1=v1"}, "unknown restricted protocol 'model-reposit'"},
      {{"inference,inference:h=v"}, "'inference' can not be specified in multiple config groups"},
      {{"inference:h=v", "metadata,inference:k=w"},
       "protocol 'inference' can not be specified in multiple config groups"},
  };
  for (const auto& c : cases) {
    auto r = ParseApiRestrictions(c.values, "--grpc-restricted-protocol");
    ASSERT_FALSE(r.ok()) << c.values[0];
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("--grpc-restricted-protocol"), std::string::npos);
  }
}

// The REST flag's words are Triton's for it: "api" where the gRPC flag says "protocol".
TEST(RestrictedApiTest, TheRestFlagSaysApi) {
  auto unknown = ParseApiRestrictions({"model-reposit,health:k1=v1"}, "--http-restricted-api");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown restricted api 'model-reposit'"),
            std::string::npos)
      << unknown.status().message();
  auto twice = ParseApiRestrictions({"health:h=v", "health:k=w"}, "--http-restricted-api");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("api 'health' can not be specified in multiple config "
                                          "groups"),
            std::string::npos)
      << twice.status().message();
}

}  // namespace
}  // namespace harrier::auth
