#include "scheduler/admission_controller.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <functional>

namespace harrier {
namespace {

using std::chrono::nanoseconds;

// Client keys longer than this are stored as a prefix plus a hash of the whole key, so that
// the table's memory is bounded by max_clients × ~kMaxKeyBytes whatever the headers hold.
constexpr size_t kMaxKeyBytes = 128;

// Seconds to suggest for a wait: whole seconds, rounded up, at least 1.
int64_t CeilSeconds(Clock::duration wait) {
  const int64_t ns = std::chrono::duration_cast<nanoseconds>(wait).count();
  return std::max<int64_t>(1, (ns + 999'999'999) / 1'000'000'000);
}

std::string RetryAfter(int64_t seconds) {
  return "; retry after " + std::to_string(seconds) + " s";
}

std::string ClientLabel(std::string_view client_id) {
  if (client_id.empty()) return "anonymous clients";
  constexpr size_t kShown = 64;
  std::string label = "client '";
  label += client_id.substr(0, kShown);
  if (client_id.size() > kShown) label += "...";
  return label + "'";
}

// The table key for a client id; `storage` holds it when it had to be shortened.
std::string_view ClientKey(std::string_view client_id, std::string* storage) {
  if (client_id.size() <= kMaxKeyBytes) return client_id;
  char hash[20];
  std::snprintf(hash, sizeof(hash), "#%016zx", std::hash<std::string_view>{}(client_id));
  storage->assign(client_id.substr(0, kMaxKeyBytes - 17));
  storage->append(hash);
  return *storage;
}

Status CheckRateLimit(const RateLimit& limit, std::string_view what) {
  if (!limit.enabled()) return Status::Ok();
  if (limit.burst < 1) return InvalidArgument(std::string(what) + ": the burst must be at least 1");
  return Status::Ok();
}

// Parameter lookups. Each returns nullopt when the key is absent.
const std::string* Find(const std::map<std::string, std::string>& params, const char* key) {
  auto it = params.find(key);
  return it == params.end() ? nullptr : &it->second;
}

StatusOr<int64_t> ParseCount(const std::string& text, const char* key, int64_t min_value,
                             int64_t max_value) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || v < min_value ||
      v > max_value)
    return InvalidArgument("parameter '" + std::string(key) + "': '" + text +
                           "' is not a whole number between " + std::to_string(min_value) +
                           " and " + std::to_string(max_value));
  return v;
}

// "RPS" (no burst: the burst parameter, else the default for the rate).
StatusOr<RateLimit> ResolveRate(const std::map<std::string, std::string>& params,
                                const char* rate_key, const char* burst_key, RateLimit fallback) {
  const std::string* rate_text = Find(params, rate_key);
  const std::string* burst_text = Find(params, burst_key);
  RateLimit limit = fallback;
  if (rate_text != nullptr) {
    if (rate_text->find(':') != std::string::npos)
      return InvalidArgument("parameter '" + std::string(rate_key) + "': '" + *rate_text +
                             "' must be a rate alone; the burst is '" + burst_key + "'");
    auto parsed = ParseRateLimit(*rate_text);
    if (!parsed.ok())
      return parsed.status().WithContext("parameter '" + std::string(rate_key) + "'");
    limit = *parsed;
  }
  if (burst_text != nullptr) {
    if (!limit.enabled())
      return InvalidArgument("parameter '" + std::string(burst_key) + "' needs a rate ('" +
                             rate_key + "' or the server's default)");
    ASSIGN_OR_RETURN(limit.burst, ParseCount(*burst_text, burst_key, 1, 1'000'000'000));
  }
  return limit;
}

}  // namespace

StatusOr<ModelAdmissionConfig> ResolveModelAdmission(const AdmissionController::Options& server,
                                                     const AdmissionController::ModelSpec& spec) {
  const auto& params = spec.parameters;
  ModelAdmissionConfig config;
  ASSIGN_OR_RETURN(config.model_rate, ResolveRate(params, "harrier.rate_limit.rps",
                                                  "harrier.rate_limit.burst", server.per_model));
  ASSIGN_OR_RETURN(config.per_client_rate,
                   ResolveRate(params, "harrier.rate_limit.per_client_rps",
                               "harrier.rate_limit.per_client_burst", RateLimit{}));

  OverloadLimiter::Options& o = config.overload;
  o.enabled = server.overload_protection;
  o.target_queue_delay = server.target_queue_delay;
  o.batching_delay = spec.batching_delay;
  o.instance_count = std::max(1, spec.instance_count);
  o.requests_per_run = std::max(1, spec.requests_per_run);
  if (const std::string* v = Find(params, "harrier.overload.protection")) {
    if (*v == "on" || *v == "true" || *v == "1") {
      o.enabled = true;
    } else if (*v == "off" || *v == "false" || *v == "0") {
      o.enabled = false;
    } else {
      return InvalidArgument("parameter 'harrier.overload.protection': '" + *v +
                             "' is not on or off");
    }
  }
  constexpr int64_t kHourUs = 3'600'000'000LL;
  if (const std::string* v = Find(params, "harrier.overload.target_queue_delay_us")) {
    ASSIGN_OR_RETURN(int64_t us,
                     ParseCount(*v, "harrier.overload.target_queue_delay_us", 0, kHourUs));
    o.target_queue_delay = std::chrono::microseconds(us);
  }
  if (const std::string* v = Find(params, "harrier.overload.interval_us")) {
    ASSIGN_OR_RETURN(int64_t us, ParseCount(*v, "harrier.overload.interval_us", 1000, kHourUs));
    o.interval = std::chrono::microseconds(us);
  }
  if (const std::string* v = Find(params, "harrier.overload.max_concurrency")) {
    ASSIGN_OR_RETURN(int64_t n, ParseCount(*v, "harrier.overload.max_concurrency", 1, 1 << 20));
    o.max_limit = static_cast<int>(n);
  }
  return config;
}

AdmissionController::AdmissionController(const Options& options)
    : options_(options),
      per_client_(options.per_client.enabled()
                      ? std::make_unique<ClientRateLimiter>(
                            ClientRateLimiter::Options{options.per_client, options.max_clients})
                      : nullptr) {}

StatusOr<std::unique_ptr<AdmissionController>> AdmissionController::Create(const Options& options) {
  if (options.clock == nullptr) return InvalidArgument("admission control needs a clock");
  if (options.max_inflight < 0) return InvalidArgument("--max-inflight must not be negative");
  RETURN_IF_ERROR(CheckRateLimit(options.per_client, "--rate-limit-per-client"));
  RETURN_IF_ERROR(CheckRateLimit(options.per_model, "--rate-limit-per-model"));
  if (options.max_clients < 1) return InvalidArgument("--rate-limit-max-clients must be >= 1");
  return std::unique_ptr<AdmissionController>(new AdmissionController(options));
}

StatusOr<std::unique_ptr<ModelAdmission>> AdmissionController::ForModel(const ModelSpec& spec) {
  ASSIGN_OR_RETURN(ModelAdmissionConfig config, ResolveModelAdmission(options_, spec));
  return std::unique_ptr<ModelAdmission>(new ModelAdmission(this, spec.name, std::move(config)));
}

ModelAdmission::ModelAdmission(AdmissionController* server, std::string name,
                               ModelAdmissionConfig config)
    : server_(server),
      name_(std::move(name)),
      config_(std::move(config)),
      model_bucket_(config_.model_rate.enabled() ? std::make_unique<TokenBucket>(config_.model_rate)
                                                 : nullptr),
      per_client_(config_.per_client_rate.enabled()
                      ? std::make_unique<ClientRateLimiter>(ClientRateLimiter::Options{
                            config_.per_client_rate, server->options().max_clients})
                      : nullptr),
      overload_(config_.overload, server->options().clock->Now()) {}

StatusOr<AdmissionTicket> ModelAdmission::Admit(std::string_view client_id, bool urgent) {
  // A server without overload protection or rate limits never reads the clock here.
  if (!NeedsClock()) return Admit(client_id, Clock::time_point{}, urgent);
  return Admit(client_id, server_->options().clock->Now(), urgent);
}

// The refusals, worded once for Admit() and Peek().
Status ModelAdmission::OverloadRefusal(const OverloadLimiter::Refusal& why) const {
  return ResourceExhausted(overload_.RejectionMessage(name_, why) + RetryAfter(1));
}

Status ModelAdmission::InflightRefusal() const {
  return ResourceExhausted("server in-flight limit " +
                           std::to_string(server_->options().max_inflight) + " reached" +
                           RetryAfter(1));
}

Status ModelAdmission::ModelRateRefusal(Clock::duration wait) const {
  return ResourceExhausted("rate limit for model '" + name_ + "' exceeded (" +
                           config_.model_rate.ToString() + ")" + RetryAfter(CeilSeconds(wait)));
}

Status ModelAdmission::ModelClientRefusal(std::string_view client_id, Clock::duration wait) const {
  return ResourceExhausted("rate limit for " + ClientLabel(client_id) + " on model '" + name_ +
                           "' exceeded (" + config_.per_client_rate.ToString() + ")" +
                           RetryAfter(CeilSeconds(wait)));
}

Status ModelAdmission::ServerClientRefusal(std::string_view client_id, Clock::duration wait) const {
  return ResourceExhausted("rate limit for " + ClientLabel(client_id) + " exceeded (" +
                           server_->options().per_client.ToString() + ")" +
                           RetryAfter(CeilSeconds(wait)));
}

StatusOr<AdmissionTicket> ModelAdmission::Admit(std::string_view client_id, Clock::time_point now,
                                                bool urgent) {
  OverloadLimiter::Refusal why;
  if (!overload_.TryAcquire(now, urgent, &why)) return OverloadRefusal(why);
  // From here on the ticket gives the slots back if a later check rejects the request.
  AdmissionTicket ticket(nullptr);
  if (!server_->TryAcquireInflight()) {
    overload_.Release();
    return InflightRefusal();
  }
  ticket.model_ = this;

  Clock::duration wait{};
  if (model_bucket_ != nullptr && !model_bucket_->TryAcquire(now, &wait))
    return ModelRateRefusal(wait);
  std::string long_key;
  const std::string_view key = per_client_ != nullptr || server_->per_client_ != nullptr
                                   ? ClientKey(client_id, &long_key)
                                   : std::string_view();
  if (per_client_ != nullptr && !per_client_->TryAcquire(key, now, &wait)) {
    if (model_bucket_ != nullptr) model_bucket_->Refund();
    return ModelClientRefusal(client_id, wait);
  }
  if (server_->per_client_ != nullptr && !server_->per_client_->TryAcquire(key, now, &wait)) {
    if (model_bucket_ != nullptr) model_bucket_->Refund();
    if (per_client_ != nullptr) per_client_->Refund(key);
    return ServerClientRefusal(client_id, wait);
  }
  return ticket;
}

Status ModelAdmission::Peek(std::string_view client_id, bool check_overload) const {
  if (!NeedsClock()) return Peek(client_id, Clock::time_point{}, check_overload);
  return Peek(client_id, server_->options().clock->Now(), check_overload);
}

Status ModelAdmission::Peek(std::string_view client_id, Clock::time_point now,
                            bool check_overload) const {
  OverloadLimiter::Refusal why;
  if (check_overload && !overload_.WouldAdmit(now, &why)) return OverloadRefusal(why);
  if (!server_->WouldAcquireInflight()) return InflightRefusal();
  Clock::duration wait{};
  if (model_bucket_ != nullptr && !model_bucket_->WouldAcquire(now, &wait))
    return ModelRateRefusal(wait);
  if (per_client_ == nullptr && server_->per_client_ == nullptr) return Status::Ok();
  std::string long_key;
  const std::string_view key = ClientKey(client_id, &long_key);
  if (per_client_ != nullptr && !per_client_->WouldAcquire(key, now, &wait))
    return ModelClientRefusal(client_id, wait);
  if (server_->per_client_ != nullptr && !server_->per_client_->WouldAcquire(key, now, &wait))
    return ServerClientRefusal(client_id, wait);
  return Status::Ok();
}

void ModelAdmission::OnComplete(uint64_t queue_ns, uint64_t service_ns) {
  if (!config_.overload.enabled) return;
  overload_.OnComplete(server_->options().clock->Now(), queue_ns, service_ns);
}

}  // namespace harrier
