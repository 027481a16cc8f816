#include "protocol/kserve/scheduling_fields.h"

#include <chrono>
#include <string>
#include <string_view>
#include <variant>

#include "core/http_text.h"

namespace harrier::kserve {

namespace {

constexpr std::string_view kTimeoutHeader = "x-request-timeout-us";
constexpr std::string_view kClientIdHeader = "x-client-id";

// A request parameter that must be an integer in [0, max]; `out` is left alone when absent.
Status UnsignedParameter(const Parameters& parameters, std::string_view name, uint64_t max,
                         uint64_t* out) {
  auto it = parameters.find(name);
  if (it == parameters.end()) return Status::Ok();
  const int64_t* value = std::get_if<int64_t>(&it->second);
  if (value == nullptr || *value < 0 || static_cast<uint64_t>(*value) > max) {
    return InvalidArgument("request: parameter '" + std::string(name) +
                           "' must be an integer from 0 to " + std::to_string(max));
  }
  *out = static_cast<uint64_t>(*value);
  return Status::Ok();
}

// Digits only (no sign, no exponent), at most kMaxRequestTimeoutUs.
bool ParseTimeoutUs(std::string_view v, uint64_t* out) {
  if (v.empty() || v.size() > 13) return false;
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  if (n > kMaxRequestTimeoutUs) return false;
  *out = n;
  return true;
}

}  // namespace

Status ApplySchedulingFields(const HttpRequest& http, InferenceRequest* request) {
  RETURN_IF_ERROR(UnsignedParameter(request->parameters, "priority",
                                    static_cast<uint64_t>(INT64_MAX), &request->priority));
  RETURN_IF_ERROR(UnsignedParameter(request->parameters, "timeout", kMaxRequestTimeoutUs,
                                    &request->timeout_us));

  bool client_id_seen = false;  // the first X-Client-Id counts, as HttpRequest::Header()
  for (const auto& [name, value] : http.headers) {
    if (name == kTimeoutHeader) {
      uint64_t us = 0;
      if (!ParseTimeoutUs(TrimOws(value), &us)) {
        return InvalidArgument("header X-Request-Timeout-Us must be a decimal integer from 0 to " +
                               std::to_string(kMaxRequestTimeoutUs) + " (microseconds)");
      }
      if (us > 0) {
        const auto deadline = request->received_at + std::chrono::microseconds(us);
        if (deadline < request->deadline) request->deadline = deadline;  // the earliest wins
      }
    } else if (name == kClientIdHeader) {
      if (value.size() > kMaxClientIdBytes) {
        return InvalidArgument("header X-Client-Id is longer than " +
                               std::to_string(kMaxClientIdBytes) + " bytes");
      }
      if (!client_id_seen) request->client_id = value;
      client_id_seen = true;
    }
  }
  return Status::Ok();
}

}  // namespace harrier::kserve
