// OpenAiHandler: the generation endpoints (docs/openai.md), in front of another HttpHandler.
//
//   GET  /v1/models, /v1/models/{id}        the models that generate text
//   POST /v1/chat/completions               OpenAI chat (messages through the chat template)
//   POST /v1/completions                    OpenAI completions (the prompt as is)
//   GET  /v1/streams/{id}                   resume a stream after its Last-Event-ID
//   POST /v2/models/{m}[/versions/{v}]/generate, .../generate_stream   Triton's generate
//
// Any other request, and every Precheck() of another route, goes to `next`.
//
// A generation takes the model's version handle (ModelManager::Route, so traffic policies
// apply), renders the prompt, and runs `n` sequences on the version's GenerativeModel. Without
// `stream` the answer is one JSON body once every sequence has ended. With it the head goes out
// at once (text/event-stream) and each token follows as an SSE event as it is produced
// (HttpResponse::stream): every event has an id and is kept in the StreamStore, so a client
// that lost its connection reads the rest from GET /v1/streams/{id} (`{id}` is the stream's
// X-Request-Id, 128 random bits, since it lets its holder read the generation). Idle streams get
// `: ping` comments every heartbeat_interval. A client that goes away stops its sequences after
// disconnect_grace (0: at once) unless it resumed meanwhile; a client that reads so slowly that
// more than max_pending_stream_bytes wait for it gets an error event, and its sequences stop.
//
// Each generation reports one access-log line (with its token counts and time to first token)
// and, when traced, its spans (queue, prompt, generate: docs/tracing.md) through a
// GenerationRecord; the answer carries `traceresponse`.
//
// Thread safety: Handle() and Precheck() from any thread. Engine callbacks, timer callbacks and
// the transport's cancellations meet in each generation under its own lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "harrier/access_log.h"
#include "harrier/http_message.h"
#include "harrier/model_manager.h"
#include "harrier/trace.h"
#include "protocol/openai/generation_params.h"
#include "protocol/openai/stream_store.h"

namespace harrier::openai {

class OpenAiHandler : public HttpHandler {
 public:
  struct Options {
    // Not owned; must outlive the handler and every request in flight. Null: no access log.
    AccessLog* access_log = nullptr;
    // Not owned, as access_log. Null: no tracing. A generation's spans: docs/tracing.md.
    Tracer* tracer = nullptr;
    // A `: ping` comment on a stream that sent nothing for this long; zero: none.
    std::chrono::milliseconds heartbeat_interval{15'000};
    // How long a generation whose client has gone keeps running, so that a quick reconnect
    // loses nothing; zero (the default): it stops at once.
    std::chrono::milliseconds disconnect_grace{0};
    // Bytes a stream may hold for a client that does not read before it is ended with an
    // error event.
    std::size_t max_pending_stream_bytes = std::size_t{1} << 20;
    StreamStoreOptions store;
    RequestLimits limits;
    // A body sent with Content-Encoding gzip or deflate is decoded up to this many bytes
    // (413 past them), as the KServe endpoints do (--max-body-bytes).
    uint64_t max_body_bytes = uint64_t{64} << 20;
  };

  // `models` and `next` are not owned and must outlive the handler and every request in flight.
  OpenAiHandler(ModelManager* models, HttpHandler* next, Options options);
  ~OpenAiHandler() override;

  void Handle(HttpRequest&& request, HttpResponder respond) override;
  std::optional<HttpResponse> Precheck(const HttpRequest& head) override;
  bool ServesAsStream(const HttpRequest& head) const override;
  std::shared_ptr<HttpStreamHandler> OpenStream(const HttpRequest& head,
                                                std::shared_ptr<HttpStreamWriter> writer,
                                                HttpResponse* response_head) override;
  // Under /v1/: OpenAI's error object (`code` as its code), which its SDKs read; else next's.
  std::optional<HttpResponse> TransportError(int status, std::string_view message,
                                             const HttpRequest& request,
                                             std::string_view code) override;

  struct Shared;  // what generations share with the handler (and may outlive it with)

 private:
  void Generate(HttpRequest request, HttpResponder respond, int kind, std::string model,
                std::optional<int64_t> version);
  void Resume(HttpRequest request, HttpResponder respond, std::string_view stream_id);
  HttpResponse ListModels(bool one, std::string_view id);

  ModelManager* const models_;
  HttpHandler* const next_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace harrier::openai
