// What a request needs to be let through: the API scope an API key must hold (Scope) and the
// Triton API group the route belongs to (ApiGroup, for --http-restricted-api and
// --grpc-restricted-protocol), and the pure functions that classify REST and gRPC routes into
// them (RouteAccessForHttp, RouteAccessForGrpc). docs/security.md, "API keys and scopes", has
// the table these functions implement.
//
// Thread safety: values and pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace harrier::auth {

// A key's permissions, as a bit set (ScopeSet). The names are those of the key file.
enum class Scope : uint8_t {
  kInference = 1,  // inference, generation, the OpenAI API, shared-memory regions
  kMetadata = 2,   // server and model metadata, config, readiness of a model, statistics,
                   // the repository index, reading the logging, trace and traffic settings
  kAdmin = 4,      // model load/unload, traffic PUT/DELETE, changing logging and trace settings
  kMetrics = 8,    // GET /metrics, when --metrics-require-key
};
using ScopeSet = uint8_t;
constexpr ScopeSet ScopeBit(Scope s) {
  return static_cast<ScopeSet>(s);
}

// "inference", "metadata", "admin", "metrics".
std::string_view ScopeName(Scope scope);
// The scope named `name` (exactly as above); nullopt for any other.
std::optional<Scope> ParseScope(std::string_view name);

// Triton's API groups (tritonserver --http-restricted-api), with its names.
enum class ApiGroup : uint8_t {
  kHealth,
  kMetadata,
  kInference,
  kSharedMemory,
  kModelConfig,
  kModelRepository,
  kStatistics,
  kTrace,
  kLogging,
  kMetrics,  // not a Triton group (Triton serves metrics on a port of its own, unrestricted)
};
inline constexpr int kApiGroupCount = 10;
// "health", "metadata", "inference", "shared-memory", "model-config", "model-repository",
// "statistics", "trace", "logging"; "metrics" for kMetrics.
std::string_view ApiGroupName(ApiGroup group);
// One of Triton's nine names above ("metrics" is not accepted: it is not Triton's); nullopt for
// any other.
std::optional<ApiGroup> ParseTritonApiGroup(std::string_view name);

// What a route requires.
struct RouteAccess {
  ApiGroup group = ApiGroup::kMetadata;
  // The scope a key needs; nullopt: the route is open to every client, keyed or not (health
  // probes, which load balancers and Kubernetes call without credentials).
  std::optional<Scope> scope = Scope::kMetadata;
};

// A REST request (any front end: KServe v2, Triton's extensions, generate, the OpenAI /v1 API,
// the dashboard, /metrics). `target` may carry a query, which is ignored. A path no front end
// serves needs kMetadata, so that a client without a key learns nothing from 404 versus 401.
RouteAccess RouteAccessForHttp(std::string_view method, std::string_view target);

// A gRPC call, by its HTTP/2 path ("/inference.GRPCInferenceService/ModelInfer"). An unknown
// method needs kMetadata (as above).
RouteAccess RouteAccessForGrpc(std::string_view path);

}  // namespace harrier::auth
