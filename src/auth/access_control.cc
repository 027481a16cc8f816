#include "auth/access_control.h"

#include <utility>

#include "auth/browser_origin.h"

namespace harrier::auth {

Status AccessControl::CheckFlags(const Options& options) {
  AccessControl scratch;
  RETURN_IF_ERROR(scratch.TakeFlags(options));
  // The key file too, before any model loads (read again when the store starts).
  if (!options.api_key_file.empty()) RETURN_IF_ERROR(ReadApiKeyFile(options.api_key_file).status());
  return Status::Ok();
}

Status AccessControl::TakeFlags(const Options& options) {
  options_ = options;
  ASSIGN_OR_RETURN(options_.allowed_origins, NormalizedOrigins(options.allowed_origins));
  ASSIGN_OR_RETURN(options_.allowed_hosts, NormalizedHosts(options.allowed_hosts));
  ASSIGN_OR_RETURN(http_restrictions_,
                   ParseApiRestrictions(options.http_restricted_api, "--http-restricted-api"));
  ASSIGN_OR_RETURN(grpc_restrictions_, ParseApiRestrictions(options.grpc_restricted_protocol,
                                                            "--grpc-restricted-protocol"));
  // Triton's gRPC front end checks the header "triton-grpc-protocol-<key>", not <key> itself
  // (gRPC metadata names are lower case; ParseApiRestrictions lower-cased the key already).
  for (ApiRestriction& r : grpc_restrictions_)
    r.header = std::string(kGrpcRestrictedHeaderPrefix) + r.header;
  return Status::Ok();
}

StatusOr<std::unique_ptr<AccessControl>> AccessControl::Create(const Options& options) {
  std::unique_ptr<AccessControl> ac(new AccessControl());
  RETURN_IF_ERROR(ac->TakeFlags(options));
  if (!options.api_key_file.empty()) {
    ApiKeyStore::Options store;
    store.path = options.api_key_file;
    auto keys = ApiKeyStore::Create(store);
    if (!keys.ok()) return keys.status();
    ac->keys_ = std::move(keys).value();
  }
  return ac;
}

std::unique_ptr<HttpHandler> AccessControl::Wrap(HttpHandler* next, AuthHandler::Routes routes,
                                                 const std::vector<ApiRestriction>& restrictions,
                                                 bool use_keys, bool guard_browsers) {
  if (restrictions.empty() && !(use_keys && keys_) && !guard_browsers) return nullptr;
  AuthHandler::Options o;
  o.guard_browsers = guard_browsers;
  o.allowed_origins = options_.allowed_origins;
  o.allowed_hosts = options_.allowed_hosts;
  o.routes = routes;
  o.keys = use_keys ? keys_.get() : nullptr;
  o.restrictions = restrictions;
  o.counters = &counters_;
  o.access_log = options_.access_log;
  return std::make_unique<AuthHandler>(next, std::move(o));
}

std::unique_ptr<HttpHandler> AccessControl::WrapRest(HttpHandler* next) {
  return Wrap(next, AuthHandler::Routes::kHttp, http_restrictions_, /*use_keys=*/true,
              /*guard_browsers=*/true);
}

std::unique_ptr<HttpHandler> AccessControl::WrapGrpc(HttpHandler* next) {
  // gRPC needs Content-Type application/grpc, which no page can send without a preflight.
  return Wrap(next, AuthHandler::Routes::kGrpc, grpc_restrictions_, /*use_keys=*/true,
              /*guard_browsers=*/false);
}

std::unique_ptr<HttpHandler> AccessControl::WrapMetrics(HttpHandler* next) {
  // GET /metrics only, so of the browser guard only --allowed-hosts applies (probe 65: a
  // rebinding page read the metrics port).
  return Wrap(next, AuthHandler::Routes::kHttp, {}, options_.metrics_require_key,
              /*guard_browsers=*/true);
}

void AccessControl::AppendMetrics(TextExposition* out) const {
  AppendAuthMetrics(counters_, keys_.get(), out);
}

}  // namespace harrier::auth
