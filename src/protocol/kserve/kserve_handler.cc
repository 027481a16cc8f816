#include "protocol/kserve/kserve_handler.h"

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
#include "protocol/kserve/kserve_routes.h"
#include "protocol/kserve/logging_settings.h"
#include "protocol/kserve/model_control_parameters.h"
#include "protocol/kserve/rest_responses.h"
#include "protocol/kserve/scheduling_fields.h"
#include "protocol/kserve/server_timing.h"
#include "protocol/kserve/shared_memory_endpoints.h"

namespace harrier::kserve {

std::vector<std::string> DefaultKServeExtensions() {
  return {"binary_tensor_data", "classification",   "model_configuration",
          "statistics",         "model_repository", "model_repository(unload_dependents)"};
}

KServeHandler::KServeHandler(ModelManager* models, Options options)
    : models_(models),
      options_(std::move(options)),
      flow_(models, {.access_log = options_.access_log,
                     .shared_memory = options_.shared_memory,
                     .inline_execution = options_.inline_execution}) {}

void KServeHandler::Answer(const HttpRequest& request, std::string_view request_id,
                           HttpResponse response, const HttpResponder& respond) const {
  AnswerRoute(options_.access_log, request, request_id, std::move(response), respond);
}

void KServeHandler::Handle(HttpRequest&& request, HttpResponder respond) {
  std::string request_id =
      ResolveRequestId(request.Header("x-request-id"), RequestIdGenerator::Process());
  auto answer = [&](HttpResponse response) {
    Answer(request, request_id, std::move(response), respond);
  };
  StatusOr<Route> matched = MatchRoute(request.target);
  if (!matched.ok()) return answer(ErrorResponse(matched.status()));
  const Route& route = *matched;
  const bool logging_post = route.kind == Route::Kind::kLogging && request.method == "POST";
  const bool traffic_write = route.kind == Route::Kind::kTraffic &&
                             (request.method == "PUT" || request.method == "DELETE");
  const bool get_route = route.method == "GET";
  const bool allowed_method =
      get_route ? IsGetOrHead(request.method) : request.method == route.method;
  if (!allowed_method && !logging_post && !traffic_write) {
    const std::string allowed = route.kind == Route::Kind::kLogging ? std::string("GET, HEAD, POST")
                                : route.kind == Route::Kind::kTraffic
                                    ? std::string("GET, HEAD, PUT, DELETE")
                                : get_route ? std::string("GET, HEAD")
                                            : std::string(route.method);
    HttpResponse r = ErrorResponse(405, "method " + request.method + " is not allowed on '" +
                                            request.target + "'; use " + allowed);
    r.headers.emplace_back("Allow", allowed);
    return answer(std::move(r));
  }
  using Kind = Route::Kind;
  switch (route.kind) {
    case Kind::kLive: return answer(EmptyOk());
    case Kind::kReady: return answer(ServerReady());
    case Kind::kServerMetadata: return answer(ServerMetadata());
    case Kind::kModelMetadata: return answer(ModelMetadata(route));
    case Kind::kModelReady: return answer(ModelReady(route));
    case Kind::kModelConfig: return answer(ModelConfig(route));
    case Kind::kModelStats:
    case Kind::kAllStats: return answer(ModelStats(route));
    case Kind::kRepositoryIndex: return answer(RepositoryIndex(request));
    case Kind::kLogging: return answer(Logging(request));
    case Kind::kSharedMemoryStatus:
    case Kind::kSharedMemoryRegister:
    case Kind::kSharedMemoryUnregister: return answer(SharedMemory(route, request));
    case Kind::kTraffic: return answer(Traffic(route, request));
    case Kind::kRepositoryControl:
      return RepositoryControl(route, std::move(request), std::move(request_id),
                               std::move(respond));
    case Kind::kInfer: return Infer(route, request, std::move(request_id), std::move(respond));
  }
  answer(ErrorResponse(Internal("unhandled route")));
}

HttpResponse KServeHandler::Logging(const HttpRequest& request) const {
  if (options_.log_control == nullptr) {
    return ErrorResponse(Unimplemented("log settings cannot be changed on this server"));
  }
  if (request.method == "POST") {
    std::shared_ptr<const std::string> content =
        request.body ? request.body : std::make_shared<const std::string>();
    if (Status s = DecodeBodyContent(request, options_.max_body_bytes, &content); !s.ok())
      return ErrorResponse(s);
    const std::string_view body = *content;
    StatusOr<LogSettings> wanted = ApplyLogSettingsJson(body, options_.log_control->Get());
    if (!wanted.ok()) return ErrorResponse(wanted.status());
    if (Status s = options_.log_control->Set(*wanted); !s.ok()) return ErrorResponse(s);
  }
  return JsonResponse(200, LogSettingsJson(options_.log_control->Get()));
}

HttpResponse KServeHandler::SharedMemory(const Route& route, const HttpRequest& request) const {
  using Kind = Route::Kind;
  Status done;
  switch (route.kind) {
    case Kind::kSharedMemoryStatus: {
      StatusOr<std::string> json =
          route.cuda ? CudaSharedMemoryStatusJson(route.region)
                     : SystemSharedMemoryStatusJson(options_.shared_memory, route.region);
      if (!json.ok()) return ErrorResponse(json.status());
      return JsonResponse(200, std::move(json).value());
    }
    case Kind::kSharedMemoryRegister:
      done = route.cuda ? CudaSharedMemoryRegister(route.region, request.body ? *request.body : "")
                        : SystemSharedMemoryRegister(options_.shared_memory, route.region,
                                                     request.body ? *request.body : "");
      break;
    case Kind::kSharedMemoryUnregister:
      // No CUDA region can exist here: unregistering them has nothing to do.
      if (!route.cuda) done = SystemSharedMemoryUnregister(options_.shared_memory, route.region);
      break;
    default: done = Internal("unhandled shared memory route");
  }
  return done.ok() ? EmptyOk() : ErrorResponse(done);
}

HttpResponse KServeHandler::ServerReady() const {
  if (options_.readiness != nullptr && options_.readiness->draining()) {
    return ErrorResponse(Unavailable("the server is shutting down"));
  }
  if (!models_->AllReady()) {
    return ErrorResponse(
        Unavailable("the server is not ready: some models are not loaded "
                    "(see POST /v2/repository/index)"));
  }
  return EmptyOk();
}

HttpResponse KServeHandler::ModelReady(const Route& route) const {
  auto model = models_->Get(route.model, route.version);
  if (!model.ok()) return ErrorResponse(model.status());
  return EmptyOk();
}

HttpResponse KServeHandler::ModelConfig(const Route& route) const {
  auto model = models_->Get(route.model, route.version);
  if (!model.ok()) return ErrorResponse(model.status());
  return JsonResponse(200, (*model)->ConfigJson());
}

void KServeHandler::RepositoryControl(const Route& route, HttpRequest request,
                                      std::string request_id, HttpResponder respond) const {
  const bool load = route.load;
  auto parameters = ParseModelControlParameters(
      request.body, load ? ModelControlAction::kLoad : ModelControlAction::kUnload);
  if (!parameters.ok())
    return Answer(request, request_id, ErrorResponse(parameters.status()), respond);
  // Answered when the load is done (seconds, for a large model), from a lifecycle thread: the
  // I/O thread is not held meanwhile.
  auto pending = std::make_shared<std::tuple<HttpRequest, std::string, HttpResponder>>(
      std::move(request), std::move(request_id), std::move(respond));
  auto done = [this, pending](Status status) {
    auto& [req, id, responder] = *pending;
    Answer(req, id, status.ok() ? EmptyOk() : ErrorResponse(status), responder);
  };
  if (load) {
    models_->LoadModel(route.model, std::move(parameters).value(), std::move(done));
  } else {
    models_->UnloadModel(route.model, std::move(done));
  }
}

HttpResponse KServeHandler::Traffic(const Route& route, const HttpRequest& request) const {
  if (request.method == "PUT") {
    const std::string_view body = request.body ? std::string_view(*request.body) : "";
    if (Status s = models_->SetTrafficPolicy(route.model, body); !s.ok()) return ErrorResponse(s);
  } else if (request.method == "DELETE") {
    if (Status s = models_->ClearTrafficPolicy(route.model); !s.ok()) return ErrorResponse(s);
  }
  StatusOr<std::string> state = models_->TrafficJson(route.model);
  if (!state.ok()) return ErrorResponse(state.status());
  return JsonResponse(200, std::move(state).value());
}

}  // namespace harrier::kserve
