#include "auth/restricted_api.h"

#include <cctype>

namespace harrier::auth {

StatusOr<std::vector<ApiRestriction>> ParseApiRestrictions(const std::vector<std::string>& values,
                                                           std::string_view flag) {
  std::vector<ApiRestriction> out;
  std::bitset<kApiGroupCount> all;
  // Triton's words, which its QA tests match: "protocol" for the gRPC flag, "api" for REST.
  const std::string noun = flag.find("grpc") != std::string_view::npos ? "protocol" : "api";
  for (const std::string& value : values) {
    auto bad = [&](std::string_view why) {
      return InvalidArgument(std::string(flag) + " '" + value + "': " + std::string(why) +
                             " (expected API[,API...]:HEADER=VALUE)");
    };
    const size_t colon = value.find(':');
    if (colon == std::string::npos) return bad("no ':'");
    const std::string_view list = std::string_view(value).substr(0, colon);
    const std::string_view pair = std::string_view(value).substr(colon + 1);
    const size_t equals = pair.find('=');
    if (equals == std::string_view::npos) return bad("no '=' after ':'");
    ApiRestriction r;
    for (char c : pair.substr(0, equals)) {
      r.header.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
    r.value = std::string(pair.substr(equals + 1));
    if (r.header.empty()) return bad("empty header name");
    if (r.value.empty()) return bad("empty header value");
    if (list.empty()) return bad("no API group");
    for (size_t start = 0; start <= list.size();) {
      const size_t comma = std::min(list.find(',', start), list.size());
      const std::string_view name = list.substr(start, comma - start);
      const std::optional<ApiGroup> group = ParseTritonApiGroup(name);
      if (!group) {
        return bad("unknown restricted " + noun + " '" + std::string(name) +
                   "' (known: health, metadata, inference, shared-memory, model-config, "
                   "model-repository, statistics, trace, logging)");
      }
      const size_t bit = static_cast<size_t>(*group);
      if (all.test(bit)) {
        return bad(noun + " '" + std::string(name) +
                   "' can not be specified in multiple config groups");
      }
      all.set(bit);
      r.groups.set(bit);
      start = comma + 1;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace harrier::auth
