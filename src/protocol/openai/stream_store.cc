#include "protocol/openai/stream_store.h"

#include <algorithm>
#include <cassert>
#include <deque>
#include <iterator>

namespace harrier::openai {

struct StoredStream {
  std::string id;
  std::string owner;               // the API key's id that opened it; empty without keys
  std::deque<std::string> events;  // events[i] has id i + 1: a stream never drops one event
  size_t bytes = 0;                // counted as in max_total_bytes
  bool finished = false;
  bool gone = false;
  Clock::time_point finished_at;
  // Once finished, its place in finished_order_; and its place in its owner's live or finished
  // list (splice keeps it valid).
  std::list<StoredStream*>::iterator order_pos;
  std::list<StoredStream*>::iterator owner_pos;
  std::vector<StreamReader*> readers;
};

StreamReader::StreamReader(StreamStore* store, std::shared_ptr<StoredStream> stream,
                           uint64_t next_id, std::function<void()> wake)
    : store_(store), stream_(std::move(stream)), next_id_(next_id), wake_(std::move(wake)) {}

StreamReader::~StreamReader() {
  std::lock_guard lock(store_->mu_);
  auto& readers = stream_->readers;
  readers.erase(std::remove(readers.begin(), readers.end(), this), readers.end());
}

StreamReader::Batch StreamReader::Read(size_t max_events) {
  std::lock_guard lock(store_->mu_);
  store_->ExpireLocked(store_->clock_.Now());
  Batch batch;
  const StoredStream& s = *stream_;
  if (s.gone) {
    batch.state = StreamState::kGone;
    waiting_ = false;
    return batch;
  }
  const uint64_t last_id = s.events.size();
  while (next_id_ <= last_id && batch.events.size() < max_events) {
    batch.events.push_back(StreamEvent{next_id_, s.events[next_id_ - 1]});
    ++next_id_;
  }
  batch.drained = next_id_ > last_id;
  batch.state = s.finished ? StreamState::kFinished : StreamState::kLive;
  waiting_ = batch.drained && batch.state == StreamState::kLive;
  return batch;
}

StatusOr<std::unique_ptr<StreamStore>> StreamStore::Create(const StreamStoreOptions& options) {
  if (options.retention <= Clock::duration::zero()) {
    return InvalidArgument("stream store: retention must be above zero");
  }
  if (options.max_total_bytes == 0) {
    return InvalidArgument("stream store: max_total_bytes must be above zero");
  }
  if (options.max_streams == 0) {
    return InvalidArgument("stream store: max_streams must be above zero");
  }
  return std::unique_ptr<StreamStore>(new StreamStore(options));
}

StreamStore::StreamStore(const StreamStoreOptions& options)
    : options_(options),
      clock_(options.clock != nullptr ? *options.clock : SteadyClock()),
      random_(options.random != nullptr ? *options.random : SystemRandom()) {}

StreamStore::~StreamStore() {
#ifndef NDEBUG
  for (const auto& entry : streams_) assert(entry.second->readers.empty());
#endif
}

std::string StreamStore::Open(std::string owner) {
  std::lock_guard lock(mu_);
  ExpireLocked(clock_.Now());
  while (streams_.size() >= options_.max_streams) {
    // The owner opening it counts with it: at a tie with another, its own oldest goes.
    ++owners_[owner].streams;
    StoredStream* victim = VictimLocked(nullptr, /*by_bytes=*/false);
    if (--owners_[owner].streams == 0) owners_.erase(owner);
    RemoveLocked(victim);
  }
  std::string id;
  do {
    id = RandomHexId128(random_);
  } while (streams_.contains(id));  // 2^-128 with a real source; a test's fake may collide
  auto stream = std::make_shared<StoredStream>();
  stream->id = id;
  stream->owner = std::move(owner);
  OwnerShare& share = owners_[stream->owner];
  ++share.streams;
  stream->owner_pos = share.live.insert(share.live.end(), stream.get());
  streams_.emplace(id, std::move(stream));
  return id;
}

StatusOr<uint64_t> StreamStore::Append(std::string_view stream_id, std::string data) {
  std::lock_guard lock(mu_);
  ExpireLocked(clock_.Now());
  StoredStream* s = FindLocked(stream_id);
  if (s == nullptr) return NotFound("unknown or expired stream");
  if (s->finished) return InvalidArgument("the stream is finished: no event may follow");
  const size_t cost = data.size() + kEventOverheadBytes;
  if (s->bytes + cost > options_.max_total_bytes) {
    RemoveLocked(s);
    return ResourceExhausted("the stream outgrew the stream store (" +
                             std::to_string(options_.max_total_bytes) + " bytes) and was dropped");
  }
  while (total_bytes_ + cost > options_.max_total_bytes) {
    StoredStream* victim = VictimLocked(s, /*by_bytes=*/true);
    assert(victim != nullptr);  // s alone fits, so some other stream holds the excess
    RemoveLocked(victim);
  }
  s->events.push_back(std::move(data));
  s->bytes += cost;
  total_bytes_ += cost;
  owners_[s->owner].bytes += cost;
  WakeLocked(*s);
  return static_cast<uint64_t>(s->events.size());
}

Status StreamStore::Finish(std::string_view stream_id) {
  std::lock_guard lock(mu_);
  const Clock::time_point now = clock_.Now();
  ExpireLocked(now);
  StoredStream* s = FindLocked(stream_id);
  if (s == nullptr) return NotFound("unknown or expired stream");
  if (s->finished) return Status::Ok();
  s->finished = true;
  s->finished_at = now;
  s->order_pos = finished_order_.insert(finished_order_.end(), s);
  OwnerShare& share = owners_[s->owner];
  share.finished.splice(share.finished.end(), share.live, s->owner_pos);
  WakeLocked(*s);
  return Status::Ok();
}

StatusOr<std::unique_ptr<StreamReader>> StreamStore::Resume(std::string_view stream_id,
                                                            std::string_view owner,
                                                            uint64_t last_event_id,
                                                            std::function<void()> wake) {
  std::lock_guard lock(mu_);
  ExpireLocked(clock_.Now());
  StoredStream* s = FindLocked(stream_id);
  if (s == nullptr || s->owner != owner) return NotFound("unknown or expired stream");
  if (last_event_id > s->events.size()) {
    return InvalidArgument("Last-Event-ID " + std::to_string(last_event_id) +
                           " is past the stream's last event (" + std::to_string(s->events.size()) +
                           ")");
  }
  std::unique_ptr<StreamReader> reader(
      new StreamReader(this, streams_.find(s->id)->second, last_event_id + 1, std::move(wake)));
  s->readers.push_back(reader.get());
  return reader;
}

StreamStore::Stats StreamStore::stats() {
  std::lock_guard lock(mu_);
  ExpireLocked(clock_.Now());
  return Stats{streams_.size(), streams_.size() - finished_order_.size(), total_bytes_};
}

void StreamStore::ExpireLocked(Clock::time_point now) {
  while (!finished_order_.empty() &&
         now - finished_order_.front()->finished_at >= options_.retention) {
    RemoveLocked(finished_order_.front());
  }
}

void StreamStore::RemoveLocked(StoredStream* s) {
  auto it = streams_.find(s->id);
  assert(it != streams_.end());
  const std::shared_ptr<StoredStream> keep = std::move(it->second);  // readers may hold more
  streams_.erase(it);
  if (s->finished) finished_order_.erase(s->order_pos);
  total_bytes_ -= s->bytes;
  auto share = owners_.find(s->owner);
  assert(share != owners_.end());
  (s->finished ? share->second.finished : share->second.live).erase(s->owner_pos);
  share->second.bytes -= s->bytes;
  if (--share->second.streams == 0) owners_.erase(share);
  s->bytes = 0;
  s->events.clear();
  s->events.shrink_to_fit();
  s->gone = true;
  WakeLocked(*s);
}

StoredStream* StreamStore::VictimLocked(const StoredStream* keep, bool by_bytes) const {
  StoredStream* victim = nullptr;
  size_t most = 0;
  for (const auto& [owner, share] : owners_) {
    // What the owner holds, `keep` included; `keep` itself is never evicted for its own Append.
    const size_t held = by_bytes ? share.bytes : share.streams;
    StoredStream* oldest = nullptr;
    if (!share.finished.empty()) {
      oldest = share.finished.front();  // never `keep`: it is live
    } else {
      for (StoredStream* s : share.live) {
        if (s != keep) {
          oldest = s;
          break;
        }
      }
    }
    if (oldest == nullptr || (victim != nullptr && held < most)) continue;
    // At a tie, the older stream: a finished one before a live one, the first finished first.
    if (victim != nullptr && held == most &&
        (!oldest->finished || (victim->finished && victim->finished_at <= oldest->finished_at))) {
      continue;
    }
    victim = oldest;
    most = held;
  }
  return victim;
}

StoredStream* StreamStore::FindLocked(std::string_view stream_id) const {
  // C++20's heterogeneous lookup needs a transparent hash; ids are 32 bytes, so a copy is
  // cheaper than the ceremony.
  auto it = streams_.find(std::string(stream_id));
  return it == streams_.end() ? nullptr : it->second.get();
}

void StreamStore::WakeLocked(StoredStream& s) {
  for (StreamReader* reader : s.readers) {
    if (!reader->waiting_) continue;
    reader->waiting_ = false;
    if (reader->wake_) reader->wake_();
  }
}

}  // namespace harrier::openai
