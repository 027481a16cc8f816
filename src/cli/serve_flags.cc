#include "cli/serve_flags.h"

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>
#include <type_traits>

namespace harrier {

const std::string& GrpcAddressOf(const ServeFlags& flags) {
  return flags.grpc_address.empty() ? flags.http_address : flags.grpc_address;
}

const std::string& MetricsAddressOf(const ServeFlags& flags) {
  return flags.metrics_address.empty() ? flags.http_address : flags.metrics_address;
}

// Flag combinations CLI11's per-flag checks cannot see; empty when fine.
std::string CheckFlagCombinations(const ServeFlags& flags) {
  if (flags.tls_cert.empty() != flags.tls_key.empty())
    return "--tls-cert and --tls-key go together: give both or neither";
  if (!flags.tls_client_ca.empty() && flags.tls_cert.empty())
    return "--tls-client-ca needs --tls-cert and --tls-key";
  if (flags.plain_http == "off" && flags.tls_cert.empty())
    return "--plain-http off leaves no REST port: it needs --tls-cert and --tls-key";
  if (flags.metrics_tls == "on" && flags.tls_cert.empty())
    return "--metrics-tls on needs --tls-cert and --tls-key";
  if (!flags.load_models.empty() && flags.model_control_mode != "explicit")
    return "--load-model needs --model-control-mode explicit (the other modes load every model)";
  if (!flags.access_log_file.empty() && flags.access_log != "on")
    return "--access-log-file needs --access-log on (without it nothing is written there)";
  // Given but empty ("--api-key-file $KEYS" with KEYS unset) served without keys, silently
  // (probe 74): the operator asked for keys, so the start fails closed.
  if (flags.api_key_file_given && flags.api_key_file.empty())
    return "--api-key-file is empty: give the key file's path (or leave the flag out to serve "
           "without keys)";
  if (flags.access_log_file_given && flags.access_log_file.empty())
    return "--access-log-file is empty: give a file (or leave the flag out for stderr)";
  // A body of the largest size could then never arrive, and each try would be told to retry
  // (503) on an idle server (probe 75).
  if (flags.max_incoming_body_bytes > 0 && flags.max_incoming_body_bytes < flags.max_body_bytes)
    return "--max-incoming-body-bytes " + std::to_string(flags.max_incoming_body_bytes) +
           " is below --max-body-bytes " + std::to_string(flags.max_body_bytes) +
           ": a body of the largest size could never arrive; raise it, or lower --max-body-bytes";
  if (flags.metrics_require_key && flags.api_key_file.empty())
    return "--metrics-require-key needs --api-key-file (there would be no key to present)";
  return {};
}

namespace {

// Whether two listeners on one port would collide: the same address, or a wildcard and an
// address it covers. "::" covers IPv4 too (Linux binds it dual-stack); "0.0.0.0" covers only
// IPv4, so it and "::1" bind side by side (probe 40).
bool Overlap(const boost::asio::ip::address& a, const boost::asio::ip::address& b) {
  if (a == b) return true;
  if (a.is_v4() == b.is_v4()) return a.is_unspecified() || b.is_unspecified();
  const boost::asio::ip::address& v6 = a.is_v6() ? a : b;
  return v6.is_unspecified();
}

}  // namespace

std::string CheckListeners(const ServeFlags& flags) {
  struct Listener {
    const char* port_flag;
    int port;
    const char* address_flag;
    const std::string& address;
  };
  std::vector<Listener> listeners;
  if (flags.plain_http != "off")
    listeners.push_back({"--http-port", flags.http_port, "--http-address", flags.http_address});
  if (!flags.tls_cert.empty())
    listeners.push_back({"--https-port", flags.https_port, "--http-address", flags.http_address});
  listeners.push_back({"--grpc-port", flags.grpc_port,
                       flags.grpc_address.empty() ? "--http-address" : "--grpc-address",
                       GrpcAddressOf(flags)});
  listeners.push_back({"--metrics-port", flags.metrics_port,
                       flags.metrics_address.empty() ? "--http-address" : "--metrics-address",
                       MetricsAddressOf(flags)});
  std::vector<boost::asio::ip::address> parsed;
  for (const Listener& l : listeners) {
    boost::system::error_code ec;
    parsed.push_back(boost::asio::ip::make_address(l.address, ec));
    if (ec) return std::string(l.address_flag) + " '" + l.address + "' is not an IP address";
  }
  for (std::size_t i = 0; i < listeners.size(); ++i) {
    for (std::size_t j = i + 1; j < listeners.size(); ++j) {
      if (listeners[i].port == 0 || listeners[i].port != listeners[j].port) continue;
      if (!Overlap(parsed[i], parsed[j])) continue;
      return std::string(listeners[i].port_flag) + " and " + listeners[j].port_flag + " are both " +
             std::to_string(listeners[i].port) +
             " on overlapping addresses: each listener needs a port of its own";
    }
  }
  return {};
}

uint64_t GrpcMaxConnections(const ServeFlags& flags, uint64_t rest_connections,
                            uint64_t descriptor_limit) {
  if (flags.max_connections > 0) return flags.max_connections;
  const uint64_t reserve = HttpServer::DescriptorReserveFor(descriptor_limit);
  const uint64_t wanted =
      std::max(std::min<uint64_t>(64, rest_connections / 2), rest_connections / 16);
  return std::max<uint64_t>(1, std::min(wanted, reserve / 2));
}

uint64_t IncomingBodyLimit(const ServeFlags& flags, uint64_t usable_memory) {
  if (flags.max_incoming_body_bytes > 0) return flags.max_incoming_body_bytes;
  return std::max(flags.max_body_bytes, usable_memory / 4);
}

// Ranges of the HTTP/2 and TLS tuning flags (RFC 9113 §6.5.2 for the HTTP/2 ones); empty when
// fine. Checked before anything starts, so a bad value exits 1 at once.
std::string CheckTransportFlags(const ServeFlags& flags) {
  constexpr int64_t kMaxWindow = 0x7fffffff;  // 2^31-1
  if (flags.http2_initial_window_bytes < 1 || flags.http2_initial_window_bytes > kMaxWindow)
    return "--http2-initial-window-bytes must be in 1..2147483647";
  if (flags.http2_connection_window_bytes < 65535 ||
      flags.http2_connection_window_bytes > kMaxWindow)
    return "--http2-connection-window-bytes must be in 65535..2147483647";
  if (flags.http2_max_frame_bytes < 16384 || flags.http2_max_frame_bytes > 16777215)
    return "--http2-max-frame-bytes must be in 16384..16777215";
  if (flags.tls_ticket_rotation_s < 1 || flags.tls_ticket_rotation_s > 7 * 24 * 3600)
    return "--tls-ticket-rotation-s must be in 1..604800 (7 days)";
  return {};
}

namespace {

// A float flag's value must be a finite number: CLI11's Range lets NaN through (every comparison
// with it is false), and --shutdown-delay-secs nan meant no delay at all (probe 39).
const CLI::Validator kNumber(
    [](std::string& value) -> std::string {
      char* end = nullptr;
      const double d = std::strtod(value.c_str(), &end);
      // An empty value read as 0 (probe 74: --trace-sample-ratio '' traced nothing).
      if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(d))
        return "must be a finite number, got '" + value + "'";
      return {};
    },
    "NUMBER");

// Every whole-number flag: decimal digits (with an optional '-' for a signed one) within the
// type. CLI11 reads with strtoll/strtoull base 0, so 0x10, +5 and ' 5' passed, and a value past
// int64 was cut to its largest (probe 74: --trace-export-interval-ms 2^64 became 2^63-1 and
// overflowed later).
template <typename T>
CLI::Validator DecimalInteger() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const bool negative = std::is_signed_v<T> && value.starts_with('-');
        const std::string_view digits = std::string_view(value).substr(negative ? 1 : 0);
        if (digits.empty() ||
            !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
          return "must be a whole number in decimal, got '" + value + "'";
        T parsed{};
        if (std::from_chars(value.data(), value.data() + value.size(), parsed).ec != std::errc())
          return "is out of range, got '" + value + "'";
        // CLI11 converts with base 0 after this: a leading zero would read as octal (probe 77:
        // --max-connections 010 gave 8). The value handed on is the number in plain decimal.
        value = std::to_string(parsed);
        return {};
      },
      "");
}

}  // namespace

void AddServeFlags(CLI::App* serve, ServeFlags* flags) {
  serve
      ->add_option("--model-repository", flags->model_repository,
                   "Triton-layout model repository: <dir>/<model>/[config.pbtxt] and "
                   "<dir>/<model>/<version>/model.onnx")
      ->required();
  serve
      ->add_option("--model-control-mode", flags->model_control_mode,
                   "none: load every model at start; poll: also apply the repository's changes "
                   "every --repository-poll-secs; explicit: load --load-model at start and the "
                   "rest through the load/unload API")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "poll", "explicit"}));
  serve
      ->add_option("--repository-poll-secs", flags->repository_poll_secs,
                   "Seconds between repository polls in poll mode")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  serve
      ->add_option("--model-load-thread-count", flags->model_load_thread_count,
                   "Models loaded at once, at start and through the load API (each model's "
                   "loads and unloads still one at a time, in order)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  serve
      ->add_option("--model-load-retain-mb", flags->model_load_retain_mb,
                   "Memory (MiB) that loads and reloads free and may keep for the next load "
                   "instead of giving it back to the system at once (an unload always gives "
                   "it back); 0: after every load")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  serve->add_option("--load-model", flags->load_models,
                    "In explicit mode, a model to load at start (repeatable; * for all)");
  serve
      ->add_option("--http-address", flags->http_address,
                   "Address the HTTP (and HTTPS) server binds; also gRPC's and metrics' unless "
                   "--grpc-address / --metrics-address say otherwise")
      ->capture_default_str();
  serve->add_option("--grpc-address", flags->grpc_address,
                    "Address the gRPC server binds (default: --http-address)");
  serve->add_option("--metrics-address", flags->metrics_address,
                    "Address the metrics server binds (default: --http-address)");
  serve->add_option("--http-port", flags->http_port, "HTTP port (0: pick a free one)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  serve
      ->add_option("--grpc-port", flags->grpc_port,
                   "gRPC port (KServe v2 gRPC, TLS with --tls-cert; 0: pick a free one; "
                   "docs/grpc.md)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  serve
      ->add_option("--tls-cert", flags->tls_cert,
                   "PEM certificate chain: with --tls-key, serve REST over TLS on --https-port "
                   "(h2 or http/1.1 by ALPN) and gRPC over TLS")
      ->check(CLI::ExistingFile);
  serve->add_option("--tls-key", flags->tls_key, "PEM private key for --tls-cert")
      ->check(CLI::ExistingFile);
  serve
      ->add_option("--tls-client-ca", flags->tls_client_ca,
                   "PEM CA bundle: require client certificates signed by it (mutual TLS)")
      ->check(CLI::ExistingFile);
  serve
      ->add_option("--https-port", flags->https_port,
                   "TLS port for REST when --tls-cert is given (0: pick a free one)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  serve
      ->add_option("--plain-http", flags->plain_http,
                   "Serve plain HTTP (HTTP/1.1 and h2c) on --http-port; 'off' needs --tls-cert")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  serve
      ->add_option("--http2-upgrade", flags->http2_upgrade,
                   "Honour 'Upgrade: h2c' on --http-port (HTTP/2 after a 101); 'off' serves such "
                   "a request as HTTP/1.1. Leave off behind a proxy that forwards Upgrade: the "
                   "upgraded connection is a tunnel past the proxy's rules. Prior-knowledge h2c "
                   "is served either way")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  serve
      ->add_option("--metrics-tls", flags->metrics_tls,
                   "Serve the metrics port over TLS only (the --tls-cert certificate, and "
                   "--tls-client-ca's client certificates if given); 'on' needs --tls-cert")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  serve
      ->add_option("--metrics-port", flags->metrics_port,
                   "Prometheus metrics port: GET /metrics (0: pick a free one; docs/metrics.md)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  serve
      ->add_option("--http2-max-concurrent-streams", flags->http2_max_concurrent_streams,
                   "HTTP/2 (h2c and h2): streams a client may have open at once per connection")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
  serve
      ->add_option("--http2-initial-window-bytes", flags->http2_initial_window_bytes,
                   "HTTP/2: SETTINGS_INITIAL_WINDOW_SIZE, how much of a stream's request body a "
                   "client may send ahead (1..2147483647)")
      ->capture_default_str();
  serve
      ->add_option("--http2-connection-window-bytes", flags->http2_connection_window_bytes,
                   "HTTP/2: the connection's receive window, all streams together "
                   "(65535..2147483647)")
      ->capture_default_str();
  serve
      ->add_option("--http2-max-frame-bytes", flags->http2_max_frame_bytes,
                   "HTTP/2: SETTINGS_MAX_FRAME_SIZE, the largest frame payload a client may send "
                   "(16384..16777215)")
      ->capture_default_str();
  serve
      ->add_option("--tls-ticket-rotation-s", flags->tls_ticket_rotation_s,
                   "TLS session-ticket key period in seconds; the previous key is still accepted, "
                   "so a ticket resumes for at most two periods (1..604800)")
      ->capture_default_str();
  serve
      ->add_option("--http-threads", flags->http_threads,
                   "HTTP I/O threads (0: one per usable core)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  serve
      ->add_option("--max-body-bytes,--http-max-input-size", flags->max_body_bytes,
                   "Largest request body, also once decoded; larger ones get 413 "
                   "(--http-max-input-size: Triton's name)")
      ->capture_default_str()
      // Not CLI::PositiveNumber: it let -1 through (CLI11 reads it as 2^64-1 into an unsigned
      // flag: no limit at all), and its message printed a 300-digit bound.
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  serve
      ->add_option("--max-incoming-body-bytes", flags->max_incoming_body_bytes,
                   "Bytes of request bodies still arriving that the server holds at once, all "
                   "connections of the REST and gRPC ports together; a request whose body would "
                   "pass it gets 503 with Retry-After. 0: a quarter of the memory the server may "
                   "use (physical, or its cgroup's limit), at least --max-body-bytes")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 50));
  serve
      ->add_option(
          "--max-connections", flags->max_connections,
          "Most REST connections open at once (HTTP/1.1, HTTP/2, TLS), plain and TLS "
          "ports together; one more is closed as soon as it is accepted. 0: the "
          "RLIMIT_NOFILE soft limit less a reserve of an eighth of it (at least 64, at most "
          "three quarters): 896 of 1024")
      ->capture_default_str()
      // CLI11 reads -1 as 2^64-1 into an unsigned flag: a bound, or a "limit" no connection
      // passes (probe 39).
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 30));
  serve
      ->add_option("--max-connections-per-client", flags->max_connections_per_client,
                   "Most connections one client address may hold open at once on the REST "
                   "ports (plain and TLS together), and as many on the gRPC port; one more is "
                   "closed as soon as it is accepted. 0: no such limit. (The metrics port "
                   "allows 8 per address, always.)")
      ->capture_default_str()
      ->check(CLI::Range(uint32_t{0}, uint32_t{1} << 30));
  serve
      ->add_option("--max-header-bytes", flags->max_header_bytes,
                   "Largest request line + headers; larger ones get 431")
      ->capture_default_str()
      ->check(CLI::Range(1024u, 16u << 20));
  serve
      ->add_option("--max-tensor-elements", flags->max_tensor_elements,
                   "Most elements one input tensor may claim; more get 413")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max()));
  serve
      ->add_option("--http-header-timeout-secs", flags->header_timeout_secs,
                   "A request's line and headers must arrive within this time (else 408)")
      ->capture_default_str()
      ->check(kNumber)
      ->check(CLI::Range(0.001, 86400.0));
  serve
      ->add_option("--http-body-timeout-secs", flags->body_timeout_secs,
                   "Longest pause inside a request body (else 408)")
      ->capture_default_str()
      ->check(kNumber)
      ->check(CLI::Range(0.001, 86400.0));
  serve
      ->add_option(
          "--http-refusal-hold-ms", flags->refusal_hold_ms,
          "A 429 for a connection refused twice in the last 100 ms (each within 50 ms of the "
          "last) is held this long, its body unread, so clients that ignore Retry-After "
          "cannot spin (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{10'000}));
  serve
      ->add_option("--io-busy-poll-us", flags->busy_poll_us,
                   "An I/O thread serving one client that sends its next request at once polls "
                   "this long before it sleeps (lower latency for that CPU; 0: off)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1'000}));
  serve
      ->add_option("--http-idle-timeout-secs", flags->idle_timeout_secs,
                   "Idle keep-alive connections are closed after this time")
      ->capture_default_str()
      ->check(kNumber)
      ->check(CLI::Range(0.001, 86400.0));
  serve
      ->add_option("--id", flags->server_id,
                   "The server's name in server metadata (Triton's --id; its clients' examples "
                   "expect 'triton')")
      ->capture_default_str()
      ->check([](const std::string& id) {
        if (id.empty() || id.size() > 128) return std::string("1 to 128 characters");
        for (unsigned char c : id) {
          if (c < 0x20 || c == 0x7f) return std::string("no control characters");
        }
        return std::string();
      });
  serve
      ->add_option("--exit-timeout-secs", flags->exit_timeout_secs,
                   "On SIGINT/SIGTERM, how long in-flight requests may take to finish")
      ->capture_default_str()
      ->check(CLI::Range(0, 86400));
  serve
      ->add_option("--shutdown-delay-secs", flags->shutdown_delay_secs,
                   "On SIGINT/SIGTERM, answer 503 on /v2/health/ready (gRPC ServerReady: false) "
                   "but keep serving for this long, so that load balancers stop sending, before "
                   "the listeners close; a second signal skips the rest (docs/deployment.md)")
      ->capture_default_str()
      ->check(kNumber)
      ->check(CLI::Range(0.0, 3600.0));
  // Admission control: docs/admission.md.
  auto rate_limit = [](const std::string& text) {
    auto parsed = harrier::ParseRateLimit(text);
    return parsed.ok() ? std::string() : parsed.status().message();
  };
  serve
      ->add_option("--max-inflight", flags->max_inflight,
                   "Requests admitted and not yet answered, across all models; more get 429 "
                   "(0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  serve
      ->add_option("--cpu-affinity", flags->cpu_affinity,
                   "Pin each model instance's worker thread to one CPU, round robin over the "
                   "process's CPUs in load order (ONNX Runtime's own pool threads stay unpinned)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  serve
      ->add_option("--inline-execution-max-us", flags->inline_execution_max_us,
                   "Run a request on the thread that received it (no hand-off to the model's "
                   "worker) when nothing is queued, an instance is idle and the model's recent "
                   "executions took at most this many microseconds per request (0: never)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{0}, uint64_t{10'000'000}));
  serve
      ->add_option("--inline-execution", flags->inline_execution,
                   "Which requests to a short model may run on the I/O thread that read them: "
                   "auto (those from the thread's only active connection, REST and gRPC), grpc "
                   "(every gRPC request, no REST one), all, off")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "grpc", "all", "off"}));
  serve
      ->add_option("--overload-protection", flags->overload_protection,
                   "Per-model admission on the predicted queue delay: answers 429 instead of "
                   "letting queue delay grow past its target")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  serve
      ->add_option("--overload-target-queue-delay-us", flags->overload_target_queue_delay_us,
                   "Queue delay overload protection holds each model to (0: derived from the "
                   "model's batch-1 service time, half of it)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{3'600'000'000}));
  serve
      ->add_option("--rate-limit-per-model", flags->rate_limit_per_model,
                   "Token bucket for each model version's requests, RPS[:BURST] or off "
                   "(config parameter harrier.rate_limit.rps overrides)")
      ->capture_default_str()
      ->check(rate_limit);
  serve
      ->add_option("--rate-limit-per-client", flags->rate_limit_per_client,
                   "Token bucket per client key (X-Client-Id header; none = one anonymous "
                   "client), across all models: RPS[:BURST] or off")
      ->capture_default_str()
      ->check(rate_limit);
  serve
      ->add_option("--rate-limit-max-clients", flags->rate_limit_max_clients,
                   "Client keys a rate limiter remembers (least recently seen are forgotten)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 24));
  serve
      ->add_option("--allow-client-shm", flags->allow_client_shm,
                   "Triton's system shared memory: clients may register POSIX shared-memory "
                   "objects of this host (/dev/shm) and send and receive tensors through them "
                   "(true/false; only for clients you trust with the server user's shared memory)")
      ->capture_default_str();
  serve
      ->add_option("--generation-heartbeat-secs", flags->generation_heartbeat_secs,
                   "A ': ping' comment on a token stream that sent nothing for this long (0: "
                   "none)")
      ->capture_default_str()
      ->check(kNumber)
      ->check(CLI::Range(0.0, 3600.0));
  serve
      ->add_option("--generation-disconnect-grace-secs", flags->generation_disconnect_grace_secs,
                   "How long a generation whose client has gone keeps running, so that a client "
                   "that reconnects (GET /v1/streams/{id}) loses nothing (0: it stops at once)")
      ->capture_default_str()
      ->check(kNumber)
      ->check(CLI::Range(0.0, 3600.0));
  serve
      ->add_option("--generation-stream-retention-secs", flags->generation_stream_retention_secs,
                   "How long a token stream's events stay resumable after it ends")
      ->capture_default_str()
      ->check(kNumber)
      ->check(CLI::Range(1.0, 86400.0));
  serve
      ->add_option("--generation-stream-buffer-bytes", flags->generation_stream_buffer_bytes,
                   "Bytes a token stream may hold for a client that does not read before it "
                   "ends with an error event and its generation stops")
      ->capture_default_str()
      ->check(CLI::Range(size_t{4096}, size_t{1} << 30));
  serve->add_option("--log-format", flags->log_format, "Log lines as text or as JSON objects")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  serve
      ->add_option("--log-verbose", flags->log_verbose,
                   "0: info; 1: debug; 2: trace (and ONNX Runtime's info)")
      ->capture_default_str()
      ->check(CLI::Range(0, 10));
  serve
      ->add_option("--access-log", flags->access_log,
                   "One line per REST request and gRPC inference (request id, model, version, "
                   "input shapes, status, bytes, stage durations) in --log-format, written off "
                   "the request path (docs/logging.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  serve
      ->add_option("--access-log-file", flags->access_log_file,
                   "Write the access log to this file (appended to) instead of stderr")
      ->each([flags](const std::string&) { flags->access_log_file_given = true; });

  // Access control: docs/security.md. The file and the restrictions are checked at startup
  // (exit 1).
  serve
      ->add_option("--api-key-file", flags->api_key_file,
                   "JSON file of API keys (their SHA-256, scopes, rate limits); re-read when it "
                   "changes. Every route but health then needs a key with its scope "
                   "(Authorization: Bearer KEY or X-API-Key; gRPC authorization metadata)")
      ->each([flags](const std::string&) { flags->api_key_file_given = true; });
  serve->add_flag("--metrics-require-key", flags->metrics_require_key,
                  "GET /metrics needs an API key with the 'metrics' scope (default: open)");
  serve->add_option("--http-restricted-api", flags->http_restricted_api,
                    "Triton's API[,API...]:HEADER=VALUE: REST requests to those API groups must "
                    "carry HEADER: VALUE (repeatable)");
  serve->add_option("--grpc-restricted-protocol", flags->grpc_restricted_protocol,
                    "Triton's API[,API...]:HEADER=VALUE for gRPC calls (metadata; repeatable)");
  serve
      ->add_option("--allowed-origins", flags->allowed_origins,
                   "Origins (scheme://host[:port], or *) whose web pages may send REST requests "
                   "that change state through a browser; by default a browser's POST, PUT or "
                   "DELETE that carries Origin is refused 403 (cross-site request forgery)")
      ->delimiter(',');
  serve
      ->add_option("--allowed-hosts", flags->allowed_hosts,
                   "Host names the REST port answers to, besides IP addresses and localhost "
                   "(others: 403); default: any. Set it where a browser can reach the server, "
                   "against DNS rebinding")
      ->delimiter(',');

  // Tracing: docs/tracing.md. Values are checked at startup (exit 1), with the endpoint.
  serve->add_option("--trace-endpoint", flags->trace_endpoint,
                    "OTLP/HTTP traces URL (http://collector:4318/v1/traces) to export request "
                    "traces to; empty: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, then "
                    "OTEL_EXPORTER_OTLP_ENDPOINT, else tracing is off");
  serve
      ->add_option("--trace-sample-ratio", flags->trace_sample_ratio,
                   "Share of requests without a valid traceparent that are traced, 0..1 (a "
                   "client's traceparent decides by its sampled flag)")
      ->capture_default_str()
      ->check(kNumber);
  serve
      ->add_option("--trace-queue-size", flags->trace_queue_size,
                   "Traced requests waiting for export, 1..1048576; more are dropped and counted")
      ->capture_default_str();
  serve
      ->add_option("--trace-export-interval-ms", flags->trace_export_interval_ms,
                   "How often queued spans are exported (sooner when a batch is full), "
                   "1..3600000")
      ->capture_default_str();
  // First of each whole-number option's validators (transform() puts it in front), so that the
  // range check reads the plain decimal it hands on.
  for (CLI::Option* option : serve->get_options()) {
    const std::string type = option->get_type_name();
    if (type.starts_with("INT")) option->transform(DecimalInteger<int64_t>());
    if (type.starts_with("UINT")) option->transform(DecimalInteger<uint64_t>());
  }
}

InlinePolicies InlinePoliciesOf(const ServeFlags& flags) {
  const std::string& mode = flags.inline_execution;
  if (mode == "grpc") return {InlinePolicy::kNever, InlinePolicy::kAlways};
  if (mode == "all") return {InlinePolicy::kAlways, InlinePolicy::kAlways};
  if (mode == "off") return {InlinePolicy::kNever, InlinePolicy::kNever};
  return {};  // auto
}

}  // namespace harrier
