// AuthHandler: access control in front of a front end's handler chain (REST: Dashboard ->
// OpenAI -> KServe; gRPC: GrpcHttpHandler; the metrics port with --metrics-require-key). It
// wraps `next` as the chain's other handlers do, and decides from the request's head alone —
// in Precheck, before the transport reads the body — so a refused upload is never stored or
// decoded (docs/security.md, "API keys and scopes").
//
// For each request, in order:
//   0. with Options::guard_browsers (REST), a browser's state-changing request from another
//      site's page, or a Host that --allowed-hosts does not allow (browser_origin.h) -> 403
//      "cross_site", whatever key it carries;
//   1. the route's access (access_scope.h: RouteAccessForHttp or RouteAccessForGrpc);
//   2. with API keys (Options::keys), for a route that is not open (health): the key, from
//      `Authorization: Bearer KEY` or `X-API-Key: KEY` (gRPC: the `authorization` metadata):
//      none -> 401 "missing_key"; not a bearer token, empty, over 512 bytes or not visible
//      ASCII -> 401 "malformed_key"; no such key -> 401 "invalid_key"; 401s carry
//      `WWW-Authenticate: Bearer`; a key without the route's scope -> 403 "forbidden"; over the
//      key's own rate limit -> 429 with Retry-After (gRPC: RESOURCE_EXHAUSTED), "rate_limited",
//      checked after step 3;
//   3. a Triton restriction on the route's API group (restricted_api.h), open routes included:
//      the header must carry its value, else 403 / PERMISSION_DENIED, reason "restricted" (after
//      the key, so that a client without one learns only that it needs one);
//   4. let through: the request reaches `next` with HttpRequest::auth_key_id set to the key's
//      id, which the front ends write into access logs and traces.
// Refusals are answered in the front end's own form (next->TransportError: a grpc-status for
// gRPC; the OpenAI /v1 API's {"error": {"message", "type", "param", "code"}}, the reason as its
// code; else KServe's JSON {"error": ...}), with X-Request-Id, counted in AuthCounters by reason
// and per key, and written to the access log (with the key id when one was recognised).
//
// The key's rate-limit token is taken in Precheck, which both transports call for every request
// before Handle or OpenStream; Handle and OpenStream check the key and scope again (the cost of
// one SHA-256 of the key) so that they never serve a request Precheck did not see, and to learn
// the key id, which the head cannot carry across. With neither keys, restrictions nor the
// browser guard the composition root does not put an AuthHandler in front at all; with the
// guard alone, a request pays only a scan of its headers when its method is not GET or HEAD.
//
// Thread safety: every method may be called from any thread (the transport's I/O threads).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auth/access_scope.h"
#include "auth/api_key_store.h"
#include "auth/restricted_api.h"
#include "harrier/access_log.h"
#include "harrier/clock.h"
#include "harrier/http_message.h"

namespace harrier {
class TextExposition;
}  // namespace harrier

namespace harrier::auth {

// Why a request was refused (harrier_auth_refusals_total{reason}).
enum class RefusalReason : uint8_t {
  kMissingKey,
  kMalformedKey,
  kInvalidKey,
  kForbidden,
  kRateLimited,
  kRestricted,
  kCrossSite,
};
inline constexpr int kRefusalReasonCount = 7;
// "missing_key", "malformed_key", "invalid_key", "forbidden", "rate_limited", "restricted",
// "cross_site".
std::string_view RefusalReasonName(RefusalReason reason);

// Refusals by reason, shared by every AuthHandler of the process (REST, gRPC, metrics).
class AuthCounters {
 public:
  void Count(RefusalReason reason) {
    refusals_[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t refusals(RefusalReason reason) const {
    return refusals_[static_cast<size_t>(reason)].load(std::memory_order_relaxed);
  }

 private:
  std::array<std::atomic<uint64_t>, kRefusalReasonCount> refusals_{};
};

// harrier_auth_refusals_total{reason}, harrier_auth_requests_total{key,outcome} (when `keys`),
// harrier_auth_key_file_reloads_total{result} (when `keys`). docs/metrics.md.
void AppendAuthMetrics(const AuthCounters& counters, const ApiKeyStore* keys, TextExposition* out);

// The key a request presents, as AuthHandler reads it (step 3 above).
struct PresentedKey {
  enum class Kind { kNone, kMalformed, kKey } kind = Kind::kNone;
  std::string_view key;  // kKey: the key's bytes, pointing into the request's headers
};
PresentedKey ReadPresentedKey(const HttpRequest& head);

class AuthHandler final : public HttpHandler {
 public:
  enum class Routes { kHttp, kGrpc };  // which classification of routes applies

  struct Options {
    Routes routes = Routes::kHttp;
    // The keys; null: no API keys (only the restrictions apply). Not owned; outlives the handler.
    ApiKeyStore* keys = nullptr;
    std::vector<ApiRestriction> restrictions;
    // Required; shared, not owned.
    AuthCounters* counters = nullptr;
    // Refusals are written here; null: not logged. Not owned.
    AccessLog* access_log = nullptr;
    // For the keys' rate limits; default the steady clock. Not owned.
    const Clock* clock = &SteadyClock();
    // Step 0 (browser_origin.h), with the origins --allowed-origins lets through, and the host
    // names --allowed-hosts does (none: any).
    bool guard_browsers = false;
    std::vector<std::string> allowed_origins;
    std::vector<std::string> allowed_hosts;
  };

  // `next` is not owned and must outlive this handler.
  AuthHandler(HttpHandler* next, Options options);

  std::optional<HttpResponse> Precheck(const HttpRequest& head) override;
  void Handle(HttpRequest&& request, HttpResponder respond) override;
  bool ServesAsStream(const HttpRequest& head) const override;
  std::shared_ptr<HttpStreamHandler> OpenStream(const HttpRequest& head,
                                                std::shared_ptr<HttpStreamWriter> writer,
                                                HttpResponse* response_head) override;
  std::optional<HttpResponse> TransportError(int status, std::string_view message,
                                             const HttpRequest& request,
                                             std::string_view code) override;

 private:
  struct Decision {
    int status = 0;  // 0: let through; else 401, 403 or 429
    RefusalReason reason = RefusalReason::kMissingKey;
    std::string message;
    std::string key_id;  // the recognised key's id, empty when none
    int retry_after_s = 0;
  };

  // Steps 1-3 (and the rate limit); kTakeToken: charge the key's rate limit and count the outcome
  // per key (Precheck), or only check (Handle, OpenStream).
  enum class Charge { kTakeToken, kCheckOnly };
  class StreamAuthorizer;
  Decision Check(const HttpRequest& head, Charge charge) const;
  HttpResponse Refuse(const HttpRequest& head, const Decision& decision) const;

  HttpHandler* const next_;
  const Options options_;
};

}  // namespace harrier::auth
