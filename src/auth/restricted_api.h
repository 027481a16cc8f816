// Triton's --http-restricted-api and --grpc-restricted-protocol: "API[,API...]:HEADER=VALUE",
// e.g. "model-repository,logging:admin-key=s3cret". A request to a route in one of the listed
// API groups (access_scope.h's ApiGroup, Triton's names) must carry the header HEADER with
// exactly VALUE; AuthHandler refuses it otherwise (403 / PERMISSION_DENIED), in the same check
// as the API keys. The flag may be given several times, each group at most once overall.
//
// Thread safety: values and pure functions; any thread.
#pragma once

#include <bitset>
#include <string>
#include <string_view>
#include <vector>

#include "auth/access_scope.h"
#include "harrier/status.h"

namespace harrier::auth {

// What Triton prepends to a --grpc-restricted-protocol key to name the gRPC metadata entry a
// client must send: "inference:infer-key=v" needs "triton-grpc-protocol-infer-key: v".
inline constexpr std::string_view kGrpcRestrictedHeaderPrefix = "triton-grpc-protocol-";

struct ApiRestriction {
  std::bitset<kApiGroupCount> groups;
  std::string header;  // lower-cased, as HttpRequest holds header names
  std::string value;   // exact, case-sensitive
};

// The restrictions of every flag value, in order. kInvalidArgument, naming the value, for: no
// ':' or no '=', an empty group list, header or value, an unknown group, a group named twice
// (in one value or across them).
StatusOr<std::vector<ApiRestriction>> ParseApiRestrictions(const std::vector<std::string>& values,
                                                           std::string_view flag);

}  // namespace harrier::auth
