#include "auth/access_scope.h"

#include <array>
#include <utility>

namespace harrier::auth {
namespace {

constexpr std::array<std::pair<Scope, std::string_view>, 4> kScopes{{
    {Scope::kInference, "inference"},
    {Scope::kMetadata, "metadata"},
    {Scope::kAdmin, "admin"},
    {Scope::kMetrics, "metrics"},
}};

constexpr std::array<std::string_view, kApiGroupCount> kGroupNames{
    "health",           "metadata",   "inference", "shared-memory", "model-config",
    "model-repository", "statistics", "trace",     "logging",       "metrics"};

RouteAccess Open(ApiGroup group) {
  return {group, std::nullopt};
}
RouteAccess Needs(ApiGroup group, Scope scope) {
  return {group, scope};
}

bool Writes(std::string_view method) {
  return method != "GET" && method != "HEAD";
}

// "/v2/models/NAME[/versions/N]/ACTION" -> ACTION ("" for the model's metadata itself).
std::string_view ModelAction(std::string_view rest) {
  // rest is what follows "/v2/models/": "NAME", "NAME/ready", "NAME/versions/1/infer", ...
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return {};
  std::string_view after = rest.substr(slash + 1);
  if (after.starts_with("versions/")) {
    after.remove_prefix(std::string_view("versions/").size());
    const size_t next = after.find('/');
    if (next == std::string_view::npos) return {};
    after = after.substr(next + 1);
  }
  return after;
}

}  // namespace

std::string_view ScopeName(Scope scope) {
  for (const auto& [s, name] : kScopes)
    if (s == scope) return name;
  return "unknown";
}

std::optional<Scope> ParseScope(std::string_view name) {
  for (const auto& [s, n] : kScopes)
    if (n == name) return s;
  return std::nullopt;
}

std::string_view ApiGroupName(ApiGroup group) {
  return kGroupNames[static_cast<size_t>(group)];
}

std::optional<ApiGroup> ParseTritonApiGroup(std::string_view name) {
  for (size_t i = 0; i < kGroupNames.size(); ++i) {
    const auto group = static_cast<ApiGroup>(i);
    if (group != ApiGroup::kMetrics && kGroupNames[i] == name) return group;
  }
  return std::nullopt;
}

RouteAccess RouteAccessForHttp(std::string_view method, std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  using G = ApiGroup;
  using S = Scope;
  if (path == "/v2/health/live" || path == "/v2/health/ready") return Open(G::kHealth);
  if (path == "/metrics") return Needs(G::kMetrics, S::kMetrics);
  if (path == "/v2") return Needs(G::kMetadata, S::kMetadata);
  if (path == "/v2/logging") {
    return Needs(G::kLogging, Writes(method) ? S::kAdmin : S::kMetadata);
  }
  if (path == "/v2/trace/setting")
    return Needs(G::kTrace, Writes(method) ? S::kAdmin : S::kMetadata);
  if (path.starts_with("/v2/repository/")) {
    if (path == "/v2/repository/index") return Needs(G::kModelRepository, S::kMetadata);
    return Needs(G::kModelRepository, S::kAdmin);  // models/NAME/load, models/NAME/unload
  }
  if (path.starts_with("/v2/systemsharedmemory") || path.starts_with("/v2/cudasharedmemory")) {
    return Needs(G::kSharedMemory, S::kInference);
  }
  if (path == "/v2/models/stats") return Needs(G::kStatistics, S::kMetadata);
  if (path.starts_with("/v2/models/")) {
    const std::string_view action =
        ModelAction(path.substr(std::string_view("/v2/models/").size()));
    // A model's readiness is health, as in Triton and as gRPC's ModelReady (probe 47: it was
    // metadata, so restricting health left it open).
    if (action == "ready") return Needs(G::kHealth, S::kMetadata);
    if (action.empty()) return Needs(G::kMetadata, S::kMetadata);
    if (action == "config") return Needs(G::kModelConfig, S::kMetadata);
    if (action == "stats") return Needs(G::kStatistics, S::kMetadata);
    if (action == "infer" || action == "generate" || action == "generate_stream") {
      return Needs(G::kInference, S::kInference);
    }
    if (action == "trace/setting")
      return Needs(G::kTrace, Writes(method) ? S::kAdmin : S::kMetadata);
    // Traffic between versions (docs/routing.md): reading it is metadata, changing it admin.
    if (action == "traffic")
      return Needs(G::kModelRepository, Writes(method) ? S::kAdmin : S::kMetadata);
    return Needs(G::kMetadata, S::kMetadata);
  }
  if (path == "/v1/models" || path.starts_with("/v1/models/"))
    return Needs(G::kMetadata, S::kMetadata);
  // The OpenAI API's completions, chat completions and resumable streams.
  if (path == "/v1" || path.starts_with("/v1/")) return Needs(G::kInference, S::kInference);
  // The status page and its summary, and any path nobody serves.
  return Needs(G::kMetadata, S::kMetadata);
}

RouteAccess RouteAccessForGrpc(std::string_view path) {
  constexpr std::string_view kService = "/inference.GRPCInferenceService/";
  using G = ApiGroup;
  using S = Scope;
  // gRPC's health-checking protocol is in Triton's health group.
  if (path == "/grpc.health.v1.Health/Check") return Open(G::kHealth);
  if (!path.starts_with(kService)) return Needs(G::kMetadata, S::kMetadata);
  const std::string_view rpc = path.substr(kService.size());
  if (rpc == "ServerLive" || rpc == "ServerReady") return Open(G::kHealth);
  // Triton restricts ModelReady with the health protocol; a key still needs metadata scope.
  if (rpc == "ModelReady") return Needs(G::kHealth, S::kMetadata);
  if (rpc == "ServerMetadata" || rpc == "ModelMetadata") return Needs(G::kMetadata, S::kMetadata);
  if (rpc == "ModelInfer" || rpc == "ModelStreamInfer") return Needs(G::kInference, S::kInference);
  if (rpc == "ModelConfig") return Needs(G::kModelConfig, S::kMetadata);
  if (rpc == "ModelStatistics") return Needs(G::kStatistics, S::kMetadata);
  if (rpc == "RepositoryIndex") return Needs(G::kModelRepository, S::kMetadata);
  if (rpc == "RepositoryModelLoad" || rpc == "RepositoryModelUnload") {
    return Needs(G::kModelRepository, S::kAdmin);
  }
  if (rpc.starts_with("SystemSharedMemory") || rpc.starts_with("CudaSharedMemory")) {
    return Needs(G::kSharedMemory, S::kInference);
  }
  // Triton's TraceSetting and LogSettings both read and change settings in one call.
  if (rpc == "TraceSetting") return Needs(G::kTrace, S::kAdmin);
  if (rpc == "LogSettings") return Needs(G::kLogging, S::kAdmin);
  return Needs(G::kMetadata, S::kMetadata);
}

}  // namespace harrier::auth
