#include "protocol/kserve/kserve_routes.h"

#include <simdjson.h>

#include <array>
#include <charconv>
#include <chrono>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>

#include "core/http_text.h"
#include "core/json_writer.h"
#include "core/request_id.h"
#include "core/route_answer.h"
#include "core/status_mapping.h"
#include "core/url_path.h"
#include "core/utf8.h"
#include "protocol/common/content_coding.h"
#include "protocol/common/traced_request.h"
#include "protocol/kserve/classification.h"
#include "protocol/kserve/infer_response_encoder.h"
#include "protocol/kserve/logging_settings.h"
#include "protocol/kserve/model_control_parameters.h"
#include "protocol/kserve/rest_responses.h"
#include "protocol/kserve/scheduling_fields.h"
#include "protocol/kserve/server_timing.h"
#include "protocol/kserve/shared_memory_endpoints.h"

namespace harrier::kserve {

// Precheck() and Handle() both route every POST, one after the other on the connection's
// thread: the second finds the first's answer in a one-entry memo per thread, keyed by the whole
// path (a route is a function of the path alone, so whichever request comes next may use it).
// Saves about 1,000 instructions per inference request (docs/benchmarks.md, session 23).
StatusOr<KServeHandler::Route> KServeHandler::MatchRoute(std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  struct LastRoute {
    std::string path;
    std::optional<Route> route;
  };
  thread_local LastRoute last;
  if (last.route && last.path == path) return *last.route;
  StatusOr<Route> matched = ParsePath(path);
  if (matched.ok()) {
    last.path.assign(path);
    last.route = *matched;
  }
  return matched;
}

// Splits the path (query already dropped) and finds its route. kNotFound for unknown paths,
// kInvalidArgument for a bad version or percent-encoding.
StatusOr<KServeHandler::Route> KServeHandler::ParsePath(std::string_view path) {
  using Kind = Route::Kind;
  // Built only when needed: routing a good request allocates nothing.
  auto not_found = [path] { return NotFound("unknown path '" + std::string(path) + "'"); };
  if (path.empty() || path[0] != '/') return not_found();
  // No route has more than 6 segments ("/v2/models/m/versions/1/infer").
  constexpr size_t kMaxSegments = 8;
  struct Segments {
    std::array<std::string_view, kMaxSegments> items;
    size_t count = 0;
    size_t size() const { return count; }
    bool empty() const { return count == 0; }
    std::string_view operator[](size_t i) const { return items[i]; }
  } seg;
  for (size_t start = 1;;) {
    if (seg.count == kMaxSegments) return not_found();
    const size_t slash = path.find('/', start);
    seg.items[seg.count++] =
        path.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (seg.empty() || seg[0] != "v2") return not_found();

  Route route;
  // Every return below is the last use of `route`: moved, never copied.
  auto simple = [&](Kind kind, std::string_view method) {
    route.kind = kind;
    route.method = method;
    return std::move(route);
  };
  if (seg.size() == 1) return simple(Kind::kServerMetadata, "GET");
  // GET reads the settings; POST (which Handle() also lets through) changes them.
  if (seg[1] == "logging" && seg.size() == 2) return simple(Kind::kLogging, "GET");
  if (seg[1] == "health" && seg.size() == 3) {
    if (seg[2] == "live") return simple(Kind::kLive, "GET");
    if (seg[2] == "ready") return simple(Kind::kReady, "GET");
    return not_found();
  }
  if (seg[1] == "repository") {
    if (seg.size() == 3 && seg[2] == "index") return simple(Kind::kRepositoryIndex, "POST");
    if (seg.size() == 5 && seg[2] == "models" && (seg[4] == "load" || seg[4] == "unload")) {
      RETURN_IF_ERROR(PercentDecode(seg[3], &route.model));
      route.load = seg[4] == "load";
      return simple(Kind::kRepositoryControl, "POST");
    }
    return not_found();
  }
  if (seg[1] == "systemsharedmemory" || seg[1] == "cudasharedmemory") {
    // [/region/{r}]/status|unregister, /region/{r}/register
    route.cuda = seg[1] == "cudasharedmemory";
    std::string_view action;
    if (seg.size() == 3) {
      action = seg[2];
    } else if (seg.size() == 5 && seg[2] == "region") {
      RETURN_IF_ERROR(PercentDecode(seg[3], &route.region));
      if (route.region.empty()) return not_found();
      action = seg[4];
    } else {
      return not_found();
    }
    if (action == "status") return simple(Kind::kSharedMemoryStatus, "GET");
    if (action == "unregister") return simple(Kind::kSharedMemoryUnregister, "POST");
    if (action == "register" && !route.region.empty())
      return simple(Kind::kSharedMemoryRegister, "POST");
    return not_found();
  }
  if (seg[1] != "models" || seg.size() < 3) return not_found();
  if (seg.size() == 3 && seg[2] == "stats") return simple(Kind::kAllStats, "GET");

  RETURN_IF_ERROR(PercentDecode(seg[2], &route.model));
  if (route.model.empty())
    return InvalidArgument("empty model name in '" + std::string(path) + "'");
  size_t next = 3;
  if (seg.size() >= 5 && seg[3] == "versions") {
    ASSIGN_OR_RETURN(route.version, ParseUrlVersion(seg[4]));
    next = 5;
  }
  if (seg.size() == next) return simple(Kind::kModelMetadata, "GET");
  if (seg.size() != next + 1) return not_found();
  const std::string_view action = seg[next];
  if (action == "ready") return simple(Kind::kModelReady, "GET");
  if (action == "config") return simple(Kind::kModelConfig, "GET");
  if (action == "stats") return simple(Kind::kModelStats, "GET");
  if (action == "infer") return simple(Kind::kInfer, "POST");
  if (action == "traffic" && next == 3) return simple(Kind::kTraffic, "GET");
  return not_found();
}

}  // namespace harrier::kserve
