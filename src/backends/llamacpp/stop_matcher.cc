#include "backends/llamacpp/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace harrier {
namespace {

// The longest proper prefix of `stop` that `text` ends with.
size_t HeldForStop(std::string_view text, std::string_view stop) {
  for (size_t k = std::min(text.size(), stop.size() - 1); k > 0; --k) {
    if (text.ends_with(stop.substr(0, k))) return k;
  }
  return 0;
}

}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stop_strings)
    : stop_strings_(std::move(stop_strings)) {}

std::string StopMatcher::Append(std::string_view bytes) {
  if (stopped_) return {};
  // Matched against the text as the client reads it, bytes that form no character already
  // U+FFFD: a stop string that holds U+FFFD stops there too (probe 45 F2).
  held_ += utf8_.Push(bytes);
  return Release(/*all=*/false);
}

std::string StopMatcher::Flush() {
  if (stopped_) return {};
  held_ += utf8_.Flush();
  return Release(/*all=*/true);
}

std::string StopMatcher::Release(bool all) {
  // A stop string can only start in held_: released text never ends with the start of one.
  size_t first_stop = std::string::npos;
  for (const std::string& stop : stop_strings_) {
    first_stop = std::min(first_stop, held_.find(stop));
  }
  if (first_stop != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first_stop);
    held_.clear();
    return out;
  }
  size_t keep = 0;
  if (!all) {
    for (const std::string& stop : stop_strings_) keep = std::max(keep, HeldForStop(held_, stop));
  }
  // held_ holds whole characters, and a stop string's prefix that it ends with starts at one
  // (its first byte starts a character): what is released is whole characters too.
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

}  // namespace harrier
