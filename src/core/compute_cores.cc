#include "core/compute_cores.h"

#include <algorithm>
#include <utility>

#include "core/cpu_quota.h"

namespace harrier {

ComputeCores::ComputeCores(int cores) : cores_(std::max(1, cores)), free_(cores_) {}

ComputeCores& ComputeCores::Process() {
  static ComputeCores* const process = new ComputeCores(UsableCores());  // never destroyed
  return *process;
}

ComputeCores::Lease ComputeCores::Take(int threads) {
  const int want = std::clamp(threads, 1, cores_);
  std::unique_lock lock(mu_);
  const uint64_t ticket = next_ticket_++;
  turn_.wait(lock, [&] { return ticket == serving_ && free_ >= want; });
  free_ -= want;
  ++serving_;
  turn_.notify_all();  // the next in line may fit beside this one
  return Lease(this, want);
}

void ComputeCores::Give(int cores) {
  {
    std::lock_guard lock(mu_);
    free_ += cores;
  }
  turn_.notify_all();
}

int ComputeCores::free_cores() const {
  std::lock_guard lock(mu_);
  return free_;
}

int ComputeCores::waiting() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(next_ticket_ - serving_);
}

ComputeCores::Lease::Lease(Lease&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), cores_(other.cores_) {}

ComputeCores::Lease::~Lease() {
  if (owner_ != nullptr) owner_->Give(cores_);
}

}  // namespace harrier
