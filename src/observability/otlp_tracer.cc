#include "observability/otlp_tracer.h"

#include <curl/curl.h>
#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "observability/otlp_json.h"
#include "observability/trace_ids.h"
#include "observability/trace_sampler.h"

namespace harrier {
namespace {

using Clock = std::chrono::steady_clock;
using TimePoint = RequestTrace::TimePoint;

// ---- Endpoint -----------------------------------------------------------------------------

// The endpoint, checked by libcurl's URL parser (a port past 65535, a space in the host: probe
// 74 saw both accepted and every export fail) and given the signal's path when it has none.
StatusOr<std::string> NormalizeEndpoint(const std::string& url) {
  const std::string quoted = "trace endpoint '" + RedactedUrl(url) + "'";
  std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> parsed(curl_url(), &curl_url_cleanup);
  if (parsed == nullptr) return Internal("libcurl cannot parse URLs (out of memory)");
  // No default scheme: "collector:4318" is not a URL a user meant.
  if (const CURLUcode code = curl_url_set(parsed.get(), CURLUPART_URL, url.c_str(), 0);
      code != CURLUE_OK) {
    return InvalidArgument(quoted + " is not a URL: " + curl_url_strerror(code));
  }
  auto part = [&](CURLUPart which) -> std::string {
    char* text = nullptr;
    if (curl_url_get(parsed.get(), which, &text, 0) != CURLUE_OK || text == nullptr) return {};
    std::string value(text);
    curl_free(text);
    return value;
  };
  const std::string scheme = part(CURLUPART_SCHEME);
  if (scheme != "http" && scheme != "https")
    return InvalidArgument(quoted + " is not an http:// or https:// URL");
  if (part(CURLUPART_HOST).empty()) return InvalidArgument(quoted + " has no host");
  // libcurl takes port 0 (probe 77); nothing listens there.
  if (part(CURLUPART_PORT) == "0") return InvalidArgument(quoted + " has port 0");
  // An OTLP endpoint has no fragment; one hides a password's '#' (probe 80). Nor an '@' past its
  // user information: a password's '/' or '?' made the rest of it a path (probe 81).
  if (!part(CURLUPART_FRAGMENT).empty()) return InvalidArgument(quoted + " has a fragment (#)");
  if (url.find('@') != std::string::npos && part(CURLUPART_USER).empty()) {
    return InvalidArgument(quoted +
                           " has an '@' outside its user information (percent-encode a '/', "
                           "'?' or '#' in a password)");
  }
  const std::string path = part(CURLUPART_PATH);
  if (!path.empty() && path != "/") return url;
  // As OTEL_EXPORTER_OTLP_ENDPOINT: a base URL gets the signal's path.
  if (curl_url_set(parsed.get(), CURLUPART_PATH, "/v1/traces", 0) != CURLUE_OK)
    return Internal("libcurl cannot set the path of " + quoted);
  std::string normalized = part(CURLUPART_URL);
  if (normalized.empty()) return Internal("libcurl cannot write " + quoted + " back");
  return normalized;
}

std::once_flag curl_init_once;

}  // namespace

std::string RedactedUrl(const std::string& url) {
  std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> parsed(curl_url(), &curl_url_cleanup);
  const size_t at = url.rfind('@');
  char* user = nullptr;
  const bool parsed_whole =
      parsed != nullptr && curl_url_set(parsed.get(), CURLUPART_URL, url.c_str(), 0) == CURLUE_OK &&
      (at == std::string::npos ||
       (curl_url_get(parsed.get(), CURLUPART_USER, &user, 0) == CURLUE_OK && user != nullptr));
  curl_free(user);
  if (!parsed_whole) {
    // Not a URL libcurl reads (its error is what is being logged), or one with an '@' that is not
    // its user information's: there a password holding '/', '?' or '#' hides (probes 80, 81:
    // http://alice:12/cd@host is host alice, port 12, path /cd@host). Everything up to the last
    // '@' goes, after the scheme if there is one.
    if (at == std::string::npos) return url;
    const size_t colon_slashes = url.find("://");
    const bool scheme =
        colon_slashes != std::string::npos && colon_slashes < at && colon_slashes > 0 &&
        std::isalpha(static_cast<unsigned char>(url[0])) &&
        std::all_of(url.begin(), url.begin() + static_cast<std::ptrdiff_t>(colon_slashes),
                    [](char c) {
                      return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' ||
                             c == '.';
                    });
    const size_t start = scheme ? colon_slashes + 3 : 0;
    return url.substr(0, start) + "REDACTED" + url.substr(at);
  }
  char* password = nullptr;
  const bool has_password =
      curl_url_get(parsed.get(), CURLUPART_PASSWORD, &password, 0) == CURLUE_OK &&
      password != nullptr;
  curl_free(password);
  if (!has_password) return url;
  curl_url_set(parsed.get(), CURLUPART_PASSWORD, "REDACTED", 0);
  char* text = nullptr;
  if (curl_url_get(parsed.get(), CURLUPART_URL, &text, 0) != CURLUE_OK || text == nullptr)
    return "(a URL with a password)";
  std::string redacted(text);
  curl_free(text);
  return redacted;
}

namespace {}  // namespace

// ---- The tracer -----------------------------------------------------------------------------

class OtlpTracer::Impl {
 public:
  explicit Impl(Options options) : options_(std::move(options)), sampler_(options_.sample_ratio) {
    pending_.reserve(std::min(options_.max_queue, options_.max_export_batch));
    thread_ = std::thread([this] { ExportLoop(); });
  }

  ~Impl() {
    // One flush bounds the end: when the shutdown's own (main.cc) already gave up, the spans
    // still queued are dropped rather than waited for again, and an export in flight is aborted
    // (AbortWhenStopping) rather than waited out.
    bool gave_up = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      gave_up = flush_gave_up_;
    }
    if (!gave_up) Flush(options_.export_timeout);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    stop_requested_.store(true, std::memory_order_relaxed);
    wake_.notify_all();
    thread_.join();
  }

  std::optional<SpanContext> Start(const std::optional<SpanContext>& parent) {
    return sampler_.Start(parent, NextRandomId);
  }

  void Submit(RequestTrace trace) {
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queued_ >= options_.max_queue) {
        dropped_queue_full_.fetch_add(CountSpans(trace), std::memory_order_relaxed);
        return;
      }
      pending_.push_back(std::move(trace));
      ++queued_;
      ++accepted_;
      wake = pending_.size() == options_.max_export_batch;
    }
    if (wake) wake_.notify_one();
  }

  bool Flush(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = accepted_;
    if (finished_ >= target) return true;
    ++flush_waiters_;
    wake_.notify_one();
    const bool done = finished_cv_.wait_for(lock, timeout, [&] { return finished_ >= target; });
    --flush_waiters_;
    if (!done) flush_gave_up_ = true;
    return done;
  }

  void AppendMetrics(TextExposition* out) const {
    using Type = TextExposition::Type;
    constexpr std::string_view kExported = "harrier_trace_spans_exported_total";
    constexpr std::string_view kDropped = "harrier_trace_spans_dropped_total";
    constexpr std::string_view kRequests = "harrier_trace_export_requests_total";
    out->Declare(kExported, Type::kCounter, "Spans accepted by the OTLP trace endpoint");
    out->Add(kExported, {}, spans_exported_.load(std::memory_order_relaxed));
    out->Declare(kDropped, Type::kCounter,
                 "Spans dropped: the export queue was full, or the export failed after retries");
    out->Add(kDropped, {{"reason", "queue_full"}},
             dropped_queue_full_.load(std::memory_order_relaxed));
    out->Add(kDropped, {{"reason", "export_failed"}},
             dropped_export_failed_.load(std::memory_order_relaxed));
    out->Declare(kRequests, Type::kCounter,
                 "Trace export requests (one per batch of spans, counted once after its retries) "
                 "by outcome");
    out->Add(kRequests, {{"result", "ok"}}, requests_ok_.load(std::memory_order_relaxed));
    out->Add(kRequests, {{"result", "failed"}}, requests_failed_.load(std::memory_order_relaxed));
  }

 private:
  enum class PostResult { kAccepted, kRetry, kRejected };

  void ExportLoop() {
    // Serialising and posting spans is work no request waits for: named for top/perf, and
    // SCHED_IDLE, so that it runs on cores the I/O and model threads leave idle. On a saturated
    // machine a backlog waits in the bounded queue (and is dropped, counted, when it fills)
    // rather than delaying answers; nice 10 or 19 still put ~0.5 ms on the 1-connection p99
    // when every request was traced (docs/benchmarks.md, "Tracing"). The lock it shares with
    // Submit() is held for a vector swap only. Best effort: a failure changes nothing else.
    pthread_setname_np(pthread_self(), "otlp-export");
    sched_param idle{};
    (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
    auto next_export = Clock::now() + options_.export_interval;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      // Wakes when a batch is full, a Flush() waits, or the interval is over.
      wake_.wait_until(lock, next_export, [&] { return ShouldExportNow(); });
      if (stopping_) break;
      const auto now = Clock::now();
      if (now >= next_export) next_export = now + options_.export_interval;
      if (pending_.empty()) continue;
      // Swap the whole queue out: Submit keeps appending to the other vector (whose capacity
      // is kept, so a steady state allocates nothing) while this one is exported in batches.
      exporting_.swap(pending_);
      lock.unlock();
      const size_t batch = options_.max_export_batch;
      for (size_t i = 0; i < exporting_.size(); i += batch) {
        const size_t n = std::min(batch, exporting_.size() - i);
        const std::span<const RequestTrace> records(exporting_.data() + i, n);
        if (stop_requested_.load(std::memory_order_relaxed)) {
          // Stopping after the destructor's flush gave up: no more attempts.
          uint64_t spans = 0;
          for (const RequestTrace& t : records) spans += CountSpans(t);
          dropped_export_failed_.fetch_add(spans, std::memory_order_relaxed);
        } else {
          ExportBatch(records);
        }
        {
          std::lock_guard<std::mutex> relock(mu_);
          queued_ -= n;
          finished_ += n;
        }
        finished_cv_.notify_all();
      }
      exporting_.clear();
      lock.lock();
    }
    // Stopped (the destructor has flushed, or given up): what is left is dropped.
    uint64_t left = 0;
    for (const RequestTrace& t : pending_) left += CountSpans(t);
    dropped_export_failed_.fetch_add(left, std::memory_order_relaxed);
    finished_ += pending_.size();
    pending_.clear();
    lock.unlock();
    finished_cv_.notify_all();
    if (curl_ != nullptr) curl_easy_cleanup(curl_);
    if (headers_ != nullptr) curl_slist_free_all(headers_);
  }

  // REQUIRES: mu_ held.
  bool ShouldExportNow() const {
    return stopping_ || pending_.size() >= options_.max_export_batch ||
           (flush_waiters_ > 0 && !pending_.empty());
  }

  void ExportBatch(std::span<const RequestTrace> records) {
    const int64_t steady_to_unix_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count() -
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
            .count();
    const std::string body = OtlpTraceJson(records, options_, steady_to_unix_ns);
    uint64_t spans = 0;
    for (const RequestTrace& t : records) spans += CountSpans(t);
    if (PostWithRetries(body)) {
      spans_exported_.fetch_add(spans, std::memory_order_relaxed);
      requests_ok_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    dropped_export_failed_.fetch_add(spans, std::memory_order_relaxed);
    requests_failed_.fetch_add(1, std::memory_order_relaxed);
    const auto now = Clock::now();
    if (now - last_failure_log_ >= std::chrono::seconds(10) || last_failure_log_ == TimePoint{}) {
      last_failure_log_ = now;
      spdlog::warn("tracing: export to {} failed ({}); {} spans dropped",
                   RedactedUrl(options_.endpoint), last_error_, spans);
    }
  }

  // Retries a connection failure, 429, 502, 503 and 504 with a doubling backoff while the
  // export_timeout lasts; other answers are final.
  bool PostWithRetries(const std::string& body) {
    const auto deadline = Clock::now() + options_.export_timeout;
    auto backoff = kFirstBackoff;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      switch (PostOnce(body, std::max(left, std::chrono::milliseconds(1)))) {
        case PostResult::kAccepted: return true;
        case PostResult::kRejected: return false;
        case PostResult::kRetry: break;
      }
      if (Clock::now() + backoff >= deadline) return false;
      std::unique_lock<std::mutex> lock(mu_);
      if (wake_.wait_for(lock, backoff, [&] { return stopping_; })) return false;
      backoff *= 2;
    }
  }

  PostResult PostOnce(const std::string& body, std::chrono::milliseconds timeout) {
    if (options_.post) {
      if (options_.post(body)) return PostResult::kAccepted;
      last_error_ = "not accepted";
      return PostResult::kRetry;
    }
    if (curl_ == nullptr) {
      // One handle for the thread's life: libcurl keeps the connection alive between exports.
      curl_ = curl_easy_init();
      if (curl_ == nullptr) {
        last_error_ = "curl_easy_init failed";
        return PostResult::kRejected;
      }
      headers_ = curl_slist_append(nullptr, "Content-Type: application/json");
      // No "Expect: 100-continue" round trip (and its one-second wait) for large bodies.
      headers_ = curl_slist_append(headers_, "Expect:");
      curl_easy_setopt(curl_, CURLOPT_URL, options_.endpoint.c_str());
      curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers_);
      curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
      curl_easy_setopt(curl_, CURLOPT_POST, 1L);
      curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, &DiscardBody);
      curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, curl_error_);
      // Stopping aborts an export in flight (a collector that takes the request and never
      // answers would hold the destruction for the rest of export_timeout).
      curl_easy_setopt(curl_, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(curl_, CURLOPT_XFERINFOFUNCTION, &AbortWhenStopping);
      curl_easy_setopt(curl_, CURLOPT_XFERINFODATA, &stop_requested_);
    }
    curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
    curl_error_[0] = '\0';
    const CURLcode rc = curl_easy_perform(curl_);
    if (rc != CURLE_OK) {
      last_error_ = curl_error_[0] != '\0' ? curl_error_ : curl_easy_strerror(rc);
      return PostResult::kRetry;
    }
    long status = 0;
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300) return PostResult::kAccepted;
    last_error_ = "HTTP " + std::to_string(status);
    if (status == 429 || status == 502 || status == 503 || status == 504) return PostResult::kRetry;
    return PostResult::kRejected;
  }

  static size_t DiscardBody(char*, size_t size, size_t count, void*) { return size * count; }
  // libcurl's progress callback: non-zero aborts the transfer.
  static int AbortWhenStopping(void* stop, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return static_cast<std::atomic<bool>*>(stop)->load(std::memory_order_relaxed) ? 1 : 0;
  }

  static constexpr std::chrono::milliseconds kFirstBackoff{100};

  // Constant after construction.
  const Options options_;
  const TraceSampler sampler_;

  // Counters, read by AppendMetrics from any thread.
  std::atomic<uint64_t> spans_exported_{0};
  std::atomic<uint64_t> dropped_queue_full_{0};
  std::atomic<uint64_t> dropped_export_failed_{0};
  std::atomic<uint64_t> requests_ok_{0};
  std::atomic<uint64_t> requests_failed_{0};

  mutable std::mutex mu_;
  std::condition_variable wake_;         // the export thread: a batch is full, flush, stop
  std::condition_variable finished_cv_;  // Flush(): records finished
  // Guarded by mu_.
  std::vector<RequestTrace> pending_;  // submitted, not yet taken by the export thread
  size_t queued_ = 0;                  // pending_ plus taken but not finished: bounded by max_queue
  uint64_t accepted_ = 0;              // records ever queued
  uint64_t finished_ = 0;              // of those, exported or dropped
  int flush_waiters_ = 0;
  bool flush_gave_up_ = false;  // a Flush timed out: the destructor does not flush again
  bool stopping_ = false;
  std::atomic<bool> stop_requested_{false};  // stopping_, read by the export thread unlocked

  // The export thread's own.
  std::vector<RequestTrace> exporting_;
  CURL* curl_ = nullptr;
  curl_slist* headers_ = nullptr;
  char curl_error_[CURL_ERROR_SIZE] = {};
  std::string last_error_;
  TimePoint last_failure_log_{};

  std::thread thread_;  // last: started once everything above exists
};

StatusOr<std::unique_ptr<OtlpTracer>> OtlpTracer::Create(Options options) {
  if (!(options.sample_ratio >= 0.0 && options.sample_ratio <= 1.0)) {
    return InvalidArgument("trace sample ratio must be within [0, 1]");
  }
  if (options.max_queue < 1 || options.max_queue > kMaxQueue)
    return InvalidArgument("trace queue size must be in 1.." + std::to_string(kMaxQueue));
  if (options.max_export_batch < 1) return InvalidArgument("trace export batch must be at least 1");
  if (options.export_interval.count() <= 0 || options.export_timeout.count() <= 0) {
    return InvalidArgument("trace export interval and timeout must be positive");
  }
  // Added to the clock's now: far past an hour it overflowed into the past, and the export
  // thread spun (probe 74).
  if (options.export_interval > kMaxExportInterval || options.export_timeout > kMaxExportInterval)
    return InvalidArgument("trace export interval and timeout must be at most an hour");
  if (!options.post) {
    auto endpoint = NormalizeEndpoint(options.endpoint);
    if (!endpoint.ok()) return endpoint.status();
    options.endpoint = std::move(endpoint).value();
    std::call_once(curl_init_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  }
  if (options.service_instance_id.empty()) options.service_instance_id = DefaultInstanceId();
  return std::unique_ptr<OtlpTracer>(new OtlpTracer(std::make_unique<Impl>(std::move(options))));
}

OtlpTracer::OtlpTracer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OtlpTracer::~OtlpTracer() = default;

std::optional<SpanContext> OtlpTracer::Start(const std::optional<SpanContext>& parent) {
  return impl_->Start(parent);
}

void OtlpTracer::Submit(RequestTrace trace) {
  impl_->Submit(std::move(trace));
}

bool OtlpTracer::Flush(std::chrono::milliseconds timeout) {
  return impl_->Flush(timeout);
}

void OtlpTracer::AppendMetrics(TextExposition* out) const {
  impl_->AppendMetrics(out);
}

}  // namespace harrier
