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
  held_.append(bytes);
  // A stop string can only start in held_: released text never ends with the start of one.
  size_t first_stop = std::string::npos;
  for (const std::string& stop : stop_strings_) {
    first_stop = std::min(first_stop, held_.find(stop));
  }
  if (first_stop != std::string::npos) {
    stopped_ = true;
    std::string out = utf8_.Push(std::string_view(held_).substr(0, first_stop));
    out += utf8_.Flush();
    held_.clear();
    return out;
  }
  size_t keep = 0;
  for (const std::string& stop : stop_strings_) keep = std::max(keep, HeldForStop(held_, stop));
  std::string out = utf8_.Push(std::string_view(held_).substr(0, held_.size() - keep));
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::Flush() {
  std::string out = utf8_.Push(held_);
  out += utf8_.Flush();
  held_.clear();
  return out;
}

}  // namespace harrier
