#include "auth/access_scope.h"

#include <gtest/gtest.h>

namespace harrier::auth {
namespace {

using G = ApiGroup;
using S = Scope;
constexpr std::optional<Scope> kOpen = std::nullopt;

TEST(AccessScopeTest, ScopeNamesRoundTrip) {
  for (Scope s : {S::kInference, S::kMetadata, S::kAdmin, S::kMetrics}) {
    EXPECT_EQ(ParseScope(ScopeName(s)), s);
  }
  EXPECT_FALSE(ParseScope("ADMIN"));
  EXPECT_FALSE(ParseScope(""));
}

TEST(AccessScopeTest, HttpRoutes) {
  const struct {
    const char* method;
    const char* target;
    ApiGroup group;
    std::optional<Scope> scope;
  } cases[] = {
      {"GET", "/v2/health/live", G::kHealth, kOpen},
      {"GET", "/v2/health/ready?verbose=1", G::kHealth, kOpen},
      {"GET", "/v2/health/other", G::kMetadata, S::kMetadata},  // not a probe: not open
      {"GET", "/v2", G::kMetadata, S::kMetadata},
      {"GET", "/v2/models/simple", G::kMetadata, S::kMetadata},
      {"GET", "/v2/models/simple/versions/2", G::kMetadata, S::kMetadata},
      {"GET", "/v2/models/simple/ready", G::kHealth, S::kMetadata},
      {"GET", "/v2/models/simple/versions/1/ready", G::kHealth, S::kMetadata},
      {"GET", "/v2/models/simple/config", G::kModelConfig, S::kMetadata},
      {"GET", "/v2/models/simple/versions/1/stats", G::kStatistics, S::kMetadata},
      {"GET", "/v2/models/stats", G::kStatistics, S::kMetadata},
      {"POST", "/v2/models/simple/infer", G::kInference, S::kInference},
      {"POST", "/v2/models/simple/versions/3/infer", G::kInference, S::kInference},
      {"POST", "/v2/models/llm/generate", G::kInference, S::kInference},
      {"POST", "/v2/models/llm/generate_stream", G::kInference, S::kInference},
      {"POST", "/v2/repository/index", G::kModelRepository, S::kMetadata},
      {"POST", "/v2/repository/models/simple/load", G::kModelRepository, S::kAdmin},
      {"POST", "/v2/repository/models/simple/unload", G::kModelRepository, S::kAdmin},
      {"GET", "/v2/models/simple/traffic", G::kModelRepository, S::kMetadata},
      {"PUT", "/v2/models/simple/traffic", G::kModelRepository, S::kAdmin},
      {"DELETE", "/v2/models/simple/traffic", G::kModelRepository, S::kAdmin},
      {"GET", "/v2/logging", G::kLogging, S::kMetadata},
      {"POST", "/v2/logging", G::kLogging, S::kAdmin},
      {"GET", "/v2/trace/setting", G::kTrace, S::kMetadata},
      {"POST", "/v2/trace/setting", G::kTrace, S::kAdmin},
      {"POST", "/v2/models/simple/trace/setting", G::kTrace, S::kAdmin},
      {"GET", "/v2/systemsharedmemory/status", G::kSharedMemory, S::kInference},
      {"POST", "/v2/systemsharedmemory/region/r/register", G::kSharedMemory, S::kInference},
      {"GET", "/v2/cudasharedmemory/status", G::kSharedMemory, S::kInference},
      {"GET", "/v1/models", G::kMetadata, S::kMetadata},
      {"GET", "/v1/models/llm", G::kMetadata, S::kMetadata},
      {"POST", "/v1/chat/completions", G::kInference, S::kInference},
      {"POST", "/v1/completions", G::kInference, S::kInference},
      {"GET", "/v1/streams/abc", G::kInference, S::kInference},
      {"GET", "/dashboard", G::kMetadata, S::kMetadata},
      {"GET", "/v2/dashboard/summary", G::kMetadata, S::kMetadata},
      {"GET", "/metrics", G::kMetrics, S::kMetrics},
      {"GET", "/no/such/path", G::kMetadata, S::kMetadata},
      {"GET", "", G::kMetadata, S::kMetadata},
  };
  for (const auto& c : cases) {
    const RouteAccess a = RouteAccessForHttp(c.method, c.target);
    EXPECT_EQ(a.group, c.group) << c.method << " " << c.target;
    EXPECT_EQ(a.scope, c.scope) << c.method << " " << c.target;
  }
}

TEST(AccessScopeTest, GrpcMethods) {
  const struct {
    const char* rpc;
    ApiGroup group;
    std::optional<Scope> scope;
  } cases[] = {
      {"ServerLive", G::kHealth, kOpen},
      {"ServerReady", G::kHealth, kOpen},
      {"ModelReady", G::kHealth, S::kMetadata},
      {"ServerMetadata", G::kMetadata, S::kMetadata},
      {"ModelMetadata", G::kMetadata, S::kMetadata},
      {"ModelInfer", G::kInference, S::kInference},
      {"ModelStreamInfer", G::kInference, S::kInference},
      {"ModelConfig", G::kModelConfig, S::kMetadata},
      {"ModelStatistics", G::kStatistics, S::kMetadata},
      {"RepositoryIndex", G::kModelRepository, S::kMetadata},
      {"RepositoryModelLoad", G::kModelRepository, S::kAdmin},
      {"RepositoryModelUnload", G::kModelRepository, S::kAdmin},
      {"SystemSharedMemoryRegister", G::kSharedMemory, S::kInference},
      {"CudaSharedMemoryStatus", G::kSharedMemory, S::kInference},
      {"TraceSetting", G::kTrace, S::kAdmin},
      {"LogSettings", G::kLogging, S::kAdmin},
      {"NoSuchMethod", G::kMetadata, S::kMetadata},
  };
  for (const auto& c : cases) {
    const RouteAccess a =
        RouteAccessForGrpc(std::string("/inference.GRPCInferenceService/") + c.rpc);
    EXPECT_EQ(a.group, c.group) << c.rpc;
    EXPECT_EQ(a.scope, c.scope) << c.rpc;
  }
  // Another service's health probe is not this server's: it needs a key.
  EXPECT_EQ(RouteAccessForGrpc("/other.Service/ServerLive").scope, S::kMetadata);
  // gRPC's health-checking protocol: open, in Triton's health group.
  EXPECT_EQ(RouteAccessForGrpc("/grpc.health.v1.Health/Check").group, G::kHealth);
  EXPECT_EQ(RouteAccessForGrpc("/grpc.health.v1.Health/Check").scope, kOpen);
}

}  // namespace
}  // namespace harrier::auth
