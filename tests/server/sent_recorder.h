// SentRecorder: what the transport reported through HttpResponse::on_sent, for tests. The
// callback may run on any I/O thread; the test reads from its own.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "harrier/http_message.h"

namespace harrier::testing {

class SentRecorder {
 public:
  struct Call {
    bool sent;
    std::chrono::steady_clock::time_point at;         // of the report
    std::chrono::steady_clock::time_point called_at;  // when the callback ran
    std::thread::id thread;
  };

  // A callback for HttpResponse::on_sent that records every call.
  std::function<void(bool, std::chrono::steady_clock::time_point)> Callback() {
    return [this](bool sent, std::chrono::steady_clock::time_point at) {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back({sent, at, std::chrono::steady_clock::now(), std::this_thread::get_id()});
    };
  }

  // Waits (polling) until at least `n` calls were recorded; false on timeout.
  bool WaitForCalls(std::size_t n,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (calls().size() >= n) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  std::vector<Call> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::vector<Call> calls_;
};

}  // namespace harrier::testing
