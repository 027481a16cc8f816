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
  // ---- The producer's side (HttpStreamWriter) ----
  // Appends `bytes` to what waits for the transport (copied into the stream's buffer, so that
  // the producer's string is freed on the producer's thread and the buffer is reused: a stream
  // that keeps being written and taken allocates nothing). `on_written` runs once: true, on the
  // transport's thread, when the part's last byte is with the kernel; false when it never will
  // be (abandoned), on whichever thread found out. After Finish(), a write is dropped
  // (on_written(false)).
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
  // What the transport takes in one go: every part written since the last Take, as one run of
  // bytes (the parts' boundaries carry no meaning for the body), and the parts' reports.
  struct Taken {
    std::string bytes;
    std::vector<std::function<void(bool written)>> on_written;  // the parts' non-empty ones
    bool finished = false;  // Finish() was called and nothing is left after these bytes
    std::vector<std::pair<std::string, std::string>> trailers;  // with `finished`
    bool empty() const { return bytes.empty() && on_written.empty() && !finished; }
  };
  // Moves what has been written since the last call into `*taken`, whose `bytes` must be empty
  // (its capacity becomes the stream's next buffer) and whose `on_written` must be empty. When
  // nothing is waiting and the stream is not finished, `*taken` stays empty() and the stream
  // remembers that the transport waits: the next Write() or Finish() calls `wake` once (on the
  // producer's thread; it must only post work to the transport's thread).
  void Take(Taken* taken);
  // Sets the wake-up; before the first Take().
  void Attach(std::function<void()> wake);
  // Reports taken bytes as sent or not: their parts' on_written run, pending_bytes() drops by
  // their size, and `taken` is emptied for the next Take (keeping its buffer's capacity).
  void Complete(Taken& taken, bool written);
  // The same for `size` bytes whose buffer the transport moved elsewhere, with their reports.
  void Complete(std::size_t size, std::vector<std::function<void(bool written)>>& on_written,
                bool written);
  // The transport gives up: queued parts report on_written(false), later writes are dropped,
  // the wake is released.
  void Abandon();

 private:
  mutable std::mutex mu_;
  std::string queued_;                                         // guarded by mu_
  std::vector<std::function<void(bool)>> queued_reports_;      // guarded by mu_
  std::vector<std::pair<std::string, std::string>> trailers_;  // guarded by mu_
  std::function<void()> wake_;                                 // guarded by mu_
  std::size_t pending_ = 0;                                    // guarded by mu_
  bool finished_ = false;                                      // guarded by mu_
  bool finish_taken_ = false;                                  // guarded by mu_
  bool waiting_ = false;                                       // guarded by mu_
  bool abandoned_ = false;                                     // guarded by mu_
};

}  // namespace harrier
