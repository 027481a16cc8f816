// The API key file (--api-key-file): which keys exist, what each may do, and how fast it may go.
//
//   {"keys": [{"id": "ci", "sha256": "<64 hex digits>", "scopes": ["inference", "metadata"],
//              "rate_limit": "50:100"}]}
//
// A key is stored only as the SHA-256 of its bytes, so the file can be read by whoever deploys
// it without revealing a key (`printf %s "$KEY" | sha256sum`). `id` names the key in logs,
// traces and metrics (never the key itself): 1..64 of [A-Za-z0-9._-], unique in the file.
// `scopes`: a non-empty list of access_scope.h's names, each at most once. `rate_limit`
// (optional): "RPS[:BURST]" as --rate-limit-per-client takes it (scheduler/token_bucket.h), a
// token bucket for everything the key does; "off" or absent: none. Two keys with the same
// digest are refused (one key must mean one id). Unknown fields are refused, so that a typo
// ("scope") does not silently grant nothing or everything.
//
// Thread safety: pure functions; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "auth/access_scope.h"
#include "harrier/status.h"
#include "scheduler/token_bucket.h"
#include "server/sha256.h"

namespace harrier::auth {

struct ApiKeyEntry {
  std::string id;
  Sha256Digest sha256{};
  ScopeSet scopes = 0;
  RateLimit rate_limit;  // !enabled(): no limit of its own
};

// The keys of a key file's text, in file order. kInvalidArgument, naming the key (by index and
// id) and the field, for: text that is not JSON, no "keys" array, a key that is not an object,
// a missing or malformed id, a duplicate id, a "sha256" that is not 64 hex digits, a duplicate
// digest, a missing, empty or unknown scope, a malformed rate_limit, an unknown field. An empty
// "keys" array is valid: every keyed route is refused.
StatusOr<std::vector<ApiKeyEntry>> ParseApiKeyFile(std::string_view text);

}  // namespace harrier::auth
