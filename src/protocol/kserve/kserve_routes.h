// KServeHandler::Route: what a REST path asks for, as MatchRoute (kserve_routes.cc) reads it.
// Internal to src/protocol/kserve/: the handler's files that answer a route include it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "protocol/kserve/kserve_handler.h"

namespace harrier::kserve {

struct KServeHandler::Route {
  enum class Kind {
    kLive,
    kReady,
    kServerMetadata,
    kModelMetadata,
    kModelReady,
    kModelConfig,
    kModelStats,
    kAllStats,
    kInfer,
    kRepositoryIndex,
    kRepositoryControl,
    kTraffic,  // GET, PUT, DELETE /v2/models/{m}/traffic (docs/routing.md)
    kLogging,
    kSharedMemoryStatus,
    kSharedMemoryRegister,
    kSharedMemoryUnregister,
  };
  Kind kind = Kind::kLive;
  std::string_view method = "GET";  // the only method the route accepts
  std::string model;
  std::optional<int64_t> version;
  // kRepositoryControl: a load (else an unload).
  bool load = false;
  // Shared-memory routes: which extension, and the region in the path ("" = all).
  bool cuda = false;
  std::string region;
};

}  // namespace harrier::kserve
