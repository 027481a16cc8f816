// Cross-site requests from browsers: a page on another site (any web page the operator opens
// while the server is reachable from the browser, on localhost or the LAN) can make the
// browser send "simple" requests — a form post, a fetch in no-cors mode — that need no CORS
// preflight and carry no API key. Probe 61 replaced a served model with one form post and
// unloaded models, changed log levels and unregistered shared-memory regions with script
// requests. Browsers say where such a request comes from (`Origin`, which they send with every
// POST, PUT and DELETE; `Sec-Fetch-Site`), and Harrier serves no page that changes state, so a
// state-changing request that a browser marks as another site's is refused, as Ollama and
// Jupyter refuse them. Clients that are not browsers (curl, SDKs, Triton's clients) send
// neither header and are not affected.
//
// Pure and table-tested (browser_origin_test.cc).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "harrier/http_message.h"
#include "harrier/status.h"

namespace harrier::auth {

// Why `head` is refused as a browser's cross-site request, or empty when it is not one:
//   - GET, HEAD and OPTIONS pass (reads: a browser does not let another site read the answer,
//     since the server sends no Access-Control-Allow-Origin; OPTIONS is answered 405);
//   - any other method with an `Origin` that is not in `allowed_origins` ("*" allows every
//     origin; "null", a sandboxed page's, only by "*"), or `Origin` given twice;
//   - any other method without `Origin` but with `Sec-Fetch-Site: cross-site` or `same-site`.
// Origins compare exactly (browsers send them lower-case, as scheme://host[:port]).
std::string CrossSiteRefusal(const HttpRequest& head,
                             const std::vector<std::string>& allowed_origins);

// The flags' lists as the checks compare them, or kInvalidArgument naming the flag and the
// entry (probe 65: `HTTP://x`, `http://x/` or a space after a comma started the server and
// then never matched). An origin is `*` or `http[s]://host[:port]` (lower-cased here, as
// browsers send it; no path, no trailing slash); a host name is `*` or a name without port,
// path or spaces (lower-cased, a trailing dot dropped).
StatusOr<std::vector<std::string>> NormalizedOrigins(const std::vector<std::string>& origins);
StatusOr<std::vector<std::string>> NormalizedHosts(const std::vector<std::string>& hosts);

// Why `head` is refused for its Host, or empty: with `allowed_hosts` given (--allowed-hosts),
// the Host's name must be an IP address (any form inet_aton reads, `127.1` included, or a
// bracketed IPv6 literal), `localhost`, or one of them (case-insensitive, a trailing dot
// ignored; "*": any). A page whose own name an attacker points at this server
// (DNS rebinding) is the same origin as the server to the browser, and reads every GET answer;
// its requests carry that name as Host (probe 61). A request without Host passes. Without
// `allowed_hosts`, every Host passes.
std::string HostRefusal(const HttpRequest& head, const std::vector<std::string>& allowed_hosts);

}  // namespace harrier::auth
