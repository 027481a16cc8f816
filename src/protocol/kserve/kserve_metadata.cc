// KServeHandler's metadata, statistics and repository-index answers (docs/api.md).
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
#include "protocol/kserve/kserve_handler.h"
#include "protocol/kserve/kserve_routes.h"
#include "protocol/kserve/logging_settings.h"
#include "protocol/kserve/model_control_parameters.h"
#include "protocol/kserve/rest_responses.h"
#include "protocol/kserve/scheduling_fields.h"
#include "protocol/kserve/server_timing.h"
#include "protocol/kserve/shared_memory_endpoints.h"

namespace harrier::kserve {
namespace {

void AppendVersion(std::string* out, int64_t version) {
  out->push_back('"');
  AppendJsonNumber(out, version);
  out->push_back('"');
}

void AppendTensorSpecs(std::string* out, const std::vector<TensorSpec>& specs) {
  out->push_back('[');
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i) out->push_back(',');
    out->append("{\"name\":");
    AppendJsonString(out, specs[i].name);
    out->append(",\"datatype\":\"");
    out->append(DataTypeName(specs[i].dtype));
    out->append("\",\"shape\":[");
    for (size_t d = 0; d < specs[i].dims.size(); ++d) {
      if (d) out->push_back(',');
      AppendJsonNumber(out, specs[i].dims[d]);
    }
    out->append("]}");
  }
  out->push_back(']');
}

void AppendDuration(std::string* out, std::string_view name, const DurationStat& d) {
  out->push_back('"');
  out->append(name);
  out->append("\":{\"count\":");
  AppendJsonNumber(out, d.count);
  out->append(",\"ns\":");
  AppendJsonNumber(out, d.ns);
  out->push_back('}');
}

// "compute_input":{..},"compute_infer":{..},"compute_output":{..} — in inference_stats and in
// each batch_stats entry.
void AppendComputeDurations(std::string* out, const DurationStat& input, const DurationStat& infer,
                            const DurationStat& output) {
  AppendDuration(out, "compute_input", input);
  out->push_back(',');
  AppendDuration(out, "compute_infer", infer);
  out->push_back(',');
  AppendDuration(out, "compute_output", output);
}

}  // namespace

HttpResponse KServeHandler::ServerMetadata() const {
  std::string body = "{\"name\":";
  AppendJsonString(&body, options_.server_name);
  body.append(",\"version\":");
  AppendJsonString(&body, options_.server_version);
  body.append(",\"extensions\":[");
  for (size_t i = 0; i < options_.extensions.size(); ++i) {
    if (i) body.push_back(',');
    AppendJsonString(&body, options_.extensions[i]);
  }
  body.append("]}");
  return JsonResponse(200, std::move(body));
}

HttpResponse KServeHandler::ModelMetadata(const Route& route) const {
  StatusOr<harrier::ModelMetadata> md = models_->Metadata(route.model, route.version);
  if (!md.ok()) return ErrorResponse(md.status());
  std::string body = "{\"name\":";
  AppendJsonString(&body, md->name);
  body.append(",\"versions\":[");
  for (size_t i = 0; i < md->versions.size(); ++i) {
    if (i) body.push_back(',');
    AppendJsonString(&body, md->versions[i]);
  }
  body.append("],\"platform\":");
  AppendJsonString(&body, md->platform);
  body.append(",\"inputs\":");
  AppendTensorSpecs(&body, md->inputs);
  body.append(",\"outputs\":");
  AppendTensorSpecs(&body, md->outputs);
  body.push_back('}');
  return JsonResponse(200, std::move(body));
}

HttpResponse KServeHandler::ModelStats(const Route& route) const {
  std::optional<std::string_view> name;
  if (route.kind == Route::Kind::kModelStats) name = route.model;
  auto stats = models_->Stats(name, route.version);
  if (!stats.ok()) return ErrorResponse(stats.status());
  std::string body = "{\"model_stats\":[";
  for (size_t i = 0; i < stats->size(); ++i) {
    const ModelVersionStats& s = (*stats)[i];
    if (i) body.push_back(',');
    body.append("{\"name\":");
    AppendJsonString(&body, s.name);
    body.append(",\"version\":");
    AppendVersion(&body, s.version);
    body.append(",\"last_inference\":");
    AppendJsonNumber(&body, s.last_inference_ms);
    body.append(",\"inference_count\":");
    AppendJsonNumber(&body, s.inference_count);
    body.append(",\"execution_count\":");
    AppendJsonNumber(&body, s.execution_count);
    body.append(",\"inference_stats\":{");
    AppendDuration(&body, "success", s.success);
    body.push_back(',');
    AppendDuration(&body, "fail", s.fail);
    body.push_back(',');
    AppendDuration(&body, "queue", s.queue);
    body.push_back(',');
    AppendComputeDurations(&body, s.compute_input, s.compute_infer, s.compute_output);
    body.push_back(',');
    AppendDuration(&body, "cache_hit", DurationStat{});  // no response cache yet
    body.push_back(',');
    AppendDuration(&body, "cache_miss", DurationStat{});
    body.append("},\"batch_stats\":[");
    for (size_t b = 0; b < s.batch_stats.size(); ++b) {
      const BatchStat& bs = s.batch_stats[b];
      if (b) body.push_back(',');
      body.append("{\"batch_size\":");
      AppendJsonNumber(&body, bs.batch_size);
      body.push_back(',');
      AppendComputeDurations(&body, bs.compute_input, bs.compute_infer, bs.compute_output);
      body.push_back('}');
    }
    body.append("]}");
  }
  body.append("]}");
  return JsonResponse(200, std::move(body));
}

namespace {

// The optional body of POST /v2/repository/index: {"ready": bool}.
StatusOr<bool> ReadyOnlyFilter(const std::shared_ptr<const std::string>& body) {
  if (!body || body->find_first_not_of(" \t\r\n") == std::string::npos) return false;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(simdjson::padded_string(*body)).get(root)) {
    return InvalidArgument(
        std::string("failed to parse the request JSON buffer: the repository index request: ") +
        simdjson::error_message(err));
  }
  simdjson::dom::object obj;
  if (root.get_object().get(obj)) {
    return InvalidArgument("the repository index request must be a JSON object");
  }
  bool ready = false;
  for (auto [key, value] : obj) {
    if (key != "ready") {
      return InvalidArgument("repository index request: unknown field '" + std::string(key) +
                             "' (expected ready)");
    }
    if (value.get_bool().get(ready)) {
      return InvalidArgument("repository index request: 'ready' must be a bool");
    }
  }
  return ready;
}

}  // namespace

HttpResponse KServeHandler::RepositoryIndex(const HttpRequest& request) const {
  StatusOr<bool> ready_only = ReadyOnlyFilter(request.body);
  if (!ready_only.ok()) return ErrorResponse(ready_only.status());
  std::string body = "[";
  bool first = true;
  for (const ModelVersionState& m : models_->Index()) {
    if (*ready_only && m.state != ModelState::kReady) continue;
    if (!first) body.push_back(',');
    first = false;
    body.append("{\"name\":");
    AppendJsonString(&body, m.name);
    if (m.version > 0) {
      body.append(",\"version\":");
      AppendVersion(&body, m.version);
    }
    body.append(",\"state\":\"");
    body.append(ModelStateName(m.state));
    body.push_back('"');
    if (!m.reason.empty()) {
      body.append(",\"reason\":");
      AppendJsonString(&body, m.reason);
    }
    body.push_back('}');
  }
  body.push_back(']');
  return JsonResponse(200, std::move(body));
}

}  // namespace harrier::kserve
