// What an OpenAiHandler shares with its generations and resumed streams, which may outlive it
// (a stream goes on after the handler is destroyed at shutdown, until the transport ends it).
//
// Thread safety: `options`, `store` and `timer` are thread-safe or set once; the rest is
// guarded as marked.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/timer_thread.h"
#include "protocol/openai/endpoint_answers.h"
#include "protocol/openai/openai_handler.h"
#include "protocol/openai/stream_store.h"

namespace harrier::openai {

class Generation;

struct OpenAiHandler::Shared {
  Options options;
  std::unique_ptr<StreamStore> store;
  TimerThread timer;
  int64_t started = UnixSeconds();  // the models' `created`
  // Streaming generations by stream id, so that a resume can tell its generation to go on.
  std::mutex live_mu;
  std::unordered_map<std::string, std::weak_ptr<Generation>> live;  // guarded by live_mu
  // options.access_log while the handler lives, for the resumed streams' lines: a resume may
  // end after the handler, and the access log, are gone (the handler's destructor clears it).
  std::mutex resume_log_mu;
  AccessLog* resume_log = nullptr;  // guarded by resume_log_mu
};

using SharedPtr = std::shared_ptr<OpenAiHandler::Shared>;

}  // namespace harrier::openai
