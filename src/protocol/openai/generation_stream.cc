#include "protocol/openai/generation_stream.h"

#include <algorithm>
#include <utility>

#include "core/status_mapping.h"
#include "protocol/openai/generate_response.h"
#include "protocol/openai/openai_error.h"
#include "protocol/openai/random_id.h"
#include "protocol/openai/sse.h"

namespace harrier::openai {

Generation::Generation(Setup setup, GenerationRecord record)
    : s_(std::move(setup)), record_(std::move(record)), choices_(s_.params.n) {
  meta_.id =
      s_.kind == kChat ? NewChatCompletionId(SystemRandom()) : NewCompletionId(SystemRandom());
  meta_.created = UnixSeconds();
  meta_.model = s_.params.model;
  meta_.include_usage = s_.params.include_usage;
  engine_token_ = std::make_shared<CancellationToken>();
}

void Generation::SetStream(std::shared_ptr<ResponseStream> out, HttpResponse head,
                           HttpResponder respond) {
  out_ = std::move(out);
  head_ = std::move(head);
  respond_ = std::move(respond);
  last_write_ = Clock::now();
  ScheduleHeartbeat(last_write_ + s_.shared->options.heartbeat_interval);
}

void Generation::WatchClient() {
  if (!s_.client_token) return;
  std::weak_ptr<Generation> weak = weak_from_this();
  client_watch_ = s_.client_token->OnCancel([weak] {
    if (auto g = weak.lock()) g->OnClientGone();
  });
}

void Generation::MarkResumed() {
  std::lock_guard lock(mu_);
  resumed_ = true;
}

void Generation::Refused(int index, const Status& status) {
  {
    std::lock_guard lock(mu_);
    choices_[index].refused = true;
  }
  OnEnd(index, harrier::FinishReason::kError, GenerationUsage{}, status);
}

void Generation::OnAccepted(int index) {
  std::unique_lock lock(mu_);
  choices_[index].accepted = true;
  SendHeadLocked(std::move(lock));
}

void Generation::Submitted() {
  std::unique_lock lock(mu_);
  submitted_ = true;
  lock = SendHeadLocked(std::move(lock));
  if (ended_ < static_cast<int>(choices_.size()) || finished_) return;
  FinishLocked(std::move(lock));
}

void Generation::OnStart(int index) {
  std::lock_guard lock(mu_);
  if (!choices_[index].ended) record_.SequenceStarted(Clock::now());
}

void Generation::OnTokenLogprobs(int index, const TokenLogprobs& token) {
  std::lock_guard lock(mu_);
  Choice& c = choices_[index];
  if (c.ended || !AnswersLogprobs()) return;
  TokenLogprob& entry = c.logprobs.emplace_back();
  entry.token = token.bytes;
  entry.logprob = token.logprob;
  entry.top.reserve(token.top.size());
  for (const auto& alternative : token.top) {
    entry.top.push_back({alternative.bytes, alternative.logprob});
  }
}

void Generation::OnToken(int index, std::string_view text) {
  std::lock_guard lock(mu_);
  Choice& c = choices_[index];
  if (c.ended) return;
  record_.Token(Clock::now());
  if (text.empty()) return;  // the engine holds text back (a possible stop string)
  if (!streaming()) {
    c.text.append(text);
    return;
  }
  if (IsTriton(s_.kind)) {
    EmitLocked(GenerateResponseJson(s_.params.model, VersionString(), text));
    return;
  }
  EmitContentLocked(index, text);
}

void Generation::OnEnd(int index, harrier::FinishReason reason, const GenerationUsage& usage,
                       const Status& status) {
  std::unique_lock lock(mu_);
  Choice& c = choices_[index];
  if (c.ended) return;
  c.ended = true;
  if (!c.accepted) c.refused = true;  // by the engine, before its prompt was accepted
  c.reason = reason;
  c.usage = usage;
  c.status = status;
  record_.SequenceEnded(usage);
  if (streaming() && !finished_) {
    // A cancelled stream says so too: a reader who resumes it must see that it was cut short.
    if (reason == harrier::FinishReason::kError || reason == harrier::FinishReason::kDeadline ||
        reason == harrier::FinishReason::kCancelled) {
      // One error event ends the stream (an SDK stops reading there): the other choices stop,
      // and their ends say nothing more.
      if (!error_sent_) {
        error_sent_ = true;
        const Status why = reason == harrier::FinishReason::kCancelled && !cancelled_because_.ok()
                               ? cancelled_because_
                               : FinishStatus(reason, status);
        EmitLocked(IsTriton(s_.kind) ? GenerateErrorJson(why.message()) : OpenAiErrorJson(why));
        // Cancel only wakes the engine's loop: safe under the lock, as in EmitLocked.
        if (ended_ + 1 < static_cast<int>(choices_.size())) engine_token_->Cancel();
      }
    } else if (reason != harrier::FinishReason::kCancelled) {
      // Tokens whose text never came (the stop string's): their logprobs still go out.
      if (!IsTriton(s_.kind) && !c.logprobs.empty()) EmitContentLocked(index, "");
      if (s_.kind == kChat) {
        if (!c.role_sent) {
          c.role_sent = true;
          EmitLocked(ChatRoleChunkJson(meta_, index));
        }
        EmitLocked(ChatFinishChunkJson(meta_, index, WireReason(reason)));
      } else if (s_.kind == kCompletion) {
        EmitLocked(CompletionFinishChunkJson(meta_, index, WireReason(reason)));
      }
    }
  }
  if (++ended_ < static_cast<int>(choices_.size()) || !submitted_) return;
  FinishLocked(std::move(lock));
}

void Generation::OnClientGone() {
  std::chrono::milliseconds grace = s_.shared->options.disconnect_grace;
  {
    std::lock_guard lock(mu_);
    if (finished_) return;
    client_gone_ = true;
    if (out_) out_->Abandon();
    // What a reader who resumes the stream is told, if the sequences stop for it.
    cancelled_because_ = Cancelled(
        grace.count() <= 0 ? std::string("the client disconnected; the generation stopped")
                           : "the client disconnected and did not resume the stream within " +
                                 std::to_string(grace.count()) + " ms; the generation stopped");
  }
  if (grace.count() <= 0) {
    engine_token_->Cancel();
    return;
  }
  std::weak_ptr<Generation> weak = weak_from_this();
  s_.shared->timer.Schedule(Clock::now() + grace, [weak] {
    auto g = weak.lock();
    if (!g) return;
    {
      std::lock_guard lock(g->mu_);
      if (g->resumed_ || g->finished_) return;
    }
    g->engine_token_->Cancel();
  });
}

void Generation::EmitContentLocked(int index, std::string_view text) {
  Choice& c = choices_[index];
  const std::vector<TokenLogprob>* logprobs = AnswersLogprobs() ? &c.logprobs : nullptr;
  if (s_.kind == kChat) {
    if (!c.role_sent) {
      c.role_sent = true;
      EmitLocked(ChatRoleChunkJson(meta_, index));
    }
    EmitLocked(ChatContentChunkJson(meta_, index, text, logprobs));
  } else {
    EmitLocked(CompletionChunkJson(meta_, index, text, logprobs, c.logprobs_offset));
  }
  for (const TokenLogprob& t : c.logprobs) c.logprobs_offset += t.token.size();
  c.logprobs.clear();
}

std::string Generation::VersionString() const {
  return s_.model ? std::to_string(s_.model->version()) : std::string();
}

void Generation::EmitLocked(std::string data) {
  if (overflowed_) return;  // the stream ended with the back-pressure error: nothing after it
  const bool overflowing =
      !client_gone_ && out_ && out_->pending_bytes() > s_.shared->options.max_pending_stream_bytes;
  if (overflowing) {
    // Kept and numbered like any event, in place of `data`: a reader who resumes the stream
    // sees where and why it ended.
    overflowed_ = true;
    const Status why =
        ResourceExhausted("the client reads the stream too slowly: more than " +
                          std::to_string(s_.shared->options.max_pending_stream_bytes) +
                          " bytes are waiting for it; the generation stops");
    data = IsTriton(s_.kind) ? GenerateErrorJson(why.message()) : OpenAiErrorJson(why);
  }
  uint64_t id = ++events_;
  if (!s_.request_id.empty()) {
    auto stored = s_.shared->store->Append(s_.request_id, data);
    if (stored.ok()) id = *stored;
  }
  if (overflowing) {
    out_->Write(SseEvent(data, id), {});
    out_->Finish();
    // Outside the lock would be better, but Cancel only wakes the engine's loop.
    engine_token_->Cancel();
    return;
  }
  if (client_gone_ || !out_) return;
  std::string event = SseEvent(data, id);
  response_bytes_ += event.size();
  out_->Write(std::move(event), {});
  last_write_ = Clock::now();
}

std::unique_lock<std::mutex> Generation::SendHeadLocked(std::unique_lock<std::mutex> lock) {
  if (!streaming() || head_sent_ || finished_ || !submitted_ || !RefusalLocked().ok() ||
      std::none_of(choices_.begin(), choices_.end(), [](const Choice& c) { return c.accepted; })) {
    return lock;
  }
  head_sent_ = true;
  HttpResponse head = std::move(head_);
  HttpResponder respond = respond_;
  lock.unlock();
  respond(std::move(head));
  lock.lock();
  return lock;
}

Status Generation::RefusalLocked() const {
  for (const auto& c : choices_) {
    if (c.refused && !c.status.ok() && c.status.code() != StatusCode::kCancelled) {
      return c.status;
    }
  }
  return Status::Ok();
}

void Generation::FinishLocked(std::unique_lock<std::mutex> lock) {
  finished_ = true;
  if (streaming() && !head_sent_) {
    // No sequence was accepted (each refused at once, or by the engine for its prompt), or one
    // was refused: no stream, a plain error.
    Status failure = RefusalLocked();
    for (const Choice& c : choices_) {
      if (!failure.ok()) break;
      failure = FinishStatus(c.reason, c.status);
    }
    if (failure.ok()) failure = Internal("no sequence was accepted");
    if (out_) out_->Abandon();
    if (!s_.request_id.empty()) (void)s_.shared->store->Finish(s_.request_id);
    HttpResponse answer = RefusalResponse(s_.kind, failure);
    answer.headers.emplace_back("X-Request-Id", client_request_id_);
    if (record_.traced()) answer.headers.emplace_back("traceresponse", record_.TraceResponse());
    answer.on_sent = record_.Finish(answer.status, failure.message(), answer.body.size());
    HttpResponder respond = std::move(respond_);
    lock.unlock();
    Forget();
    respond(std::move(answer));
    return;
  }
  GenerationUsage total;
  Status failure = RefusalLocked();
  bool failed = !failure.ok();
  for (const auto& c : choices_) {
    total.prompt_tokens = std::max(total.prompt_tokens, c.usage.prompt_tokens);
    total.completion_tokens += c.usage.completion_tokens;
    total.reused_prompt_tokens = std::max(total.reused_prompt_tokens, c.usage.reused_prompt_tokens);
    if (!failed && (c.reason == harrier::FinishReason::kError ||
                    c.reason == harrier::FinishReason::kDeadline ||
                    c.reason == harrier::FinishReason::kCancelled)) {
      failed = true;
      failure = FinishStatus(c.reason, c.status);
    }
  }
  const Usage usage{total.prompt_tokens, total.completion_tokens, total.reused_prompt_tokens};
  int status = 200;
  std::string error;
  HttpResponder respond;
  if (streaming()) {
    if (!IsTriton(s_.kind)) {
      if (s_.params.include_usage && !failed) {
        EmitLocked(s_.kind == kChat ? ChatUsageChunkJson(meta_, usage)
                                    : CompletionUsageChunkJson(meta_, usage));
      }
      EmitLocked("[DONE]");
    }
    if (out_ && !overflowed_) out_->Finish();
    if (!s_.request_id.empty()) (void)s_.shared->store->Finish(s_.request_id);
    if (failed) error = failure.message();
  } else {
    respond = std::move(respond_);
  }
  lock.unlock();

  HttpResponse answer;
  if (!streaming()) {
    if (failed) {
      answer = RefusalResponse(s_.kind, failure);
      error = failure.message();
    } else {
      std::vector<openai::Choice> out;
      for (std::size_t i = 0; i < choices_.size(); ++i) {
        out.push_back(openai::Choice{static_cast<int32_t>(i), std::move(choices_[i].text),
                                     WireReason(choices_[i].reason), std::nullopt});
        if (AnswersLogprobs()) out.back().logprobs = std::move(choices_[i].logprobs);
      }
      answer = JsonResponse(200, s_.kind == kChat ? ChatCompletionJson(meta_, out, usage)
                                 : s_.kind == kCompletion
                                     ? CompletionJson(meta_, out, usage)
                                     : GenerateResponseJson(s_.params.model, VersionString(),
                                                            out.empty() ? "" : out[0].text));
    }
    status = answer.status;
    response_bytes_ = answer.body.size();
    answer.headers.emplace_back("X-Request-Id", client_request_id_);
    if (record_.traced()) answer.headers.emplace_back("traceresponse", record_.TraceResponse());
  }
  auto on_sent = record_.Finish(status, error, response_bytes_);
  Forget();
  if (respond) {
    answer.on_sent = std::move(on_sent);
    respond(std::move(answer));
  } else if (on_sent) {
    on_sent(true, Clock::now());  // a stream's last event is with the transport
  }
}

void Generation::Forget() {
  if (!s_.request_id.empty()) {
    std::lock_guard live(s_.shared->live_mu);
    s_.shared->live.erase(s_.request_id);
  }
  if (s_.client_token && client_watch_ != 0) s_.client_token->Unregister(client_watch_);
  // Not released here, on the engine's thread: the last handle would shut the engine down
  // from its own thread.
  s_.shared->timer.Schedule(Clock::now(), [model = std::move(s_.model)] {});
}

void Generation::ScheduleHeartbeat(Clock::time_point at) {
  if (s_.shared->options.heartbeat_interval.count() <= 0) return;
  std::weak_ptr<Generation> weak = weak_from_this();
  s_.shared->timer.Schedule(at, [weak] {
    if (auto g = weak.lock()) g->Heartbeat();
  });
}

void Generation::Heartbeat() {
  std::lock_guard lock(mu_);
  if (finished_ || client_gone_ || overflowed_ || !out_) return;
  const auto interval = s_.shared->options.heartbeat_interval;
  const auto now = Clock::now();
  if (!head_sent_) {  // nothing to keep alive yet: the head waits for an accepted prompt
    ScheduleHeartbeat(now + interval);
    return;
  }
  if (now - last_write_ >= interval) {
    out_->Write(std::string(kSseHeartbeat), {});
    last_write_ = now;
  }
  ScheduleHeartbeat(last_write_ + interval);
}
}  // namespace harrier::openai
