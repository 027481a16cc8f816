#include "core/thread_spawner.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>

namespace harrier {
namespace {

int ThisThreadNice() { return getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())); }

class Spawner {
 public:
  Spawner() : nice_(ThisThreadNice()) {
    thread_ = std::thread([this] { Run(); });
    pthread_setname_np(thread_.native_handle(), "thread-spawner");
  }
  ~Spawner() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      cv_.notify_one();
    }
    thread_.join();
  }

  std::thread Spawn(std::function<void()> fn) {
    if (ThisThreadNice() == nice_) return std::thread(std::move(fn));
    Request request{std::move(fn), {}};
    std::future<std::thread> created = request.created.get_future();
    {
      std::lock_guard lock(mu_);
      if (stopping_) return std::thread(std::move(request.fn));
      queue_.push_back(&request);
      cv_.notify_one();
    }
    return created.get();
  }

 private:
  struct Request {
    std::function<void()> fn;
    std::promise<std::thread> created;
  };

  void Run() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      while (!queue_.empty()) {
        Request* request = queue_.front();
        queue_.pop_front();
        lock.unlock();
        try {
          request->created.set_value(std::thread(std::move(request->fn)));
        } catch (...) {
          request->created.set_exception(std::current_exception());
        }
        lock.lock();
      }
      if (stopping_) return;
    }
  }

  const int nice_;  // the normal priority: the creating thread's
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request*> queue_;  // guarded by mu_; each waited on by its Spawn() call
  bool stopping_ = false;       // guarded by mu_
  std::thread thread_;
};

std::mutex g_mu;
std::unique_ptr<Spawner> g_spawner;  // guarded by g_mu for its creation; lives until exit

Spawner* Get() {
  std::lock_guard lock(g_mu);
  return g_spawner.get();
}

}  // namespace

void InitThreadSpawner() {
  std::lock_guard lock(g_mu);
  if (!g_spawner) g_spawner = std::make_unique<Spawner>();
}

StatusOr<std::thread> SpawnThread(std::function<void()> fn) {
  try {
    Spawner* spawner = Get();
    if (spawner == nullptr) return std::thread(std::move(fn));
    return spawner->Spawn(std::move(fn));
  } catch (const std::system_error& e) {
    return ResourceExhausted(std::string("cannot start a thread: ") + e.what() +
                             " (the process's thread limit: ulimit -u, or a container's pids "
                             "limit)");
  }
}

}  // namespace harrier
