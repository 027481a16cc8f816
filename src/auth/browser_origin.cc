#include "auth/browser_origin.h"

#include <arpa/inet.h>

#include <algorithm>

#include "core/http_text.h"

namespace harrier::auth {

std::string CrossSiteRefusal(const HttpRequest& head,
                             const std::vector<std::string>& allowed_origins) {
  if (head.method == "GET" || head.method == "HEAD" || head.method == "OPTIONS") return {};
  const std::string* origin = nullptr;
  const std::string* fetch_site = nullptr;
  int origins = 0;
  for (const auto& [name, value] : head.headers) {
    if (name == "origin") {
      origin = &value;
      ++origins;
    } else if (name == "sec-fetch-site") {
      fetch_site = &value;
    }
  }
  if (origins > 1) return "the request carries Origin more than once";
  const bool any =
      std::find(allowed_origins.begin(), allowed_origins.end(), "*") != allowed_origins.end();
  if (origin != nullptr) {
    if (any || std::find(allowed_origins.begin(), allowed_origins.end(), *origin) !=
                   allowed_origins.end()) {
      return {};
    }
    return "a browser request from the page at origin '" + origin->substr(0, 256) +
           "' may not change this server's state (a cross-site request); allow that origin with "
           "--allowed-origins";
  }
  if (fetch_site != nullptr && (*fetch_site == "cross-site" || *fetch_site == "same-site")) {
    return "a browser request from another site (Sec-Fetch-Site: " + *fetch_site +
           ") may not change this server's state";
  }
  return {};
}

std::string HostRefusal(const HttpRequest& head, const std::vector<std::string>& allowed_hosts) {
  if (allowed_hosts.empty() || !head.HasHeader("host")) return {};
  const std::string_view host = head.Header("host");
  if (host.starts_with('[')) return {};  // an IPv6 literal
  std::string_view name = host.substr(0, host.rfind(':'));
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  in_addr v4{};
  if (inet_pton(AF_INET, std::string(name).c_str(), &v4) == 1 || IEquals(name, "localhost")) {
    return {};
  }
  for (const std::string& allowed : allowed_hosts) {
    std::string_view a = allowed;
    if (!a.empty() && a.back() == '.') a.remove_suffix(1);
    if (a == "*" || IEquals(a, name)) return {};
  }
  return "this server does not answer to the host name '" + std::string(name.substr(0, 256)) +
         "' (--allowed-hosts lists the names it does, besides IP addresses and localhost)";
}

}  // namespace harrier::auth
