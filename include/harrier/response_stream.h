// ResponseStream: the body of a response sent in parts as it is produced (server-sent events of
// generated tokens, say). A handler makes one, puts it in HttpResponse::stream and answers with
// that response at once; the transport sends the head (status and headers, no length), then
// each part as the producer writes it — HTTP/1.1 as chunks of the chunked transfer coding,
// HTTP/2 as DATA frames — and ends the body at Finish().
//
// The producer writes from any thread, before or after the transport has the stream; parts wait
// in the stream until the transport takes them. The transport gives up on the stream when the
// client goes (connection closed, HTTP/2 stream reset, a write timeout): the request's
// CancellationToken is cancelled, abandoned() turns true, parts not yet sent report
// on_written(false) and later writes are dropped the same way.
//
// Thread safety: every method may be called from any thread. Callbacks (on_written, the
// transport's wake) run outside the stream's lock.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "harrier/http_message.h"

namespace harrier {

class ResponseStream final : public HttpStreamWriter {
 public:
  struct Part {
    std::string bytes;
    std::function<void(bool written)> on_written;  // may be empty
  };

  // ---- The producer's side (HttpStreamWriter) ----
  // Queues `bytes` as the next part. `on_written` runs once: true, on the transport's thread,
  // when the part's last byte is with the kernel; false when it never will be (abandoned), on
  // whichever thread found out. After Finish(), a write is dropped (on_written(false)).
  void Write(std::string bytes, std::function<void(bool written)> on_written) override;
  // Ends the body after the parts queued. HTTP/2 sends `trailers` in a trailing HEADERS frame;
  // HTTP/1.1 drops them. Once; later calls are ignored.
  void Finish(std::vector<std::pair<std::string, std::string>> trailers = {}) override;
  // A response stream has no request body to report.
  void Consumed(std::size_t) override {}

  // True once the transport has given up on the stream: stop producing.
  bool abandoned() const;
  // Bytes written and not yet with the kernel (queued here or in the transport): what a client
  // that reads slowly holds back. Producers bound it.
  std::size_t pending_bytes() const;

  // ---- The transport's side ----
  struct Taken {
    std::vector<Part> parts;  // in order; each part's on_written is the transport's to call
    bool finished = false;    // Finish() was called and no part is left after these
    std::vector<std::pair<std::string, std::string>> trailers;  // with `finished`
  };
  // What has been written since the last call. When it is empty and not finished, the stream
  // remembers that the transport waits: the next Write() or Finish() calls `wake` once (on the
  // producer's thread; it must only post work to the transport's thread).
  Taken Take();
  // Sets the wake-up; before the first Take().
  void Attach(std::function<void()> wake);
  // Reports a taken part as sent or not (calls its on_written and updates pending_bytes()).
  void Complete(Part& part, bool written);
  // The same for a part of `size` bytes whose bytes the transport moved elsewhere.
  void Complete(std::size_t size, std::function<void(bool written)>& on_written, bool written);
  // The transport gives up: queued parts report on_written(false), later writes are dropped,
  // the wake is released.
  void Abandon();

 private:
  mutable std::mutex mu_;
  std::vector<Part> queued_;                                   // guarded by mu_
  std::vector<std::pair<std::string, std::string>> trailers_;  // guarded by mu_
  std::function<void()> wake_;                                 // guarded by mu_
  std::size_t pending_ = 0;                                    // guarded by mu_
  bool finished_ = false;                                      // guarded by mu_
  bool finish_taken_ = false;                                  // guarded by mu_
  bool waiting_ = false;                                       // guarded by mu_
  bool abandoned_ = false;                                     // guarded by mu_
};

}  // namespace harrier
