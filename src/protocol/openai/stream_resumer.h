// Resumer: a stream read again after its Last-Event-ID (GET /v1/streams/{id}, docs/openai.md):
// the StreamStore's events after it, then the live rest, at the pace the client reads (no more
// is read from the store while more than the buffer bound waits for it). Writes the resume
// request's own access line when the stream ends.
//
// Thread safety: the store's wake-ups (through the timer thread), the transport's and the
// handler's calls meet under the resumer's lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "core/timer_thread.h"
#include "harrier/http_message.h"
#include "harrier/response_stream.h"
#include "protocol/openai/handler_shared.h"
#include "protocol/openai/stream_store.h"

namespace harrier::openai {

// A resumed stream: the store's events after Last-Event-ID, then the live rest.
class Resumer : public std::enable_shared_from_this<Resumer> {
 public:
  using Clock = std::chrono::steady_clock;

  // Events read from the store per turn: what a slow reader's queue may pass its bound by.
  static constexpr size_t kResumeBatchEvents = 32;

  // `line`: the resume request as its access line names it (method, target, key) and its own
  // `request_id`, written once, when the stream ends (core/route_answer.h).
  Resumer(SharedPtr shared, std::shared_ptr<ResponseStream> out, HttpRequest line,
          std::string request_id);
  ~Resumer();
  // Keeps itself alive while it has a reader: until the stream ends or the client goes.
  void SetReader(std::unique_ptr<StreamReader> reader);
  // The connection closed (the client went away, or the server stopped at its exit timeout): the
  // stream ends unfinished.
  void ClientGone();
  // The store says there is more (under its lock: only schedule).
  static void Wake(const std::weak_ptr<Resumer>& weak, TimerThread* timer);
  void Pump();

 private:
  // Why a stream's line says it ended early when its connection went: the client's leaving and
  // the server's stop at --exit-timeout-secs look alike from here (probe 42).
  static constexpr std::string_view kConnectionClosed =
      "the connection closed before the stream ended";

  // The stream's access line: 200 (its head went out), the event bytes written, and why it
  // ended early. Once; under mu_.
  void WriteLine(std::string_view error);

  const SharedPtr shared_;
  const std::shared_ptr<ResponseStream> out_;
  const HttpRequest line_;
  const std::string request_id_;
  std::mutex mu_;
  std::unique_ptr<StreamReader> reader_;  // guarded by mu_
  std::shared_ptr<Resumer> self_;         // guarded by mu_: set while reader_ is
  uint64_t bytes_ = 0;                    // guarded by mu_
  bool logged_ = false;                   // guarded by mu_
};

}  // namespace harrier::openai
