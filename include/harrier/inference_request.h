// InferenceRequest / InferenceResponse: the transport-independent form of one inference call.
//
// A codec (KServe JSON/binary today, gRPC later) builds an InferenceRequest from the wire; the
// model manager validates it against the model and runs it; the codec turns the response back
// into bytes. Neither type knows about sockets or engines.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "harrier/cancellation.h"
#include "harrier/status.h"
#include "harrier/tensor.h"
#include "harrier/trace.h"

namespace harrier {

// A request/tensor parameter value: KServe allows bool, int64, double and string.
using ParameterValue = std::variant<bool, int64_t, double, std::string>;
using Parameters = std::map<std::string, ParameterValue, std::less<>>;

// One output the client asked for.
struct RequestedOutput {
  std::string name;
  // Send the data as raw bytes after the JSON header (binary tensor extension).
  bool binary_data = false;
  // Classification extension: return the top `classification` entries as BYTES
  // "value:index" instead of the raw tensor ("value:index:label" with labels); 0 = off.
  int64_t classification = 0;
  Parameters parameters;  // every other parameter as sent (the two above are read out)
  // The output's classification labels (the config's label_filename, line i for index i), set
  // by the front end from ServableModel::ClassificationLabels for a classification; null: none.
  std::shared_ptr<const std::vector<std::string>> labels;
};

// What one request allows the scheduler (InferenceRequest::allow_inline; docs/scheduling.md,
// "Inline execution").
enum class InlineAllowance : uint8_t {
  kNever,
  // Only while the submitting thread is the only thread that has submitted to the model
  // version lately (ModelScheduler's contention window): then running it there makes no other
  // thread's requests wait for the instance, and saves the two hand-offs.
  kUncontended,
  kAlways,
};

struct InferenceRequest {
  std::string model_name;
  std::optional<int64_t> model_version;  // nullopt: the latest ready version
  std::string id;                        // echoed in the response; may be empty
  Parameters parameters;

  // Inputs in the order sent. Their data point into `body` (binary extension, or a BYTES/JSON
  // value copied out of it) or into a buffer the tensor owns.
  std::vector<Tensor> inputs;
  // Empty: every model output, in the model's order, as JSON (unless `binary_data_output`).
  std::vector<RequestedOutput> outputs;
  // Request parameter `binary_data_output`: default for outputs not listed in `outputs`.
  bool binary_data_output = false;

  // The raw request body, shared so that input tensors can borrow from it: the string never
  // moves while any holder lives.
  std::shared_ptr<const std::string> body;

  // When the request was received (steady clock), for queue and total latency statistics.
  std::chrono::steady_clock::time_point received_at{};

  // --- Scheduling: set by the codec and the transport, honoured by the scheduler ---------------
  // Priority level (request parameter `priority`): 0 = the model's default level; 1 is the
  // most urgent, as in Triton.
  uint64_t priority = 0;
  // Request parameter `timeout` in microseconds, counted from received_at; 0 = none. Whether it
  // may override the model's default timeout is the model's queue policy
  // (allow_timeout_override).
  uint64_t timeout_us = 0;
  // A deadline set by the transport (HTTP header X-Request-Timeout-Us, gRPC grpc-timeout);
  // time_point::max() = none. Past it the request is answered kDeadlineExceeded.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // The transport's clients cancel a request when its deadline passes, by their own clock, which
  // started before the request arrived (gRPC: every client cancels the call at its grpc-timeout
  // and reports DEADLINE_EXCEEDED): a cancellation at or just before the deadline is then counted
  // as the deadline's. False for HTTP, whose client that closes is a client that went away.
  bool client_cancels_at_deadline = false;
  // Cancelled by the transport when the client goes away; may be null (never cancelled).
  std::shared_ptr<CancellationToken> cancellation;
  // Who is asking, for per-client rate limits (X-Client-Id header); empty = anonymous.
  std::string client_id;
  // The request's server span when it is traced (valid and sampled), so that the scheduler can
  // tell a batch's traced requests about each other; invalid otherwise.
  SpanContext trace;
  // Whether the submitting thread may run the model itself when the scheduler allows inline
  // execution (docs/scheduling.md, "Inline execution"): set by front ends from their
  // InlinePolicy (`--inline-execution`).
  InlineAllowance allow_inline = InlineAllowance::kNever;

  // From a pool (src/core/inference_request.cc; issue 10): a codec makes one per request and
  // the model's worker frees it, so in a steady state it costs no allocation. The pool keeps at
  // most 256 free ones; any thread.
  static void* operator new(std::size_t size);
  static void operator delete(void* p, std::size_t size) noexcept;
};

// Which of a front end's requests may run inline (InferenceRequest::allow_inline;
// `--inline-execution`, docs/scheduling.md).
enum class InlinePolicy {
  kNever,
  // Those the transport reports as their I/O thread's sole requester (HttpRequest::
  // sole_requester): running them there holds up no other client. The others only while
  // their thread is the only one submitting to the model version (InlineAllowance::
  // kUncontended). The default.
  kSoleRequester,
  kAlways,
};

inline InlineAllowance AllowsInline(InlinePolicy policy, bool sole_requester) {
  switch (policy) {
    case InlinePolicy::kAlways: return InlineAllowance::kAlways;
    case InlinePolicy::kSoleRequester:
      return sole_requester ? InlineAllowance::kAlways : InlineAllowance::kUncontended;
    case InlinePolicy::kNever: break;
  }
  return InlineAllowance::kNever;
}

// Where a successful request's time went, in nanoseconds, as the model measured it (the same
// figures its statistics record). The transport adds encoding and total time itself.
struct InferenceTiming {
  uint64_t queue_ns = 0;          // waiting in the scheduler's queue
  uint64_t compute_input_ns = 0;  // validation, input preparation and batch assembly
  uint64_t compute_infer_ns = 0;  // the engine run

  // For tracing (include/harrier/trace.h), steady clock: when the request's batch started, its
  // engine run started and ended, and the batch's size in items and requests. Set whenever the
  // request ran.
  std::chrono::steady_clock::time_point batch_start{};
  std::chrono::steady_clock::time_point infer_start{};
  std::chrono::steady_clock::time_point infer_end{};
  int64_t batch_size = 0;
  size_t batch_requests = 0;
  // The server spans of all the traced requests in its batch, this request's own included (the
  // exporter skips the self-link), one vector shared by them; set only when the request is traced
  // (InferenceRequest::trace) and ran with other traced requests.
  std::shared_ptr<const std::vector<SpanContext>> batch_peers;
};

struct InferenceResponse {
  std::string model_name;
  int64_t model_version = 0;
  std::string id;
  Parameters parameters;
  // Outputs in the order requested (or the model's order when all were asked for).
  std::vector<Tensor> outputs;
  InferenceTiming timing;
};

// Called exactly once per request with the response or the error. May run on a worker thread:
// it must not block and should hand socket work back to the connection's own thread.
using InferCallback = std::function<void(StatusOr<InferenceResponse>)>;

}  // namespace harrier
