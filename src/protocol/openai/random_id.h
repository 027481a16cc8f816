// Random ids for things a client must not be able to guess: a stream id lets whoever holds it
// read that generation back (stream_store.h), so it comes from the kernel's CSPRNG, not from a
// counter or a seeded PRNG. Completion ids ("chatcmpl-...") use the same source: they need not
// be secret, but one kind of id is simpler than two.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace harrier::openai {

// Where random bytes come from; injected so that tests can fix or collide ids.
class RandomSource {
 public:
  virtual ~RandomSource() = default;
  // Fills `out` entirely. Must be thread-safe.
  virtual void Fill(std::span<std::byte> out) = 0;
};

// getrandom(2): the kernel's CSPRNG. Lives for the whole process; thread-safe. Aborts the
// process if the kernel refuses (it does not, once booted, for requests this small), since an
// id made of anything weaker would be a silent security bug.
RandomSource& SystemRandom();

// 128 random bits as 32 lowercase hex digits.
std::string RandomHexId128(RandomSource& random);

}  // namespace harrier::openai
