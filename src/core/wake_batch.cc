#include "harrier/wake_batch.h"

#include <utility>

namespace harrier {
namespace {

thread_local WakeBatch* t_outermost = nullptr;

}  // namespace

WakeBatch::WakeBatch() : outer_(t_outermost) {
  if (outer_ == nullptr) t_outermost = this;
}

WakeBatch::~WakeBatch() {
  if (outer_ != nullptr) return;
  // A wake-up may itself write to a stream (and defer again): those run too, after these.
  for (std::size_t i = 0; i < deferred_.size(); ++i) {
    auto wake = std::move(deferred_[i]);
    if (wake) wake();
  }
  t_outermost = nullptr;
}

void WakeBatch::RunOrDefer(std::function<void()> wake) {
  if (t_outermost == nullptr) {
    wake();
    return;
  }
  t_outermost->deferred_.push_back(std::move(wake));
}

bool WakeBatch::Active() { return t_outermost != nullptr; }

}  // namespace harrier
