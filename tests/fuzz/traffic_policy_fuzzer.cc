// libFuzzer target: the traffic policy document as PUT /v2/models/{m}/traffic and
// <model>/traffic.json carry it (routing/traffic_policy.h): ParseTrafficPolicy, then, for a
// document it accepts, TrafficPolicyToJson, ValidateAgainstVersions and a TrafficController
// routing a few requests with it.
//
// Findings besides the sanitizers': a parsed policy that does not read back as itself
// (ParseTrafficPolicy(TrafficPolicyToJson(p)) == p, as traffic_policy.h promises), or a policy
// validated against its own versions that TrafficController refuses, or that routes to a
// version it does not name.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "routing/traffic_controller.h"
#include "routing/traffic_policy.h"

namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "traffic_policy_fuzzer: %s\n", what.c_str());
  std::abort();
}

}  // namespace

// Quiet: every accepted policy would log a line.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::warn);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view doc(reinterpret_cast<const char*>(data), size);
  auto policy = harrier::ParseTrafficPolicy(doc);
  if (!policy.ok()) return 0;
  const std::string json = harrier::TrafficPolicyToJson(*policy);
  auto again = harrier::ParseTrafficPolicy(json);
  if (!again.ok()) Fail("its own JSON does not parse: " + json + ": " + again.status().ToString());
  if (!(*again == *policy)) Fail("does not read back as itself: " + json);

  // Every version the policy names, as if each served.
  std::vector<int64_t> versions;
  for (const auto& [v, w] : policy->weights) versions.push_back(v);
  if (policy->shadow) versions.push_back(policy->shadow->version);
  if (policy->rollout) versions.push_back(policy->rollout->candidate);
  std::sort(versions.begin(), versions.end());
  versions.erase(std::unique(versions.begin(), versions.end()), versions.end());
  if (!harrier::ValidateAgainstVersions(*policy, versions).ok()) return 0;
  harrier::TrafficController controller("m");
  if (harrier::Status s = controller.SetPolicy(*policy, versions); !s.ok())
    Fail("a policy valid for its versions was refused: " + s.ToString());
  const harrier::TrafficController::Headers headers = {{policy->sticky_header, "client"}};
  for (int i = 0; i < 8; ++i) {
    auto route =
        controller.Route(std::nullopt, i % 2 ? headers : harrier::TrafficController::Headers{});
    if (!route.ok()) continue;  // every version out of rotation is allowed
    if (!std::binary_search(versions.begin(), versions.end(), route->version))
      Fail("routed to version " + std::to_string(route->version) + ", which it does not name");
    harrier::RequestOutcome outcome;
    outcome.latency = std::chrono::microseconds(100 * (i + 1));
    outcome.server_failure = i % 3 == 0;
    outcome.routed_by_split = !route->forced;
    controller.Record(route->version, outcome);
  }
  (void)controller.StateJson();
  return 0;
}
