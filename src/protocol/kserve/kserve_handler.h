// KServeHandler: the KServe v2 / Open Inference Protocol REST API (with Triton's extensions)
// over a ModelManager, independent of the transport. HTTP/1.1 and HTTP/2 front ends hand it
// HttpRequests; it answers each exactly once through the responder.
//
// Routes (docs/api.md has the full reference):
//   GET  /v2/health/live                                  200
//   GET  /v2/health/ready                                 200, or 503 when a model is not ready
//                                                         or the server is draining
//   GET  /v2                                              server metadata
//   GET  /v2/models/{m}[/versions/{v}]                    model metadata
//   GET  /v2/models/{m}[/versions/{v}]/ready              200, 404 unknown, 503 not ready
//   GET  /v2/models/{m}[/versions/{v}]/config             model configuration (JSON)
//   GET  /v2/models/stats, /v2/models/{m}[/versions/{v}]/stats   statistics
//   POST /v2/models/{m}[/versions/{v}]/infer              inference (JSON or binary tensors)
//   POST /v2/repository/index                             model states
//   POST /v2/repository/models/{m}/load|unload            501: model control is not supported
//   GET|POST /v2/logging                                  log settings (Triton's logging
//                                                         extension; 501 without a LogControl)
//   GET  /v2/systemsharedmemory[/region/{r}]/status       Triton's system shared memory
//   POST /v2/systemsharedmemory/region/{r}/register       (shared_memory_endpoints.h; 400
//   POST /v2/systemsharedmemory[/region/{r}]/unregister   without a registry)
//   GET|POST /v2/cudasharedmemory/...                     no GPU: register is a 400
// Unknown paths answer 404, a known path with another method 405 with an Allow header. Every
// error body is {"error": "..."} with the status HttpStatusFor() gives its code; a 429 also
// carries Retry-After: 1.
//
// Inference requests take their scheduling fields from the request parameters `priority` and
// `timeout` and the headers X-Request-Timeout-Us and X-Client-Id (scheduling_fields.h), and
// the HttpRequest's CancellationToken, which the model's scheduler and backend honour.
//
// Every response carries X-Request-Id: the request's own X-Request-Id when acceptable
// (core/request_id.h), a generated one otherwise. A successful inference also carries
// Server-Timing (server_timing.h). With an AccessLog, every request answered here is written
// to it, once, after its response is built (docs/logging.md).
//
// With a Tracer, POST .../infer is traced when the tracer says so (its traceparent, else the
// sampling ratio): the model sees the server span (InferenceRequest::trace), the response
// carries `traceresponse: <server span>`, and the record goes to the tracer once the transport
// reports the send (HttpResponse::on_sent). A request refused before the model (bad body,
// deadline, admission) is traced with the stages it reached; one answered by Precheck() is not
// (it never reaches Handle()). docs/tracing.md.
//
// Thread safety: Handle() may be called from any number of threads at once. Infer responses
// are sent from whichever thread the model's callback runs on.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harrier/access_log.h"
#include "harrier/http_message.h"
#include "harrier/log_control.h"
#include "harrier/model_manager.h"
#include "harrier/server_readiness.h"
#include "harrier/trace.h"
#include "protocol/common/inference_flow.h"
#include "protocol/kserve/infer_request_decoder.h"
#include "shared_memory/shared_memory_registry.h"

namespace harrier::kserve {

// "binary_tensor_data", "classification", "model_configuration", "statistics",
// "model_repository" and "model_repository(unload_dependents)": exactly what KServeHandler
// implements whatever its options (load and unload answer Triton's 503 outside explicit mode, as
// Triton's do while it lists the extension; with no ensembles there are no dependents to unload).
// The composition root adds "logging" and, with a shared-memory registry,
// "system_shared_memory".
std::vector<std::string> DefaultKServeExtensions();

class KServeHandler : public HttpHandler {
 public:
  struct Options {
    // Reported by GET /v2.
    std::string server_name = "harrier";
    std::string server_version = "unknown";  // the composition root passes the build's version
    // Extensions GET /v2 lists.
    std::vector<std::string> extensions = DefaultKServeExtensions();
    DecodeLimits decode_limits;
    // The most bytes a request body with a Content-Encoding may decode to (the transport's
    // body limit, --max-body-bytes, applies to what it reads off the wire). Over it: 413.
    uint64_t max_body_bytes = 256ull << 20;
    // Not owned; must outlive the handler and every request in flight. Null: no access log.
    AccessLog* access_log = nullptr;
    // Not owned, as above. Null: /v2/logging answers 501.
    LogControl* log_control = nullptr;
    // Not owned, as above. Null: no tracing (an inference pays one pointer test).
    Tracer* tracer = nullptr;
    // Not owned, as above. Null: shared memory is off (--allow-client-shm=false): the
    // systemsharedmemory endpoints and tensors naming a region answer 400. Inputs and outputs
    // with shared-memory parameters are read from and written to its regions.
    SharedMemoryRegistry* shared_memory = nullptr;
    // Which inferences may run on the I/O thread that received it (InferenceRequest::
    // allow_inline; `--inline-execution`; docs/scheduling.md).
    InlinePolicy inline_execution = InlinePolicy::kSoleRequester;
    // Not owned, as above. While it says draining (a shutdown has begun), GET /v2/health/ready
    // answers 503 and everything else is served as before. Null: readiness is the models' alone.
    const ServerReadiness* readiness = nullptr;
  };

  // `models` is not owned and must outlive the handler and every request in flight.
  KServeHandler(ModelManager* models, Options options);

  void Handle(HttpRequest&& request, HttpResponder respond) override;
  // For POST .../infer only: the 429 (with Retry-After) that Infer would answer when the
  // model's admission control refuses the request now (ServableModel::CheckAdmission with its
  // X-Client-Id), counted as a failure of that version. Anything else — another route, an
  // unknown or unready model, a request admission would take — has no opinion: Handle()
  // answers it. Allocates nothing for a model name of up to 15 bytes that admission takes.
  std::optional<HttpResponse> Precheck(const HttpRequest& head) override;

 private:
  struct Route;

  // The route of `target` (its path; the query is ignored): kNotFound for an unknown path,
  // kInvalidArgument for a bad version or percent-encoding.
  static StatusOr<Route> MatchRoute(std::string_view target);
  static StatusOr<Route> ParsePath(std::string_view path);
  HttpResponse ServerMetadata() const;
  HttpResponse ServerReady() const;
  HttpResponse ModelMetadata(const Route& route) const;
  HttpResponse ModelReady(const Route& route) const;
  HttpResponse ModelConfig(const Route& route) const;
  HttpResponse ModelStats(const Route& route) const;
  HttpResponse RepositoryIndex(const HttpRequest& request) const;
  // GET / PUT / DELETE /v2/models/{m}/traffic: the policy and its live state; PUT installs a
  // policy (400, nothing changed, for a bad one), DELETE removes it.
  HttpResponse Traffic(const Route& route, const HttpRequest& request) const;
  // POST /v2/repository/models/{m}/load|unload: answered when the model manager is done.
  void RepositoryControl(const Route& route, HttpRequest request, std::string request_id,
                         HttpResponder respond) const;
  HttpResponse Logging(const HttpRequest& request) const;
  HttpResponse SharedMemory(const Route& route, const HttpRequest& request) const;
  // Reads `request` during the call only (its body and cancellation are moved from it).
  void Infer(const Route& route, HttpRequest& request, std::string request_id,
             HttpResponder respond) const;
  // Adds X-Request-Id, writes the access log line (when on) and responds: every answer that is
  // not an inference's goes through here.
  void Answer(const HttpRequest& request, std::string_view request_id, HttpResponse response,
              const HttpResponder& respond) const;

  ModelManager* const models_;
  const Options options_;
  // POST .../infer's path to the model, shared with the gRPC front end (protocol/common/).
  const InferenceFlow flow_;
};

}  // namespace harrier::kserve
