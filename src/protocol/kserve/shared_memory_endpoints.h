// The REST endpoints of Triton's shared-memory extensions (docs/api.md, "System shared
// memory"), as functions from the request's parts to a JSON body or a Status, over a
// SharedMemoryRegistry. KServeHandler routes to them:
//
//   GET  /v2/systemsharedmemory[/region/{r}]/status     [{"name","key","offset","byte_size"},..]
//   POST /v2/systemsharedmemory/region/{r}/register     {"key": "/k", "offset": 0, "byte_size": N}
//   POST /v2/systemsharedmemory[/region/{r}]/unregister one region, or all
//   .../cudasharedmemory/...                            no CUDA here (see below)
//
// A null registry means shared memory is off (--allow-client-shm=false, the default): every
// system shared-memory endpoint answers kInvalidArgument saying how to turn it on.
//
// CUDA shared memory: this server has no GPU. Register is kInvalidArgument ("CUDA shared memory
// is not supported on this server (no GPU)"); status of all regions is [] and unregister
// succeeds, because no CUDA region can exist — and Triton's own system shared-memory examples
// call unregister_cuda_shared_memory() before they start; status of a named region is
// kInvalidArgument ("Unable to find cuda shared memory region: 'r'", with the same reason).
//
// Thread safety: as the registry's.
#pragma once

#include <string>
#include <string_view>

#include "harrier/status.h"
#include "shared_memory/shared_memory_registry.h"

namespace harrier::kserve {

// The refusal of every endpoint while shared memory is off.
Status SystemSharedMemoryOff();

// `region` empty: every region.
StatusOr<std::string> SystemSharedMemoryStatusJson(const SharedMemoryRegistry* registry,
                                                   std::string_view region);

// `body`: {"key": string, "offset": integer >= 0 (optional, 0), "byte_size": integer >= 1}.
// kInvalidArgument: a body that is not that object (unknown fields included), and whatever
// SharedMemoryRegistry::Register refuses.
Status SystemSharedMemoryRegister(SharedMemoryRegistry* registry, std::string_view region,
                                  std::string_view body);

// `region` empty: every region. An unknown region is Ok (nothing to do), as in Triton.
Status SystemSharedMemoryUnregister(SharedMemoryRegistry* registry, std::string_view region);

StatusOr<std::string> CudaSharedMemoryStatusJson(std::string_view region);
// Always an error (no GPU): "failed to parse the request JSON buffer" for a REST body that is
// not JSON, else "not supported". gRPC has no JSON body: the default.
Status CudaSharedMemoryRegister(std::string_view region, std::string_view body = "{}");

}  // namespace harrier::kserve
