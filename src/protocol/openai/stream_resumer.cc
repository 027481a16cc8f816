#include "protocol/openai/stream_resumer.h"

#include <utility>

#include "core/route_answer.h"
#include "protocol/openai/openai_error.h"
#include "protocol/openai/sse.h"

namespace harrier::openai {

Resumer::Resumer(SharedPtr shared, std::shared_ptr<ResponseStream> out, HttpRequest line,
                 std::string request_id)
    : shared_(std::move(shared)),
      out_(std::move(out)),
      line_(std::move(line)),
      request_id_(std::move(request_id)) {}

Resumer::~Resumer() {
  std::lock_guard lock(mu_);
  reader_.reset();  // before the store, which `shared_` keeps
}

void Resumer::SetReader(std::unique_ptr<StreamReader> reader) {
  std::shared_ptr<Resumer> released;
  std::lock_guard lock(mu_);
  reader_ = std::move(reader);
  if (reader_) {
    self_ = shared_from_this();
  } else {
    released = std::move(self_);
  }
}

void Resumer::ClientGone() {
  std::shared_ptr<Resumer> released;
  std::lock_guard lock(mu_);
  if (!reader_) return;
  reader_.reset();
  released = std::move(self_);
  WriteLine(kConnectionClosed);
}

void Resumer::Wake(const std::weak_ptr<Resumer>& weak, TimerThread* timer) {
  timer->Schedule(Clock::now(), [weak] {
    if (auto r = weak.lock()) r->Pump();
  });
}

void Resumer::Pump() {
  std::shared_ptr<Resumer> released;  // the last reference may be our own: drop it last
  std::lock_guard lock(mu_);
  if (!reader_) return;
  if (out_->abandoned()) {  // the client went away again
    reader_.reset();
    released = std::move(self_);
    WriteLine(kConnectionClosed);
    return;
  }
  // A client that reads slowly holds back what was written: no more is read from the store
  // until that drains (the last part written over the bound wakes the pump when it is
  // sent). Stored events can wait, unlike a live generation's, so a resumer is slowed, never
  // cut off. Without the bound, every resumer that did not read got the whole stored stream
  // queued (probe 31: 40 of a 6.8 MB stream, +230 MiB).
  const std::size_t bound = shared_->options.max_pending_stream_bytes;
  if (out_->pending_bytes() > bound) return;
  auto batch = reader_->Read(kResumeBatchEvents);
  for (size_t i = 0; i < batch.events.size(); ++i) {
    std::string event = SseEvent(batch.events[i].data, batch.events[i].id);
    bytes_ += event.size();
    const bool last = i + 1 == batch.events.size();
    if (last && out_->pending_bytes() + event.size() > bound) {
      out_->Write(std::move(event),
                  [weak = weak_from_this(), timer = &shared_->timer](bool) { Wake(weak, timer); });
    } else {
      out_->Write(std::move(event), {});
    }
  }
  if (batch.state == StreamState::kGone) {
    const Status gone = NotFound("the stream expired or was evicted");
    std::string event = SseEvent(OpenAiErrorJson(gone));
    bytes_ += event.size();
    out_->Write(std::move(event), {});
    out_->Finish();
    reader_.reset();
    released = std::move(self_);
    WriteLine(gone.message());
  } else if (batch.state == StreamState::kFinished && batch.drained) {
    out_->Finish();
    reader_.reset();
    released = std::move(self_);
    WriteLine("");
  } else if (!batch.drained && out_->pending_bytes() <= bound) {
    Wake(weak_from_this(), &shared_->timer);  // more than one batch: the rest next turn
  }
}

void Resumer::WriteLine(std::string_view error) {
  if (logged_) return;
  logged_ = true;
  std::lock_guard lock(shared_->resume_log_mu);
  WriteRouteAccessLine(shared_->resume_log, line_, request_id_, 200, 0, bytes_, error);
}
}  // namespace harrier::openai
