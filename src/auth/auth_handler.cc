#include "auth/auth_handler.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <utility>

#include "auth/browser_origin.h"
#include "core/json_writer.h"
#include "core/request_id.h"
#include "observability/text_exposition.h"
#include "server/sha256.h"

namespace harrier::auth {
namespace {

// Longer than any key worth having (a 256-bit key in base64 is 44 bytes) and short enough that
// hashing it costs nothing; the header itself is bounded by --max-header-bytes first.
constexpr size_t kMaxKeyBytes = 512;

constexpr std::array<std::string_view, kRefusalReasonCount> kReasonNames{
    "missing_key",  "malformed_key", "invalid_key", "forbidden",
    "rate_limited", "restricted",    "cross_site"};

bool VisibleAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The value of the header `name` equals `expected`, compared as digests so that neither the
// length nor the first difference shows in the time taken.
// Whether the request carries `name: expected`, once: a restricted header given twice does not
// match, as a doubled key is refused (a proxy that reads the other value would disagree;
// probe 47: the first value decided).
bool HeaderMatches(const HttpRequest& head, std::string_view name, std::string_view expected) {
  const std::string* value = nullptr;
  for (const auto& [field, v] : head.headers) {
    if (field != name) continue;
    if (value != nullptr) return false;
    value = &v;
  }
  if (value == nullptr) return false;
  return DigestsEqual(Sha256(*value), Sha256(expected));
}

}  // namespace

std::string_view RefusalReasonName(RefusalReason reason) {
  return kReasonNames[static_cast<size_t>(reason)];
}

PresentedKey ReadPresentedKey(const HttpRequest& head) {
  // A credential header given twice is refused, not read first-wins: a proxy in front that
  // reads the last one would disagree with the server about which key was sent.
  int authorization = 0, api_key = 0;
  for (const auto& [name, value] : head.headers) {
    authorization += name == "authorization";
    api_key += name == "x-api-key";
  }
  if (authorization > 1 || api_key > 1) return {PresentedKey::Kind::kMalformed, {}};
  std::string_view key;
  if (head.HasHeader("authorization")) {
    const std::string_view value = TrimSpaces(head.Header("authorization"));
    constexpr std::string_view kBearer = "bearer";
    if (value.size() <= kBearer.size() ||
        !EqualsIgnoreCase(value.substr(0, kBearer.size()), kBearer) ||
        (value[kBearer.size()] != ' ' && value[kBearer.size()] != '\t')) {
      return {PresentedKey::Kind::kMalformed, {}};
    }
    key = TrimSpaces(value.substr(kBearer.size()));
  } else if (head.HasHeader("x-api-key")) {
    key = TrimSpaces(head.Header("x-api-key"));
  } else {
    return {};
  }
  if (key.empty() || key.size() > kMaxKeyBytes || !VisibleAscii(key)) {
    return {PresentedKey::Kind::kMalformed, {}};
  }
  return {PresentedKey::Kind::kKey, key};
}

void AppendAuthMetrics(const AuthCounters& counters, const ApiKeyStore* keys, TextExposition* out) {
  using Type = TextExposition::Type;
  constexpr std::string_view kRefusals = "harrier_auth_refusals_total";
  out->Declare(kRefusals, Type::kCounter,
               "Requests refused by access control (API keys, Triton's restricted APIs, browsers' "
               "cross-site requests), by reason");
  for (int i = 0; i < kRefusalReasonCount; ++i) {
    const auto reason = static_cast<RefusalReason>(i);
    out->Add(kRefusals, {{"reason", RefusalReasonName(reason)}}, counters.refusals(reason));
  }
  if (keys == nullptr) return;
  constexpr std::string_view kRequests = "harrier_auth_requests_total";
  out->Declare(kRequests, Type::kCounter,
               "Requests that presented a known API key, by key id and outcome");
  for (const auto& [id, c] : keys->AllCounters()) {
    out->Add(kRequests, {{"key", id}, {"outcome", "allowed"}},
             c->allowed.load(std::memory_order_relaxed));
    out->Add(kRequests, {{"key", id}, {"outcome", "forbidden"}},
             c->forbidden.load(std::memory_order_relaxed));
    out->Add(kRequests, {{"key", id}, {"outcome", "rate_limited"}},
             c->rate_limited.load(std::memory_order_relaxed));
  }
  constexpr std::string_view kReloads = "harrier_auth_key_file_reloads_total";
  out->Declare(kReloads, Type::kCounter,
               "Times the API key file changed and was read again, by result (failed: the "
               "previous keys stayed)");
  out->Add(kReloads, {{"result", "ok"}}, keys->reloads());
  out->Add(kReloads, {{"result", "failed"}}, keys->failed_reloads());
}

AuthHandler::AuthHandler(HttpHandler* next, Options options)
    : next_(next), options_(std::move(options)) {}

AuthHandler::Decision AuthHandler::Check(const HttpRequest& head, Charge charge) const {
  Decision d;
  auto refuse = [&](int status, RefusalReason reason, std::string message) {
    d.status = status;
    d.reason = reason;
    d.message = std::move(message);
    return d;
  };
  if (options_.guard_browsers) {
    if (std::string why = CrossSiteRefusal(head, options_.allowed_origins); !why.empty())
      return refuse(403, RefusalReason::kCrossSite, std::move(why));
    if (std::string why = HostRefusal(head, options_.allowed_hosts); !why.empty())
      return refuse(403, RefusalReason::kCrossSite, std::move(why));
  }
  if (options_.keys == nullptr && options_.restrictions.empty()) return d;
  const RouteAccess access = options_.routes == Routes::kGrpc
                                 ? RouteAccessForGrpc(head.target)
                                 : RouteAccessForHttp(head.method, head.target);
  // Triton's restrictions, after the key: a client without a key is told only that it needs
  // one, not which header a restricted API wants.
  auto restricted = [&]() -> const ApiRestriction* {
    for (const ApiRestriction& r : options_.restrictions) {
      if (r.groups.test(static_cast<size_t>(access.group)) &&
          !HeaderMatches(head, r.header, r.value)) {
        return &r;
      }
    }
    return nullptr;
  };
  auto refuse_restricted = [&](const ApiRestriction& r) {
    if (options_.routes == Routes::kGrpc) {  // Triton's gRPC words first (its QA tests match them)
      return refuse(403, RefusalReason::kRestricted,
                    "This protocol is restricted, expecting header '" + r.header + "' (" +
                        std::string(ApiGroupName(access.group)) + ")");
    }
    return refuse(403, RefusalReason::kRestricted,
                  // Triton's words ("This API is restricted, expecting header 'k'"), which
                  // its clients and QA tests match; the API group after them.
                  "This API is restricted, expecting header '" + r.header +
                      "' (API group: " + std::string(ApiGroupName(access.group)) + ")");
  };
  if (options_.keys == nullptr || !access.scope) {
    if (const ApiRestriction* r = restricted()) return refuse_restricted(*r);
    return d;
  }

  const PresentedKey presented = ReadPresentedKey(head);
  if (presented.kind == PresentedKey::Kind::kNone) {
    return refuse(401, RefusalReason::kMissingKey,
                  "an API key is required: send 'Authorization: Bearer KEY' or 'X-API-Key: KEY'");
  }
  if (presented.kind == PresentedKey::Kind::kMalformed) {
    return refuse(401, RefusalReason::kMalformedKey,
                  "malformed credentials: expected 'Authorization: Bearer KEY' or "
                  "'X-API-Key: KEY', KEY of 1.." +
                      std::to_string(kMaxKeyBytes) + " visible ASCII characters");
  }
  const std::shared_ptr<const ApiKeyStore::KeySet> keys = options_.keys->keys();
  const ApiKeyStore::Key* key = ApiKeyStore::Find(*keys, presented.key);
  if (key == nullptr) return refuse(401, RefusalReason::kInvalidKey, "unknown API key");
  d.key_id = key->entry.id;
  const bool take = charge == Charge::kTakeToken;
  if (!(key->entry.scopes & ScopeBit(*access.scope))) {
    if (take) key->counters->forbidden.fetch_add(1, std::memory_order_relaxed);
    return refuse(403, RefusalReason::kForbidden,
                  "API key '" + key->entry.id + "' does not have the scope '" +
                      std::string(ScopeName(*access.scope)) + "' this request needs");
  }
  if (const ApiRestriction* r = restricted()) return refuse_restricted(*r);
  if (take && key->bucket) {
    Clock::duration wait{};
    if (!key->bucket->TryAcquire(options_.clock->Now(), &wait)) {
      key->counters->rate_limited.fetch_add(1, std::memory_order_relaxed);
      const double secs = std::chrono::duration<double>(wait).count();
      d.retry_after_s = std::max(1, static_cast<int>(std::ceil(secs)));
      // Worded as admission control words its refusals (docs/admission.md).
      return refuse(429, RefusalReason::kRateLimited,
                    "rate limit for API key '" + key->entry.id + "' exceeded (" +
                        key->entry.rate_limit.ToString() + "); retry after " +
                        std::to_string(d.retry_after_s) + " s");
    }
  }
  if (take) key->counters->allowed.fetch_add(1, std::memory_order_relaxed);
  return d;
}

HttpResponse AuthHandler::Refuse(const HttpRequest& head, const Decision& d) const {
  options_.counters->Count(d.reason);
  const std::string request_id =
      ResolveRequestId(head.Header("x-request-id"), RequestIdGenerator::Process());
  HttpResponse r;
  // The front end's own form (a grpc-status; the OpenAI API's error object with the reason as
  // its code), else the server's JSON error.
  if (std::optional<HttpResponse> own =
          next_->TransportError(d.status, d.message, head, RefusalReasonName(d.reason))) {
    r = std::move(*own);
  } else {
    r.status = d.status;
    r.headers.emplace_back("Content-Type", "application/json");
    r.body = "{\"error\":";
    AppendJsonString(&r.body, d.message);
    r.body += "}";
  }
  if (d.status == 401) {
    // RFC 6750 §3: a request with a bad token is told so; one without any is only challenged.
    r.headers.emplace_back("WWW-Authenticate",
                           d.reason == RefusalReason::kMissingKey
                               ? std::string("Bearer realm=\"harrier\"")
                               : std::string("Bearer realm=\"harrier\", error=\"invalid_token\""));
  }
  if (d.retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(d.retry_after_s));
  r.headers.emplace_back("X-Request-Id", request_id);
  if (options_.access_log != nullptr) {
    AccessRecord record;
    record.request_id = request_id;
    const bool grpc = options_.routes == Routes::kGrpc;
    record.protocol = grpc ? "grpc" : "http";
    record.http_version = head.version;
    record.tls_version = head.tls_version;
    // gRPC's method is the RPC, as its accepted calls log it: the path's last segment
    // ("/inference.GRPCInferenceService/ModelInfer").
    const std::string_view target = head.target;
    record.method = grpc ? target.substr(target.rfind('/') + 1) : std::string_view(head.method);
    record.target = head.target;
    record.status = r.status;
    if (grpc) {  // the access log holds a gRPC call's grpc-status
      for (const auto& [k, v] : r.headers)
        if (k == "grpc-status") std::from_chars(v.data(), v.data() + v.size(), record.status);
    }
    record.error = d.message;
    record.key_id = d.key_id;
    record.response_bytes = r.body.size();
    options_.access_log->Write(record);
  }
  return r;
}

std::optional<HttpResponse> AuthHandler::Precheck(const HttpRequest& head) {
  const Decision d = Check(head, Charge::kTakeToken);
  if (d.status != 0) return Refuse(head, d);
  return next_->Precheck(head);
}

void AuthHandler::Handle(HttpRequest&& request, HttpResponder respond) {
  Decision d = Check(request, Charge::kCheckOnly);
  if (d.status != 0) return respond(Refuse(request, d));
  request.auth_key_id = std::move(d.key_id);
  next_->Handle(std::move(request), std::move(respond));
}

bool AuthHandler::ServesAsStream(const HttpRequest& head) const {
  return next_->ServesAsStream(head);
}

// The checks of a stream's head, again for each of its messages: the first message is the
// request Precheck took the rate-limit token for; every later one takes its own, and the key
// must still be known and still have the scope (the key file is read again while streams stay
// open).
class AuthHandler::StreamAuthorizer final : public MessageAuthorizer {
 public:
  StreamAuthorizer(const AuthHandler* auth, HttpRequest head)
      : auth_(auth), head_(std::move(head)) {}

  Refusal AuthorizeNext() override {
    const Decision d = auth_->Check(head_, first_ ? Charge::kCheckOnly : Charge::kTakeToken);
    first_ = false;
    if (d.status == 0) return {};
    auth_->options_.counters->Count(d.reason);
    return {d.status, d.message};
  }

 private:
  const AuthHandler* const auth_;
  const HttpRequest head_;  // the headers the checks read (target, method, key, restrictions)
  bool first_ = true;
};

std::shared_ptr<HttpStreamHandler> AuthHandler::OpenStream(const HttpRequest& head,
                                                           std::shared_ptr<HttpStreamWriter> writer,
                                                           HttpResponse* response_head) {
  Decision d = Check(head, Charge::kCheckOnly);
  // Refused (the keys changed since Precheck): null has the request read whole and given to
  // Handle, which refuses it in the front end's form.
  if (d.status != 0) return nullptr;
  HttpRequest keyed = head;  // streams are few and long: a copy or two of the head is nothing
  keyed.auth_key_id = std::move(d.key_id);
  if (options_.keys != nullptr) {
    HttpRequest checked;
    checked.method = head.method;
    checked.target = head.target;
    checked.headers = head.headers;
    keyed.message_authorizer = std::make_shared<StreamAuthorizer>(this, std::move(checked));
  }
  return next_->OpenStream(keyed, std::move(writer), response_head);
}

std::optional<HttpResponse> AuthHandler::TransportError(int status, std::string_view message,
                                                        const HttpRequest& request,
                                                        std::string_view code) {
  return next_->TransportError(status, message, request, code);
}

}  // namespace harrier::auth
