#include "protocol/kserve/shared_memory_endpoints.h"

#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/json_writer.h"

namespace harrier::kserve {

namespace {

constexpr std::string_view kNoCuda = "CUDA shared memory is not supported on this server (no GPU)";

}  // namespace

Status SystemSharedMemoryOff() {
  return InvalidArgument(
      "system shared memory is not enabled on this server (start it with "
      "--allow-client-shm=true)");
}

StatusOr<std::string> SystemSharedMemoryStatusJson(const SharedMemoryRegistry* registry,
                                                   std::string_view region) {
  if (registry == nullptr) return SystemSharedMemoryOff();
  ASSIGN_OR_RETURN(std::vector<SharedMemoryRegionStatus> regions, registry->Regions(region));
  std::string out = "[";
  for (size_t i = 0; i < regions.size(); ++i) {
    if (i) out.push_back(',');
    out.append("{\"name\":");
    AppendJsonString(&out, regions[i].name);
    out.append(",\"key\":");
    AppendJsonString(&out, regions[i].key);
    out.append(",\"offset\":");
    AppendJsonNumber(&out, regions[i].offset);
    out.append(",\"byte_size\":");
    AppendJsonNumber(&out, regions[i].byte_size);
    out.push_back('}');
  }
  out.push_back(']');
  return out;
}

Status SystemSharedMemoryRegister(SharedMemoryRegistry* registry, std::string_view region,
                                  std::string_view body) {
  if (registry == nullptr) return SystemSharedMemoryOff();
  const std::string what =
      "shared memory register request for region '" + std::string(region) + "'";
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(simdjson::padded_string(body)).get(root)) {
    return InvalidArgument("failed to parse the request JSON buffer: the " + what + ": " +
                           simdjson::error_message(err));
  }
  simdjson::dom::object obj;
  if (root.get_object().get(obj)) return InvalidArgument(what + ": the body must be a JSON object");
  std::optional<std::string_view> key;
  uint64_t offset = 0;
  std::optional<uint64_t> byte_size;
  // A field given twice is refused, as in an inference body: a proxy that reads the first
  // 'key' must not see another object than the server maps (probe 62).
  std::vector<std::string_view> seen;
  for (auto [name, value] : obj) {
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      return InvalidArgument(what + ": field '" + std::string(name) + "' given twice");
    }
    seen.push_back(name);
    if (name == "key") {
      std::string_view k;
      if (value.get_string().get(k)) return InvalidArgument(what + ": 'key' must be a string");
      key = k;
    } else if (name == "offset" || name == "byte_size") {
      uint64_t v = 0;
      if (value.get_uint64().get(v)) {
        return InvalidArgument(what + ": '" + std::string(name) + "' must be an integer >= 0");
      }
      if (name == "offset") {
        offset = v;
      } else {
        byte_size = v;
      }
    } else {
      return InvalidArgument(what + ": unknown field '" + std::string(name) +
                             "' (expected key, offset, byte_size)");
    }
  }
  if (!key) return InvalidArgument(what + ": missing required field 'key'");
  if (!byte_size) return InvalidArgument(what + ": missing required field 'byte_size'");
  return registry->Register(region, *key, offset, *byte_size);
}

Status SystemSharedMemoryUnregister(SharedMemoryRegistry* registry, std::string_view region) {
  if (registry == nullptr) return SystemSharedMemoryOff();
  if (region.empty()) {
    registry->UnregisterAll();
  } else {
    registry->Unregister(region);
  }
  return Status::Ok();
}

StatusOr<std::string> CudaSharedMemoryStatusJson(std::string_view region) {
  if (region.empty()) return std::string("[]");
  return InvalidArgument("Unable to find cuda shared memory region: '" + std::string(region) +
                         "' (" + std::string(kNoCuda) + ")");
}

Status CudaSharedMemoryRegister(std::string_view region, std::string_view body) {
  // The body is read first, as Triton does (its QA tests send one that is not JSON).
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(simdjson::padded_string(body)).get(root)) {
    return InvalidArgument(
        "failed to parse the request JSON buffer: the CUDA shared memory "
        "register request for region '" +
        std::string(region) + "': " + simdjson::error_message(err));
  }
  return InvalidArgument("failed to register CUDA shared memory region '" + std::string(region) +
                         "': " + std::string(kNoCuda));
}

}  // namespace harrier::kserve
