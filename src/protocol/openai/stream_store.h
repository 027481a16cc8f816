// StreamStore: the events of recent token streams, kept so that a client whose connection broke
// can reconnect and read on from the last event it got (SSE's Last-Event-ID, sse.h), whether the
// generation is still running or has finished.
//
// A stream is opened by the request that generates it, gets a random 128-bit id (32 hex digits:
// whoever knows it can read the generation, so it must not be guessable), and receives its
// events in order with ids 1, 2, 3, ... The producer finishes it when the generation ends, fails
// or is cancelled — on every path: an unfinished stream never expires by time. A finished stream
// stays readable for `retention`, then expires. Readers pull: Resume gives a StreamReader whose
// Read returns the events after the reader's position, and whose `wake` callback says when
// there is more to read (llama.cpp's next(chunk) shape, which lets the HTTP layer apply its own
// back-pressure).
//
// Bounds (StreamStoreOptions): total bytes and number of streams. Over a bound, whole streams are
// evicted from the owner (API key) that holds the most of what is short — streams for the
// stream bound, bytes for the byte bound — finished ones by finish time, then live ones by open
// time: a key that floods the store evicts its own streams, never those of a key holding fewer
// (probe 47: 1,100 one-token streams of one key evicted every other key's in 0.6 s). Without
// keys every stream has the same owner, and eviction is oldest first. Readers of an evicted or
// expired stream see StreamState::kGone. A stream that cannot fit even alone is itself
// evicted, and the Append that overflowed it fails.
//
// Thread safety: every member of StreamStore and StreamReader may be called from any thread.
// One mutex guards the whole store; `wake` callbacks run with it held (see Resume).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "harrier/clock.h"
#include "harrier/status.h"
#include "protocol/openai/random_id.h"

namespace harrier::openai {

struct StreamStoreOptions {
  // How long a finished stream stays resumable. Default 5 minutes: a phone that switched
  // networks or a laptop that woke reconnects within seconds to a minute; much longer only
  // holds memory for clients that will not come back.
  std::chrono::steady_clock::duration retention = std::chrono::minutes(5);
  // Bytes all streams may hold together: each event counts its data plus kEventOverheadBytes.
  // Default 64 MiB: a 4,000-token answer streamed as ~250-byte chunks is about 1 MB, so some
  // sixty of those.
  size_t max_total_bytes = size_t{64} << 20;
  // Streams held at once, live and finished. Default 1024.
  size_t max_streams = 1024;
  // Time source; null: SteadyClock(). Must outlive the store.
  const Clock* clock = nullptr;
  // Where stream ids come from; null: SystemRandom(). Must outlive the store.
  RandomSource* random = nullptr;
};

// What each event costs besides its data, in the byte bound: its share of the bookkeeping, so
// that a flood of empty events is bounded too.
inline constexpr size_t kEventOverheadBytes = 32;

struct StreamEvent {
  uint64_t id = 0;  // 1, 2, 3, ... within its stream
  std::string data;
};

enum class StreamState {
  kLive,      // the producer may append more
  kFinished,  // the producer finished it: no event will follow the last one
  kGone,      // evicted or expired: its events are no longer held
};

class StreamStore;
struct StoredStream;  // stream_store.cc's

// A client's position in one stream. Made by StreamStore::Resume; must be destroyed before the
// store. Thread-safe, though one reader normally serves one connection.
class StreamReader {
 public:
  ~StreamReader();
  StreamReader(const StreamReader&) = delete;
  StreamReader& operator=(const StreamReader&) = delete;

  struct Batch {
    std::vector<StreamEvent> events;  // in id order, each once
    StreamState state = StreamState::kLive;
    // true when `events` holds every event there is now (Read stopped at max_events
    // otherwise, and should be called again at once). Drained and kLive: `wake` will be called
    // when the stream next changes. Drained and kFinished or kGone: the end.
    bool drained = true;
  };

  // The next events after the reader's position (at first, after Resume's last_event_id), at
  // most `max_events` of them, and the stream's state.
  Batch Read(size_t max_events = std::numeric_limits<size_t>::max());

 private:
  friend class StreamStore;
  StreamReader(StreamStore* store, std::shared_ptr<StoredStream> stream, uint64_t next_id,
               std::function<void()> wake);

  StreamStore* const store_;
  const std::shared_ptr<StoredStream> stream_;  // kept after the store drops it, to see kGone
  // Guarded by store_->mu_:
  uint64_t next_id_;
  const std::function<void()> wake_;
  bool waiting_ = false;  // the last Read drained a live stream; wake_ is due at its next change
};

class StreamStore {
 public:
  // kInvalidArgument for a zero retention, max_total_bytes or max_streams.
  static StatusOr<std::unique_ptr<StreamStore>> Create(const StreamStoreOptions& options);
  // REQUIRES: every StreamReader of this store has been destroyed.
  ~StreamStore();

  // Opens a live stream and returns its id. Evicts the oldest stream first when max_streams
  // are held. `owner`: the API key's id that opened it (empty without keys); only that key may
  // resume it.
  std::string Open(std::string owner);

  // Appends one event's data to a live stream; returns its id. Evicts older streams as the
  // byte bound needs. Errors: kNotFound for an unknown, evicted or expired stream;
  // kInvalidArgument when the stream is finished; kResourceExhausted when the stream with this
  // event would not fit in max_total_bytes even alone (the stream is evicted).
  StatusOr<uint64_t> Append(std::string_view stream_id, std::string data);

  // Marks a stream finished: no more events, and its retention starts. Finishing a finished
  // stream is OK (so error paths may call it twice). kNotFound for an unknown, evicted or
  // expired stream.
  Status Finish(std::string_view stream_id);

  // A reader positioned after `last_event_id` (0: from the first event). `wake` is called,
  // with the store's mutex held, once after each Read that left the reader waiting on a live
  // stream, when that stream gets an event, finishes or goes; it must not call into the store
  // or block: post a task that calls Read. Holding the mutex is what makes destroying the
  // reader a clean unsubscribe: no wake runs after ~StreamReader returns.
  // `owner` must be the one the stream was opened with: another key's stream is as unknown as
  // one that never was (its existence is not revealed).
  // Errors: kNotFound for an unknown, evicted or expired stream, or another owner's;
  // kInvalidArgument for a last_event_id past the stream's last event.
  StatusOr<std::unique_ptr<StreamReader>> Resume(std::string_view stream_id, std::string_view owner,
                                                 uint64_t last_event_id,
                                                 std::function<void()> wake);

  struct Stats {
    size_t streams = 0;
    size_t live_streams = 0;
    size_t total_bytes = 0;
  };
  // Expires what is due first.
  Stats stats();

 private:
  friend class StreamReader;

  explicit StreamStore(const StreamStoreOptions& options);

  // REQUIRES: mu_ held (for all below).
  void ExpireLocked(Clock::time_point now);
  void RemoveLocked(StoredStream* stream);
  // The next stream to evict, never `keep`: of the owner holding the most streams (or, with
  // `by_bytes`, bytes) that has one to give, its oldest finished one, else its oldest live one;
  // null when there is none.
  StoredStream* VictimLocked(const StoredStream* keep, bool by_bytes) const;
  StoredStream* FindLocked(std::string_view stream_id) const;
  static void WakeLocked(StoredStream& stream);

  // Constant after construction.
  const StreamStoreOptions options_;
  const Clock& clock_;
  RandomSource& random_;

  mutable std::mutex mu_;
  // Guarded by mu_:
  std::unordered_map<std::string, std::shared_ptr<StoredStream>> streams_;
  std::list<StoredStream*> finished_order_;  // by Finish time: expiry pops from the front
  size_t total_bytes_ = 0;
  // What each owner holds, with its streams in eviction order; an owner holding none is
  // erased.
  struct OwnerShare {
    size_t streams = 0;
    size_t bytes = 0;
    std::list<StoredStream*> finished;  // by Finish time
    std::list<StoredStream*> live;      // by Open time
  };
  std::unordered_map<std::string, OwnerShare> owners_;
};

}  // namespace harrier::openai
