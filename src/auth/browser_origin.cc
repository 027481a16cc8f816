#include "auth/browser_origin.h"

#include <arpa/inet.h>

#include "core/http_text.h"

namespace harrier::auth {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// A host name or address as a Host field or an origin carries it: no space, '/', '?', '#',
// '@' or '\\'.
bool PlainHost(std::string_view host) {
  return !host.empty() && host.find_first_of(" \t/?#@\\,") == std::string_view::npos;
}

// A host as a browser serializes it in an origin: an IPv4 address in dotted decimal (`127.1`
// and `0x7f.0.0.1` are 127.0.0.1), an IPv6 address bracketed and compressed, a name in ASCII
// letters, digits, '-', '_' and '.' (an international name in its punycode form); empty when it
// is none of these (probe 72: `[0:0:0:0:0:0:0:1]`, `127.1` and `[zz]` were kept as written).
std::string CanonicalHost(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    in6_addr v6{};
    char text[INET6_ADDRSTRLEN];
    const std::string inside(host.substr(1, host.size() - 2));
    if (inet_pton(AF_INET6, inside.c_str(), &v6) != 1 ||
        inet_ntop(AF_INET6, &v6, text, sizeof(text)) == nullptr)
      return {};
    return "[" + std::string(text) + "]";
  }
  for (char c : host) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    if (!ok) return {};
  }
  in_addr v4{};
  if (inet_aton(std::string(host).c_str(), &v4) != 0) return inet_ntoa(v4);
  return std::string(host);
}

// `scheme://host[:port]` as a browser serializes it (RFC 6454 §6.1): lower case, the host as
// CanonicalHost writes it, the port in decimal without leading zeros and left out when it is
// empty or the scheme's default; empty when `origin` is not one (another scheme, no host, a
// port that is not 1..65535).
std::string CanonicalOrigin(std::string_view given) {
  const std::string origin = Lower(given);
  const std::size_t scheme_end = origin.find("://");
  if (scheme_end == std::string::npos) return {};
  const std::string_view scheme = std::string_view(origin).substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return {};
  const std::string_view authority = std::string_view(origin).substr(scheme_end + 3);
  if (!PlainHost(authority)) return {};
  // An IPv6 literal is bracketed; any other host has no ':'.
  const std::size_t host_end =
      authority.front() == '[' ? authority.find(']') + 1 : authority.find(':');
  if (host_end == 0) return {};  // '[' without ']'
  const std::string host = CanonicalHost(authority.substr(0, host_end));
  if (host.empty()) return {};
  if (host_end >= authority.size()) return std::string(scheme) + "://" + host;
  if (authority[host_end] != ':') return {};
  std::string_view digits = authority.substr(host_end + 1);
  // An empty port is no port, as the URL standard parses it.
  if (digits.empty()) return std::string(scheme) + "://" + host;
  if (digits.find_first_not_of("0123456789") != std::string_view::npos) return {};
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  if (digits.size() > 5) return {};
  const int port = std::stoi(std::string(digits));
  if (port < 1 || port > 65535) return {};
  if (port == (scheme == "http" ? 80 : 443)) return std::string(scheme) + "://" + host;
  return std::string(scheme) + "://" + host + ":" + std::to_string(port);
}

}  // namespace

std::string CrossSiteRefusal(const HttpRequest& head,
                             const std::vector<std::string>& allowed_origins) {
  // On every request: views compare their sizes first, so most comparisons end there.
  const std::string_view method = head.method;
  if (method == "GET" || method == "HEAD" || method == "OPTIONS") return {};
  const std::string* origin = nullptr;
  const std::string* fetch_site = nullptr;
  int origins = 0;
  for (const auto& [name, value] : head.headers) {
    const std::string_view field = name;
    if (field == "origin") {
      origin = &value;
      ++origins;
    } else if (field == "sec-fetch-site") {
      fetch_site = &value;
    }
  }
  if (origins > 1) return "the request carries Origin more than once";
  if (origin != nullptr) {
    for (const std::string& allowed : allowed_origins)
      if (allowed == "*" || allowed == *origin) return {};
    // As a browser would have written it (a client copying the configured URL may send the
    // default port): only on this path, which browsers' cross-site requests take.
    if (const std::string canonical = CanonicalOrigin(*origin);
        !canonical.empty() && canonical != *origin) {
      for (const std::string& allowed : allowed_origins)
        if (allowed == canonical) return {};
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

StatusOr<std::vector<std::string>> NormalizedOrigins(const std::vector<std::string>& origins) {
  std::vector<std::string> out;
  for (const std::string& given : origins) {
    if (given == "*") {
      out.push_back(given);
      continue;
    }
    // As browsers send it: a listed `https://x:443` or `https://x:0443` is `https://x`, or it
    // would never match (probe 69).
    std::string origin = CanonicalOrigin(given);
    if (origin.empty()) {
      return InvalidArgument("--allowed-origins: '" + given +
                             "' is not an origin: write '*' or scheme://host[:port] (http or "
                             "https; a host name in ASCII, an international one in its punycode "
                             "form 'xn--...', or an IP address; a port from 1 to 65535; no path, "
                             "no trailing slash, no spaces)");
    }
    out.push_back(std::move(origin));
  }
  return out;
}

StatusOr<std::vector<std::string>> NormalizedHosts(const std::vector<std::string>& hosts) {
  std::vector<std::string> out;
  for (const std::string& given : hosts) {
    std::string host = Lower(given);
    if (!host.empty() && host.back() == '.') host.pop_back();
    if (host != "*" && (!PlainHost(host) || host.find(':') != std::string::npos)) {
      return InvalidArgument("--allowed-hosts: '" + given +
                             "' is not a host name: write '*' or a name without a port, path "
                             "or spaces");
    }
    out.push_back(host);
  }
  return out;
}

std::string HostRefusal(const HttpRequest& head, const std::vector<std::string>& allowed_hosts) {
  if (allowed_hosts.empty() || !head.HasHeader("host")) return {};
  const std::string_view host = head.Header("host");
  if (host.starts_with('[')) return {};  // an IPv6 literal
  std::string_view name = host.substr(0, host.rfind(':'));
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  in_addr v4{};
  if (inet_aton(std::string(name).c_str(), &v4) != 0 || IEquals(name, "localhost")) {
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
