#include "core/url_path.h"

#include <charconv>

namespace harrier {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Status PercentDecode(std::string_view segment, std::string* out) {
  if (segment.find('%') == std::string_view::npos) {
    out->assign(segment);
    return {};
  }
  out->clear();
  out->reserve(segment.size());
  for (size_t i = 0; i < segment.size(); ++i) {
    if (segment[i] != '%') {
      out->push_back(segment[i]);
      continue;
    }
    if (segment.size() - i < 3 || HexValue(segment[i + 1]) < 0 || HexValue(segment[i + 2]) < 0) {
      return InvalidArgument("malformed percent-encoding in URL path segment '" +
                             std::string(segment) + "'");
    }
    out->push_back(static_cast<char>(HexValue(segment[i + 1]) * 16 + HexValue(segment[i + 2])));
    i += 2;
  }
  return {};
}

StatusOr<int64_t> ParseUrlVersion(std::string_view segment) {
  std::string digits;  // inline: a version's digits fit a std::string's own room
  RETURN_IF_ERROR(PercentDecode(segment, &digits));
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || digits[0] == '-' || ec != std::errc() ||
      end != digits.data() + digits.size() || v < 1) {
    return InvalidArgument("model version '" + std::string(segment) +
                           "' in the URL must be a positive integer");
  }
  return v;
}

}  // namespace harrier
