#include "observability/trace_ids.h"

#include <sys/random.h>

#include <chrono>
#include <cstddef>

namespace harrier {
namespace {

using Clock = std::chrono::steady_clock;

// splitmix64 over a per-thread counter seeded once from the kernel: a bijection of the counter,
// so one thread never repeats a value within 2^64 draws, and a few instructions per id with no
// lock and no allocation.
uint64_t SeedFromKernel() {
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof(seed), 0) != static_cast<ssize_t>(sizeof(seed))) {
    // No getrandom (very old kernel, seccomp): the clock and this thread's stack address.
    seed = static_cast<uint64_t>(Clock::now().time_since_epoch().count()) ^
           reinterpret_cast<uintptr_t>(&seed);
  }
  return seed;
}

}  // namespace

uint64_t NextRandomId() {
  thread_local uint64_t state = SeedFromKernel();
  for (;;) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    if (z != 0) return z;  // zero ids are invalid
  }
}

namespace {

template <size_t N>
void StoreBigEndian(uint64_t v, uint8_t* out) {
  for (size_t i = 0; i < N; ++i) out[i] = static_cast<uint8_t>(v >> (8 * (N - 1 - i)));
}

}  // namespace

std::array<uint8_t, 8> NewSpanId() {
  std::array<uint8_t, 8> id;
  StoreBigEndian<8>(NextRandomId(), id.data());
  return id;
}

}  // namespace harrier
