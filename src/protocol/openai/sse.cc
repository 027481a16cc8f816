#include "protocol/openai/sse.h"

#include <charconv>

namespace harrier::openai {

void AppendSseEvent(std::string* out, std::string_view data, std::optional<uint64_t> id) {
  if (id) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof(buf), *id);
    out->append("id: ");
    out->append(buf, r.ptr);
    out->push_back('\n');
  }
  size_t start = 0;
  while (true) {
    const size_t end = data.find_first_of("\r\n", start);
    out->append("data: ");
    if (end == std::string_view::npos) {
      out->append(data.substr(start));
      out->push_back('\n');
      break;
    }
    out->append(data.substr(start, end - start));
    out->push_back('\n');
    start = end + 1;
    if (data[end] == '\r' && start < data.size() && data[start] == '\n') ++start;
  }
  out->push_back('\n');
}

StatusOr<uint64_t> ParseLastEventId(std::string_view value) {
  const size_t first = value.find_first_not_of(" \t");
  const size_t last = value.find_last_not_of(" \t");
  const std::string_view digits =
      first == std::string_view::npos ? std::string_view() : value.substr(first, last - first + 1);
  uint64_t id = 0;
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  // from_chars takes no '+' and, for an unsigned type, no '-'; it must also consume everything.
  if (digits.empty() || r.ec != std::errc() || r.ptr != digits.data() + digits.size()) {
    return InvalidArgument("Last-Event-ID must be a decimal event id, got '" +
                           std::string(value.substr(0, 64)) + "'");
  }
  return id;
}

}  // namespace harrier::openai
