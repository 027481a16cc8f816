#include "routing/traffic_policy.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <utility>

#include "core/json_writer.h"

namespace harrier {
namespace {

using simdjson::dom::element;
using simdjson::dom::object;

Status Bad(std::string_view field, std::string_view problem) {
  std::string m = "traffic policy: ";
  m.append(field);
  m.append(": ");
  m.append(problem);
  return InvalidArgument(std::move(m));
}

std::string FormatNumber(double value) {
  std::string s;
  AppendJsonNumber(&s, value);
  return s;
}

// Calls `on_field(key, value)` for each member of the object at `path`, refusing keys that are
// not in `known` and keys that repeat (simdjson keeps both copies; the document means one).
template <typename OnField>
Status ForEachField(element value, std::string_view path,
                    std::initializer_list<std::string_view> known, OnField on_field) {
  object obj;
  if (value.get_object().get(obj)) return Bad(path, "must be an object");
  std::set<std::string_view> seen;
  for (auto [key, member] : obj) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string expected;
      for (std::string_view k : known) {
        if (!expected.empty()) expected += ", ";
        expected.append(k);
      }
      std::string field =
          path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
      return Bad(field, "unknown field (expected one of " + expected + ")");
    }
    std::string field =
        path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
    if (!seen.insert(key).second) return Bad(field, "appears twice");
    RETURN_IF_ERROR(on_field(key, member, field));
  }
  return Status::Ok();
}

Status GetInt(element value, const std::string& field, int64_t* out) {
  const simdjson::error_code err = value.get_int64().get(*out);
  if (err == simdjson::NUMBER_OUT_OF_RANGE) return Bad(field, "is too large");
  if (err) return Bad(field, "must be an integer");
  return Status::Ok();
}

Status GetNumber(element value, const std::string& field, double* out) {
  // get_double() also reads integers ("percent": 10).
  if (value.get_double().get(*out)) return Bad(field, "must be a number");
  return Status::Ok();
}

Status GetIntInRange(element value, const std::string& field, int64_t min, int64_t max,
                     int64_t* out) {
  RETURN_IF_ERROR(GetInt(value, field, out));
  if (*out < min || *out > max) {
    return Bad(field, std::to_string(*out) + " is out of range (" + std::to_string(min) + " to " +
                          std::to_string(max) + ")");
  }
  return Status::Ok();
}

// A version number as an object key: "1", "42"; not "01", "+1", "1.0" or " 1", so that a key
// reads back as the same text.
std::optional<int64_t> ParseVersionKey(std::string_view key) {
  if (key.empty() || key.front() < '1' || key.front() > '9') return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), v);
  if (ec != std::errc() || end != key.data() + key.size()) return std::nullopt;
  return v;
}

// A version as a number (2) or, as versions are written everywhere else in the KServe API
// ("model_version": "2", the weights' keys), as a string ("2").
Status GetVersion(element value, const std::string& field, int64_t* out) {
  std::string_view text;
  if (!value.get_string().get(text)) {
    std::optional<int64_t> v = ParseVersionKey(text);
    if (!v) return Bad(field, "a version is a positive integer, not '" + std::string(text) + "'");
    *out = *v;
    return Status::Ok();
  }
  RETURN_IF_ERROR(GetInt(value, field, out));
  if (*out < 1) return Bad(field, "a version is a positive integer, not " + std::to_string(*out));
  return Status::Ok();
}

// RFC 9110 tchar: the characters of a header name.
bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// Rollout percents have a resolution of 0.01 (one request in 10,000), which is what
// the rollout's integer weights can express (rollout.h).
bool HasAtMostTwoDecimals(double percent) {
  const double scaled = percent * 100;
  // A positive percent below 0.01 is not a multiple of 0.01 however close to 0 it is (probe
  // 78: 1e-9 passed, rounded to weight 0, and a guarded rollout waited for ever).
  if (percent > 0 && std::round(scaled) < 1) return false;
  return std::abs(scaled - std::round(scaled)) < 1e-6;
}

Status ParseWeights(element value, TrafficPolicy* policy) {
  object obj;
  if (value.get_object().get(obj)) {
    return Bad("weights", "must be an object of version -> weight, e.g. {\"1\": 90, \"2\": 10}");
  }
  for (auto [key, member] : obj) {
    const std::string field = "weights." + std::string(key);
    std::optional<int64_t> version = ParseVersionKey(key);
    if (!version) {
      return Bad(field, "a version key is a positive integer written as a string, e.g. \"1\"");
    }
    int64_t weight = 0;
    RETURN_IF_ERROR(GetIntInRange(member, field, 0, kMaxVersionWeight, &weight));
    if (!policy->weights.emplace(*version, weight).second) return Bad(field, "appears twice");
  }
  if (policy->weights.size() > kMaxWeightedVersions) {
    return Bad("weights", "more than " + std::to_string(kMaxWeightedVersions) + " versions");
  }
  if (std::none_of(policy->weights.begin(), policy->weights.end(),
                   [](const auto& vw) { return vw.second > 0; })) {
    return Bad("weights", "at least one version needs a weight above 0");
  }
  return Status::Ok();
}

Status ParseStickyHeader(element value, TrafficPolicy* policy) {
  std::string_view name;
  if (value.get_string().get(name)) return Bad("sticky_header", "must be a string");
  // A name no request could carry (requests' headers are bounded too) would be kept, and logged
  // with every change, for nothing.
  constexpr size_t kMaxName = 256;
  if (name.size() > kMaxName) {
    return Bad("sticky_header", "a header name of " + std::to_string(name.size()) +
                                    " bytes; at most " + std::to_string(kMaxName));
  }
  for (char c : name) {
    if (!IsTokenChar(c)) {
      return Bad("sticky_header", "'" + std::string(name) + "' is not a header name");
    }
  }
  std::string lower;
  for (char c : name) lower.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
  // That header names the version itself, whatever the split says (probe 38).
  if (lower == "x-harrier-model-version") {
    return Bad("sticky_header",
               "'" + std::string(name) + "' chooses the version itself; name another header");
  }
  policy->sticky_header = std::move(lower);
  return Status::Ok();
}

Status ParseShadow(element value, TrafficPolicy* policy) {
  ShadowConfig shadow;
  bool has_version = false, has_percent = false;
  RETURN_IF_ERROR(ForEachField(
      value, "shadow", {"version", "percent"},
      [&](std::string_view key, element member, const std::string& field) -> Status {
        if (key == "version") {
          has_version = true;
          return GetVersion(member, field, &shadow.version);
        }
        has_percent = true;
        RETURN_IF_ERROR(GetNumber(member, field, &shadow.percent));
        if (shadow.percent < 0 || shadow.percent > 100) {
          return Bad(field, FormatNumber(shadow.percent) + " is out of range (0 to 100)");
        }
        shadow.percent += 0.0;  // -0 is 0, and is echoed as 0 (probe 38)
        return Status::Ok();
      }));
  if (!has_version) return Bad("shadow.version", "is required");
  if (!has_percent) return Bad("shadow.percent", "is required");
  policy->shadow = shadow;
  return Status::Ok();
}

Status ParseSteps(element value, const std::string& field, std::vector<double>* steps) {
  simdjson::dom::array array;
  if (value.get_array().get(array)) return Bad(field, "must be an array of percents");
  size_t i = 0;
  for (element item : array) {
    const std::string item_field = field + "[" + std::to_string(i) + "]";
    double percent = 0;
    RETURN_IF_ERROR(GetNumber(item, item_field, &percent));
    if (percent <= 0 || percent > 100) {
      return Bad(item_field, FormatNumber(percent) + " is out of range (above 0, at most 100)");
    }
    if (!HasAtMostTwoDecimals(percent)) {
      return Bad(item_field, FormatNumber(percent) + " has more than two decimals");
    }
    if (!steps->empty() && std::llround(percent * 100) <= std::llround(steps->back() * 100)) {
      return Bad(item_field, FormatNumber(percent) + " is not above the step before it (" +
                                 FormatNumber(steps->back()) + "); steps must increase");
    }
    steps->push_back(percent);
    ++i;
  }
  if (steps->empty()) return Bad(field, "needs at least one step");
  if (steps->size() > kMaxRolloutSteps) {
    return Bad(field, "more than " + std::to_string(kMaxRolloutSteps) + " steps");
  }
  if (std::llround(steps->back() * 100) != 100 * 100) {
    return Bad(field, "the last step must be 100, not " + FormatNumber(steps->back()));
  }
  return Status::Ok();
}

Status ParseRollout(element value, TrafficPolicy* policy) {
  RolloutConfig rollout;
  bool has_candidate = false, has_steps = false, has_dwell = false;
  RETURN_IF_ERROR(ForEachField(
      value, "rollout", {"candidate", "steps", "dwell_seconds"},
      [&](std::string_view key, element member, const std::string& field) -> Status {
        if (key == "candidate") {
          has_candidate = true;
          return GetVersion(member, field, &rollout.candidate);
        }
        if (key == "steps") {
          has_steps = true;
          return ParseSteps(member, field, &rollout.steps_percent);
        }
        has_dwell = true;
        return GetIntInRange(member, field, 1, int64_t{7} * 24 * 3600, &rollout.dwell_seconds);
      }));
  if (!has_candidate) return Bad("rollout.candidate", "is required");
  if (!has_steps) return Bad("rollout.steps", "is required");
  if (!has_dwell) return Bad("rollout.dwell_seconds", "is required");
  policy->rollout = std::move(rollout);
  return Status::Ok();
}

Status ParseGuard(element value, TrafficPolicy* policy) {
  GuardConfig guard;
  bool has_window = false;
  RETURN_IF_ERROR(ForEachField(
      value, "guard",
      {"window_seconds", "min_requests", "max_p99_ratio", "max_error_rate", "max_p99_us"},
      [&](std::string_view key, element member, const std::string& field) -> Status {
        if (key == "window_seconds") {
          has_window = true;
          return GetIntInRange(member, field, 1, kMaxWindowSeconds, &guard.window_seconds);
        }
        if (key == "min_requests") {
          return GetIntInRange(member, field, 1, int64_t{1} << 40, &guard.min_requests);
        }
        if (key == "max_p99_us") {
          int64_t us = 0;
          RETURN_IF_ERROR(GetIntInRange(member, field, 1, int64_t{1} << 40, &us));
          guard.max_p99_us = us;
          return Status::Ok();
        }
        double number = 0;
        RETURN_IF_ERROR(GetNumber(member, field, &number));
        if (key == "max_p99_ratio") {
          if (!(number > 1)) return Bad(field, FormatNumber(number) + " must be above 1");
          guard.max_p99_ratio = number;
        } else {
          if (number < 0 || number > 1) {
            return Bad(field, FormatNumber(number) + " is out of range (0 to 1)");
          }
          guard.max_error_rate = number;
        }
        return Status::Ok();
      }));
  if (!has_window) return Bad("guard.window_seconds", "is required");
  if (!guard.max_p99_ratio && !guard.max_error_rate && !guard.max_p99_us) {
    return Bad("guard", "set at least one of max_p99_ratio, max_error_rate, max_p99_us");
  }
  policy->guard = guard;
  return Status::Ok();
}

Status ParseBreaker(element value, TrafficPolicy* policy) {
  BreakerConfig breaker;
  bool has_threshold = false;
  RETURN_IF_ERROR(ForEachField(
      value, "breaker",
      {"failure_threshold", "failure_rate", "min_requests", "window_seconds", "open_seconds",
       "half_open_probes"},
      [&](std::string_view key, element member, const std::string& field) -> Status {
        constexpr int64_t kLarge = int64_t{1} << 40;
        if (key == "failure_threshold") {
          has_threshold = true;
          return GetIntInRange(member, field, 1, kLarge, &breaker.failure_threshold);
        }
        if (key == "failure_rate") {
          double rate = 0;
          RETURN_IF_ERROR(GetNumber(member, field, &rate));
          if (!(rate > 0 && rate <= 1)) {
            return Bad(field, FormatNumber(rate) + " is out of range (above 0, at most 1)");
          }
          breaker.failure_rate = rate;
          return Status::Ok();
        }
        if (key == "min_requests")
          return GetIntInRange(member, field, 1, kLarge, &breaker.min_requests);
        if (key == "window_seconds") {
          return GetIntInRange(member, field, 1, kMaxWindowSeconds, &breaker.window_seconds);
        }
        if (key == "open_seconds") {
          return GetIntInRange(member, field, 1, int64_t{24} * 3600, &breaker.open_seconds);
        }
        return GetIntInRange(member, field, 1, 1000, &breaker.half_open_probes);
      }));
  // A rate alone replaces the default count; a document with neither gets the default count.
  if (!has_threshold && breaker.failure_rate) breaker.failure_threshold = 0;
  policy->breaker = breaker;
  return Status::Ok();
}

}  // namespace

StatusOr<TrafficPolicy> ParseTrafficPolicy(std::string_view json) {
  simdjson::dom::parser parser;
  element root;
  if (auto err = parser.parse(simdjson::padded_string(json)).get(root)) {
    return InvalidArgument(std::string("traffic policy: invalid JSON: ") +
                           simdjson::error_message(err));
  }
  if (!root.is_object()) return InvalidArgument("traffic policy: the document must be an object");
  TrafficPolicy policy;
  bool has_weights = false;
  RETURN_IF_ERROR(
      ForEachField(root, "", {"weights", "sticky_header", "shadow", "rollout", "guard", "breaker"},
                   [&](std::string_view key, element member, const std::string&) -> Status {
                     if (key == "weights") {
                       has_weights = true;
                       return ParseWeights(member, &policy);
                     }
                     if (key == "sticky_header") return ParseStickyHeader(member, &policy);
                     if (key == "shadow") return ParseShadow(member, &policy);
                     if (key == "rollout") return ParseRollout(member, &policy);
                     if (key == "guard") return ParseGuard(member, &policy);
                     return ParseBreaker(member, &policy);
                   }));
  if (!has_weights) return Bad("weights", "is required");

  if (policy.rollout) {
    const int64_t candidate = policy.rollout->candidate;
    const bool has_baseline =
        std::any_of(policy.weights.begin(), policy.weights.end(),
                    [&](const auto& vw) { return vw.first != candidate && vw.second > 0; });
    if (!has_baseline) {
      return Bad("rollout.candidate", "needs a baseline: a version other than the candidate (" +
                                          std::to_string(candidate) +
                                          ") with a weight above 0 in weights");
    }
  }
  if (policy.guard && !policy.rollout) {
    return Bad("guard", "watches a rollout's candidate; it needs a rollout");
  }
  if (policy.shadow && !policy.rollout) {
    const int64_t shadow = policy.shadow->version;
    const bool another_answers =
        std::any_of(policy.weights.begin(), policy.weights.end(),
                    [&](const auto& vw) { return vw.first != shadow && vw.second > 0; });
    if (!another_answers) {
      return Bad("shadow.version", "version " + std::to_string(shadow) +
                                       " answers all of the traffic: a shadow copies requests "
                                       "that another version answers, so it would never run");
    }
  }
  return policy;
}

std::string TrafficPolicyToJson(const TrafficPolicy& p) {
  std::string out = "{\"weights\":{";
  bool first = true;
  for (const auto& [version, weight] : p.weights) {
    if (!first) out.push_back(',');
    first = false;
    AppendJsonKey(&out, std::to_string(version));
    AppendJsonNumber(&out, weight);
  }
  out.push_back('}');
  if (!p.sticky_header.empty()) {
    out.append(",\"sticky_header\":");
    AppendJsonString(&out, p.sticky_header);
  }
  if (p.shadow) {
    out.append(",\"shadow\":{\"version\":");
    AppendJsonNumber(&out, p.shadow->version);
    out.append(",\"percent\":");
    AppendJsonNumber(&out, p.shadow->percent);
    out.push_back('}');
  }
  if (p.rollout) {
    out.append(",\"rollout\":{\"candidate\":");
    AppendJsonNumber(&out, p.rollout->candidate);
    out.append(",\"steps\":[");
    for (size_t i = 0; i < p.rollout->steps_percent.size(); ++i) {
      if (i > 0) out.push_back(',');
      AppendJsonNumber(&out, p.rollout->steps_percent[i]);
    }
    out.append("],\"dwell_seconds\":");
    AppendJsonNumber(&out, p.rollout->dwell_seconds);
    out.push_back('}');
  }
  if (p.guard) {
    out.append(",\"guard\":{\"window_seconds\":");
    AppendJsonNumber(&out, p.guard->window_seconds);
    out.append(",\"min_requests\":");
    AppendJsonNumber(&out, p.guard->min_requests);
    if (p.guard->max_p99_ratio) {
      out.append(",\"max_p99_ratio\":");
      AppendJsonNumber(&out, *p.guard->max_p99_ratio);
    }
    if (p.guard->max_error_rate) {
      out.append(",\"max_error_rate\":");
      AppendJsonNumber(&out, *p.guard->max_error_rate);
    }
    if (p.guard->max_p99_us) {
      out.append(",\"max_p99_us\":");
      AppendJsonNumber(&out, *p.guard->max_p99_us);
    }
    out.push_back('}');
  }
  if (p.breaker) {
    out.append(",\"breaker\":{");
    // failure_threshold 0 (a rate alone) is written by leaving it out, as it was read.
    if (p.breaker->failure_threshold > 0) {
      out.append("\"failure_threshold\":");
      AppendJsonNumber(&out, p.breaker->failure_threshold);
      out.push_back(',');
    }
    if (p.breaker->failure_rate) {
      out.append("\"failure_rate\":");
      AppendJsonNumber(&out, *p.breaker->failure_rate);
      out.push_back(',');
    }
    out.append("\"min_requests\":");
    AppendJsonNumber(&out, p.breaker->min_requests);
    out.append(",\"window_seconds\":");
    AppendJsonNumber(&out, p.breaker->window_seconds);
    out.append(",\"open_seconds\":");
    AppendJsonNumber(&out, p.breaker->open_seconds);
    out.append(",\"half_open_probes\":");
    AppendJsonNumber(&out, p.breaker->half_open_probes);
    out.push_back('}');
  }
  out.push_back('}');
  return out;
}

Status ValidateAgainstVersions(const TrafficPolicy& policy, const std::vector<int64_t>& available) {
  auto served = [&](int64_t version) {
    return std::find(available.begin(), available.end(), version) != available.end();
  };
  auto not_served = [&](const std::string& field, int64_t version) {
    std::vector<int64_t> sorted = available;
    std::sort(sorted.begin(), sorted.end());
    std::string list;
    for (int64_t v : sorted) {
      if (!list.empty()) list += ", ";
      list += std::to_string(v);
    }
    return Bad(field, "version " + std::to_string(version) + " is not served by the model (" +
                          (list.empty() ? std::string("no version is served") : "served: " + list) +
                          ")");
  };
  for (const auto& [version, weight] : policy.weights) {
    if (weight > 0 && !served(version)) {
      return not_served("weights." + std::to_string(version), version);
    }
  }
  if (policy.shadow && !served(policy.shadow->version)) {
    return not_served("shadow.version", policy.shadow->version);
  }
  if (policy.rollout && !served(policy.rollout->candidate)) {
    return not_served("rollout.candidate", policy.rollout->candidate);
  }
  return Status::Ok();
}

}  // namespace harrier
