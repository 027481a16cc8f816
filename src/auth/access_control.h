// AccessControl: the process's access control as the composition root assembles it from the
// flags — the API keys (--api-key-file, re-read as the file changes), Triton's restrictions
// (--http-restricted-api, --grpc-restricted-protocol), the shared refusal counters — and the
// AuthHandler it puts in front of each port's handler.
//
// Thread safety: Create and the Wrap* methods from the composition root; the handlers it makes
// and AppendMetrics from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "auth/api_key_store.h"
#include "auth/auth_handler.h"
#include "auth/restricted_api.h"
#include "harrier/status.h"

namespace harrier::auth {

class AccessControl {
 public:
  struct Options {
    std::string api_key_file;                      // "": no API keys
    std::vector<std::string> http_restricted_api;  // Triton's flag values, as given
    std::vector<std::string> grpc_restricted_protocol;
    bool metrics_require_key = false;  // REQUIRES api_key_file
    // REST refuses browsers' cross-site requests that change state (browser_origin.h) unless
    // their origin is listed here ("*": every origin; --allowed-origins).
    std::vector<std::string> allowed_origins;
    // REST answers only these Host names, besides IP addresses and localhost (--allowed-hosts;
    // empty: any; DNS rebinding).
    std::vector<std::string> allowed_hosts;
    AccessLog* access_log = nullptr;   // refusals; null: not logged
  };

  // kInvalidArgument for a restriction that does not parse or a key file that does not (the
  // message says where), kNotFound for a key file that cannot be read.
  static StatusOr<std::unique_ptr<AccessControl>> Create(const Options& options);
  // Create's checks (the flags' values, and the key file read and parsed once): the start
  // makes them before the models load, so that a typo in a list or a bad key file costs no
  // load (Create makes them again).
  static Status CheckFlags(const Options& options);

  // The handler to serve in place of `next` (REST's chain, gRPC's handler, the metrics
  // handler), or null when nothing applies to that port: then `next` is served as before.
  std::unique_ptr<HttpHandler> WrapRest(HttpHandler* next);
  std::unique_ptr<HttpHandler> WrapGrpc(HttpHandler* next);
  std::unique_ptr<HttpHandler> WrapMetrics(HttpHandler* next);

  // The auth metric families (AppendAuthMetrics): the refusals always (REST's browser guard is
  // always on), the keys' families with keys.
  void AppendMetrics(TextExposition* out) const;

  // Null without --api-key-file.
  const ApiKeyStore* keys() const { return keys_.get(); }

 private:
  AccessControl() = default;
  Status TakeFlags(const Options& options);  // options_ and the restrictions, parsed
  std::unique_ptr<HttpHandler> Wrap(HttpHandler* next, AuthHandler::Routes routes,
                                    const std::vector<ApiRestriction>& restrictions, bool use_keys,
                                    bool guard_browsers);

  Options options_;
  std::unique_ptr<ApiKeyStore> keys_;
  std::vector<ApiRestriction> http_restrictions_;
  std::vector<ApiRestriction> grpc_restrictions_;
  AuthCounters counters_;
};

}  // namespace harrier::auth
