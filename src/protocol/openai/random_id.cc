#include "protocol/openai/random_id.h"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace harrier::openai {
namespace {

class KernelRandom : public RandomSource {
 public:
  void Fill(std::span<std::byte> out) override {
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = getrandom(out.data() + done, out.size() - done, 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        std::perror("harrier: getrandom");
        std::abort();
      }
      done += static_cast<size_t>(n);
    }
  }
};

}  // namespace

RandomSource& SystemRandom() {
  static KernelRandom random;
  return random;
}

std::string RandomHexId128(RandomSource& random) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::array<std::byte, 16> bytes;
  random.Fill(bytes);
  std::string id(32, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto b = static_cast<unsigned>(bytes[i]);
    id[2 * i] = kHex[b >> 4];
    id[2 * i + 1] = kHex[b & 0xF];
  }
  return id;
}

}  // namespace harrier::openai
