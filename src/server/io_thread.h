// IoThread and ServerShared: the state the HTTP server's connections share.
//
// An IoThread is one io_context, the thread that runs it and the connections that live on it.
// It is held by shared_ptr: the server holds one reference and every HttpResponder handed to a
// handler holds another, so a responder called after the server is gone still posts into a
// live (stopped) io_context instead of freed memory. The posted work only holds weak
// references to connections, so nothing cycles.
#pragma once

#include <sys/eventfd.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/block_pool.h"
#include "core/log_throttle.h"
#include "harrier/cancellation.h"
#include "harrier/http_message.h"
#include "harrier/wake_batch.h"
#include "server/http_server.h"

namespace harrier::server_internal {

// An open connection, HTTP/1.1 or HTTP/2, as the server's Stop() sees it. Both calls run on
// the connection's I/O thread.
class Connection {
 public:
  virtual ~Connection() = default;
  // Its client's share of HttpServer::Options::max_connections_per_client, given back when the
  // connection goes (null without that limit). Set by the acceptor; moves with the socket to the
  // connection that takes it over (TLS, then HTTP/1.1 or HTTP/2; an upgrade to HTTP/2).
  std::shared_ptr<void> client_slot;
  // The server is stopping: close now if idle, otherwise once what is in flight is answered.
  virtual void OnServerStopping() = 0;
  // Closes now; responses still in flight are dropped and their requests cancelled.
  virtual void Close() = 0;
};

// Constant after HttpServer::Start() except the atomics and what `mu` guards. Connections use
// it only from I/O threads, which are joined before the server (its owner) goes away.
struct ServerShared {
  HttpServer::Options options;
  HttpHandler* handler = nullptr;
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> live_connections{0};
  // accept() calls that failed (EMFILE, ENFILE, ENOBUFS, ECONNABORTED, ...), both listeners.
  std::atomic<uint64_t> failed_accepts{0};
  // The connection limit: the effective Options::max_connections, set by Start() before the
  // acceptors run. A connection counts from its accept (`accepting` until its Start() has
  // registered it in live_connections) until it closes.
  uint64_t max_connections = 0;
  std::atomic<int64_t> accepting{0};
  std::atomic<uint64_t> refused_connections{0};
  // The acceptors' log throttles (accept failures, refusals for the limit, refusals for the
  // per-client limit): one set for the server, so that its plain and TLS listeners together log
  // each at most once per 10 s. Used only on I/O thread 0, where both acceptors run.
  struct AcceptLogs {
    LogThrottle accept_errors{std::chrono::seconds(10)};
    LogThrottle refusals{std::chrono::seconds(10)};
    LogThrottle client_refusals{std::chrono::seconds(10)};
  };
  AcceptLogs accept_logs;
  // Refusals for the server-wide body budget (Options::incoming_bodies), any I/O thread.
  std::mutex incoming_log_mu;
  LogThrottle incoming_refusals{std::chrono::seconds(10)};  // guarded by incoming_log_mu
  // Connections open per client address, while Options::max_connections_per_client is set
  // (the acceptor counts up, a connection's client_slot down).
  std::mutex clients_mu;
  std::unordered_map<std::string, uint32_t> clients;  // guarded by clients_mu
  // TLS handshakes (HttpServer::tls_handshakes()): finished ones by version (0: TLS 1.2,
  // 1: TLS 1.3), resumed ones of those, failed and timed-out ones.
  std::atomic<uint64_t> tls_finished[2] = {0, 0};
  std::atomic<uint64_t> tls_resumed{0};
  std::atomic<uint64_t> tls_failed{0};
  std::atomic<uint64_t> tls_timed_out{0};

  std::mutex mu;
  std::condition_variable drained;  // notified (under mu) when live_connections reaches 0

  void OnConnectionClosed() {
    if (live_connections.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(mu);
      drained.notify_all();
    }
  }
};

class IoThread : public std::enable_shared_from_this<IoThread> {
 public:
  // Concurrency hint 1: only this thread runs the context, so Asio can keep handlers posted
  // from it on a thread-private queue (posts from other threads stay safe).
  IoThread() : ioc(1), work(boost::asio::make_work_guard(ioc)), wake_(ioc) {
    const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd >= 0) {  // else PostCoalesced falls back to asio::post
      wake_.assign(fd);
      wake_fd_ = fd;
      ArmWake();
    }
  }

  boost::asio::io_context ioc;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::thread thread;
  // The open connections of this thread; touched only on this thread (or after it is joined).
  // Destroyed before `ioc` (declared after it), so sockets never outlive their context.
  std::list<std::shared_ptr<Connection>> connections;

  // Recycled memory for what every request on this thread makes and another thread may free
  // (issue 10, docs/performance.md); each keeps at most kPooledBlocks free blocks. Any thread.
  //   token_pool: a request's CancellationToken with its shared_ptr control block
  //               (std::allocate_shared), freed by the request's last holder.
  //   post_pool:  a response posted to this thread from another one, freed here once it has
  //               run (or with the io_context, if it never does): one block holds the
  //               HttpResponse (its headers inline, harrier/http_headers.h; a PoolBox), another
  //               Asio's operation around the handler that points at it (PooledHandler).
  static constexpr std::size_t kPooledBlocks = 64;
  static constexpr std::size_t kTokenBlockBytes = sizeof(CancellationToken) + 64;
  static constexpr std::size_t kPostBlockBytes = sizeof(HttpResponse) + 256;
  const std::shared_ptr<BlockPool> token_pool = BlockPool::Make(kTokenBlockBytes, kPooledBlocks);
  const std::shared_ptr<BlockPool> post_pool = BlockPool::Make(kPostBlockBytes, kPooledBlocks);

  // The buffer this thread's MSG_TRUNC receives name (a refused body, a linger's drain): TCP never
  // writes it, the kernel drops the bytes, so it is never touched and never paged in
  // (default-initialised, not zeroed). One per thread rather than one for the process: a
  // sanitizer counts a receive into it as a write, and two threads' writes to one buffer as a
  // race (a ThreadSanitizer run reported it).
  static constexpr std::size_t kDiscardChunk = 1024 * 1024;
  const std::unique_ptr<std::byte[]> discard_sink{new std::byte[kDiscardChunk]};

  // Records that `requester` (a connection) sent a request at `now`, and says whether it is
  // this thread's sole requester (HttpRequest::sole_requester): no other connection on this
  // thread sent one in the `window` before it. On this thread only.
  bool NoteRequest(const void* requester, std::chrono::steady_clock::time_point now,
                   std::chrono::steady_clock::duration window) {
    if (requester != last_requester_) {
      other_request_at_ = last_request_at_;
      last_requester_ = requester;
    }
    last_request_at_ = now;
    const bool sole = now - other_request_at_ > window;
    if (busy_poll.count() > 0 && max_pollers > 0) NoteForBusyPoll(sole, now);
    return sole;
  }

  // Busy polling (HttpServer::Options::busy_poll; 0: off), and how many threads of the
  // process may poll at once (0: none). Set before the thread starts. While the latest request
  // came from the thread's sole requester and the thread had been idle no longer than
  // busy_poll before it, the thread polls its reactor without sleeping until busy_poll after
  // its last work, so that the requester's next request finds it awake (no wake-up latency),
  // at the cost of that CPU. The polling is a handler that posts itself: while another handler
  // waits, Asio's scheduler checks the reactor without blocking between handlers.
  std::chrono::microseconds busy_poll{0};
  int max_pollers = 0;
  // Requests that arrived while the thread polled: wake-ups it did not have to take.
  std::atomic<uint64_t> busy_poll_catches{0};
  // Whether the thread polls now (for tests).
  std::atomic<bool> polling{false};

  ~IoThread() {
    if (poller_claimed_) Pollers().fetch_sub(1, std::memory_order_relaxed);
    ReleaseAll(&running_);
    ReleaseAll(&coalesced_);
  }

  // Runs `fn` on this thread soon, never inside the call; from any thread. Calls that come
  // while an earlier one waits to run are run together, in the order they came, after one
  // wake-up of the thread: an eventfd the thread's reactor watches. (A cross-thread asio::post
  // takes the context's lock and interrupts its reactor under it, and the thread, woken, meets
  // that lock still held: a futex wait and a wake-up each time, for each post.) Inside a
  // WakeBatch (the generation engine's decode step) the wake-up waits for the batch's end, so
  // that all the streams of the step on this thread cost it one; without one, a burst still
  // shares wake-ups as far as the thread is slower than the caller.
  template <class F>
  void PostCoalesced(F fn) {
    Task* task = new (post_pool->Allocate(sizeof(TaskOf<F>))) TaskOf<F>(std::move(fn), post_pool);
    bool wake = false;
    {
      std::lock_guard lock(coalesce_mu_);
      Append(&coalesced_, task);
      wake = !coalesce_posted_;
      coalesce_posted_ = true;
    }
    if (!wake) return;
    if (!WakeBatch::Active()) {
      Wake();  // the caller holds this thread: no reference to take (nor to allocate for)
      return;
    }
    WakeBatch::RunOrDefer([self = shared_from_this()] { self->Wake(); });
  }

 private:
  // Has RunCoalesced run on this thread: through the eventfd, or asio::post without one.
  void Wake() {
    if (wake_fd_ >= 0) {
      eventfd_write(wake_fd_, 1);
    } else {
      boost::asio::post(ioc, [self = shared_from_this()] { self->RunCoalesced(); });
    }
  }
  // The eventfd's reads: each one that completes runs what has been coalesced since the last.
  // Armed again first, so that a function that throws (allocation failure: the thread logs it
  // and goes on) leaves the wake-ups working.
  void ArmWake() {
    wake_.async_read_some(boost::asio::buffer(&wake_count_, sizeof(wake_count_)),
                          [this](const boost::system::error_code& ec, std::size_t) {
                            if (ec) return;  // closed: the server is going
                            ArmWake();
                            RunCoalesced();
                          });
  }
  void RunCoalesced() {
    {
      std::lock_guard lock(coalesce_mu_);
      running_ = coalesced_;
      coalesced_ = {};
      coalesce_posted_ = false;
    }
    while (Task* task = running_.head) {
      running_.head = task->next;
      TaskRelease release{task};  // given back even if the function throws
      try {
        task->Run();
      } catch (...) {
        // The rest still runs, on the next wake-up, ahead of anything queued since.
        bool wake = false;
        {
          std::lock_guard lock(coalesce_mu_);
          if (running_.head != nullptr) {
            running_.tail->next = coalesced_.head;
            if (coalesced_.head == nullptr) coalesced_.tail = running_.tail;
            coalesced_.head = running_.head;
          }
          running_ = {};
          wake = coalesced_.head != nullptr && !coalesce_posted_;
          if (wake) coalesce_posted_ = true;
        }
        if (wake) Wake();
        throw;
      }
    }
    running_ = {};
  }

  // What PostCoalesced queues: the function and the pool its memory came from (a response
  // with its headers fits a post_pool block), linked in arrival order.
  struct Task {
    virtual void Run() = 0;
    virtual void Release() noexcept = 0;  // destroys the task and gives its memory back
    Task* next = nullptr;

   protected:
    ~Task() = default;
  };
  template <class F>
  struct TaskOf final : Task {
    TaskOf(F f, std::shared_ptr<BlockPool> pool) : fn(std::move(f)), pool(std::move(pool)) {}
    void Run() override { fn(); }
    void Release() noexcept override {
      std::shared_ptr<BlockPool> keep = std::move(pool);
      this->~TaskOf();
      keep->Free(this, sizeof(TaskOf));
    }
    F fn;
    std::shared_ptr<BlockPool> pool;
  };
  struct TaskRelease {
    Task* task;
    ~TaskRelease() { task->Release(); }
  };
  struct TaskList {
    Task* head = nullptr;
    Task* tail = nullptr;
  };
  static void Append(TaskList* list, Task* task) {
    if (list->tail != nullptr) {
      list->tail->next = task;
    } else {
      list->head = task;
    }
    list->tail = task;
  }
  static void ReleaseAll(TaskList* list) {
    while (Task* task = list->head) {
      list->head = task->next;
      task->Release();
    }
    *list = {};
  }

  boost::asio::posix::stream_descriptor wake_;  // the eventfd; destroyed before `ioc`
  int wake_fd_ = -1;                            // constant after construction
  uint64_t wake_count_ = 0;                     // the read's buffer (this thread only)
  std::mutex coalesce_mu_;
  TaskList coalesced_;            // guarded by coalesce_mu_
  bool coalesce_posted_ = false;  // guarded by coalesce_mu_
  TaskList running_;              // this thread's only

  static std::atomic<int>& Pollers() {
    static std::atomic<int> pollers{0};
    return pollers;
  }

  // A request from a sole requester (or not) at `now`: whether polling pays, and a PollStep
  // posted if none is pending -- it runs once the request's handlers are done and either polls
  // on or, at least, notes when the thread went idle, which the next request's test needs.
  void NoteForBusyPoll(bool sole, std::chrono::steady_clock::time_point now);

  // One step of the poll. The first step after a request runs once the request's handlers
  // are done: the thread is idle from then, and polls until busy_poll later. Ends when
  // polling stops paying (a request from another connection), at the deadline (the next
  // request then finds the thread idle for longer than busy_poll, and the thread does not poll
  // after that request either), or when max_pollers threads already poll.
  void PollStep();

  bool ClaimPoller() {
    if (poller_claimed_) return true;
    if (Pollers().fetch_add(1, std::memory_order_relaxed) >= max_pollers) {
      Pollers().fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    poller_claimed_ = true;
    return true;
  }

  // The poll's record (this thread only): when the thread last went idle, when the poll gives
  // up, whether a request came since the last step, whether the latest request makes polling
  // pay, whether a step is pending, and whether this thread holds one of the process's
  // max_pollers places.
  std::chrono::steady_clock::time_point idle_since_{};
  std::chrono::steady_clock::time_point poll_until_{};
  bool request_seen_ = false;
  bool poll_pays_ = false;
  bool step_posted_ = false;
  bool poller_claimed_ = false;

  // NoteRequest's record: who sent this thread's latest request and when, and when the latest
  // request from anyone else came. Zero (long ago) until a second connection asks.
  const void* last_requester_ = nullptr;
  std::chrono::steady_clock::time_point last_request_at_{};
  std::chrono::steady_clock::time_point other_request_at_{};
};

// A completion handler whose operation memory comes from `pool` (its associated allocator): a
// post from a thread that is not Asio's own otherwise costs an allocation, and so does an
// operation that finds Asio's small per-thread cache empty.
template <class F>
class PooledHandler {
 public:
  using allocator_type = PoolAllocator<void>;
  PooledHandler(std::shared_ptr<BlockPool> pool, F f)
      : allocator_(std::move(pool)), f_(std::move(f)) {}
  allocator_type get_allocator() const noexcept { return allocator_; }
  template <class... Args>
  void operator()(Args&&... args) {
    f_(std::forward<Args>(args)...);
  }

 private:
  allocator_type allocator_;
  F f_;
};

// IoThread's busy polling, here because it posts PooledHandlers.
inline void IoThread::NoteForBusyPoll(bool sole, std::chrono::steady_clock::time_point now) {
  poll_pays_ = sole && now - idle_since_ <= busy_poll;
  if (poll_pays_ && polling.load(std::memory_order_relaxed)) {
    busy_poll_catches.fetch_add(1, std::memory_order_relaxed);
  }
  request_seen_ = true;
  if (sole && !step_posted_) {
    step_posted_ = true;
    boost::asio::post(ioc, PooledHandler(post_pool, [this] { PollStep(); }));
  }
}

inline void IoThread::PollStep() {
  const auto now = std::chrono::steady_clock::now();
  if (request_seen_) {
    request_seen_ = false;
    idle_since_ = now;
    poll_until_ = now + busy_poll;
  }
  if (poll_pays_ && now < poll_until_ && !ioc.stopped() && ClaimPoller()) {
    polling.store(true, std::memory_order_relaxed);
    boost::asio::post(ioc, PooledHandler(post_pool, [this] { PollStep(); }));
    return;
  }
  polling.store(false, std::memory_order_relaxed);
  if (poller_claimed_) {
    Pollers().fetch_sub(1, std::memory_order_relaxed);
    poller_claimed_ = false;
  }
  step_posted_ = false;
}

}  // namespace harrier::server_internal
