// ComputeCores: the process's cores as a budget that compute thread pools take for each graph
// they run. ggml's thread pool (llama.cpp) meets a busy-waiting barrier at every operation of a
// graph; two pools whose threads together outnumber the cores preempt each other at those
// barriers, and each waits out the other's time slice. Two llama.cpp models generating at once
// on two cores took 2-20 ms per token each, against 0.4 ms alone (docs/benchmarks.md, session
// 23). A pool takes as many cores as it has threads (at most the budget) before a graph and
// gives them back after it, so pools that fit side by side run at once and the others take
// turns, first come first served (a large taker is never passed by later small ones).
// Thread safety: every method from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace harrier {

class ComputeCores {
 public:
  // A budget of `cores` (at least 1).
  explicit ComputeCores(int cores);
  ComputeCores(const ComputeCores&) = delete;
  ComputeCores& operator=(const ComputeCores&) = delete;

  // The process's: UsableCores() when first asked for (affinity and cgroup quota).
  static ComputeCores& Process();

  // Cores taken until it is destroyed (or moved from).
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease();
    int cores() const { return cores_; }

   private:
    friend class ComputeCores;
    Lease(ComputeCores* owner, int cores) : owner_(owner), cores_(cores) {}
    ComputeCores* owner_;
    int cores_;
  };

  // Blocks until it is this caller's turn and min(threads, cores()) cores are free, then takes
  // them. Must not be called while holding a Lease of the same budget (it could wait for itself).
  Lease Take(int threads);

  int cores() const { return cores_; }
  int free_cores() const;
  // How many Take() calls are waiting now. For tests, which must know that a taker is in line.
  int waiting() const;

 private:
  void Give(int cores);

  const int cores_;
  mutable std::mutex mu_;
  std::condition_variable turn_;
  int free_;                  // guarded by mu_
  uint64_t next_ticket_ = 0;  // guarded by mu_: the next caller's place in line
  uint64_t serving_ = 0;      // guarded by mu_: the place in line whose turn it is
};

}  // namespace harrier
