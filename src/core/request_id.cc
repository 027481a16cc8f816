#include "core/request_id.h"

#include <random>

namespace harrier {

bool IsAcceptableRequestId(std::string_view id) {
  if (id.empty() || id.size() > kMaxRequestIdBytes) return false;
  for (char c : id) {
    if (c < 0x21 || c > 0x7E) return false;
  }
  return true;
}

std::string RequestIdGenerator::Next() {
  constexpr char kHex[] = "0123456789abcdef";
  const uint32_t n = counter_.fetch_add(1, std::memory_order_relaxed);
  std::string id(15, '-');
  for (int i = 0; i < 6; ++i) id[i] = kHex[(prefix_ >> (20 - 4 * i)) & 0xF];
  for (int i = 0; i < 8; ++i) id[7 + i] = kHex[(n >> (28 - 4 * i)) & 0xF];
  return id;
}

RequestIdGenerator& RequestIdGenerator::Process() {
  static RequestIdGenerator generator(std::random_device{}());
  return generator;
}

std::string ResolveRequestId(std::string_view sent, RequestIdGenerator& generator) {
  if (IsAcceptableRequestId(sent)) return std::string(sent);
  return generator.Next();
}

}  // namespace harrier
